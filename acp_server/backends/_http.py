"""HTTP errors and retries for every HTTP backend, in one place (what an error *means* is
decided in `_errors`; its names are re-exported here).

An HTTP backend does three things with this module:

1. `send(client, request, ...)` makes one attempt: it returns the open 2xx response (the body is
   still unread, for streaming) or raises `BackendError` with a message for a person. httpx
   exceptions are translated here and nowhere else, so no traceback reaches the user.
2. `parsed(response, parser)` reads a streamed body as SSE frames, and `lines(response)` (for
   newline-delimited JSON) line by line, translating transport errors the same way.
3. `retrying(attempt, policy)` runs an attempt (an async generator of neutral events) again when
   it fails with a *transient* `BackendError` before it produced anything the user saw: it yields
   a `Notice` ("retrying in 4 s (attempt 2 of 4)") *before* sleeping, and turns the final failure
   into a `StreamError`. Once an attempt yielded a real event, a failure ends the round, so the
   user never sees a reply repeated.

Transient: HTTP 429, 500, 502, 503, 504, 529, "overloaded" errors, connection errors and resets,
and a timeout before the response started. Everything else is final: 401/403 (with a hint to
check the API key), context overflows (flagged, so callers can compact instead), a model that
refuses images (flagged too, even when a server says so with a 500: see `images`), other 4xx.

Secrets: a server may echo the key it was sent ("Incorrect API key provided: sk-…"). `send`
remembers the credentials each request carries, and every `BackendError` is redacted as it is
made (`redaction.redact`), so what the user is shown, what the store keeps and what the log
says never hold a key.

    async def _attempt(self, request):
        response = await send(self._client, build(request), api_key_env="MY_KEY")
        try:
            async for line in lines(response):
                ...yield events...
        finally:
            await response.aclose()

    def stream(self, request):
        return retrying(lambda: self._attempt(request), self.retry)
"""

from __future__ import annotations

import asyncio
import contextlib
import random
import ssl
from collections.abc import AsyncGenerator, AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from typing import Any, Protocol

import httpx

from acp_server import redaction
from acp_server.backends import _json
from acp_server.backends._errors import (
    MAX_DETAIL,
    SERVER,
    TRANSIENT_STATUS,
    BackendError,
    envelope_message,
    error_from_payload,
    error_from_response,
    plain_detail,
    retry_after_seconds,
)
from acp_server.backends._sse import SseEvent, SseStream
from acp_server.messages import Event, Notice, StreamError

# Error classification lives in `_errors`; these names are part of this module's interface.
__all__ = [
    "MAX_DETAIL",
    "SERVER",
    "TRANSIENT_STATUS",
    "BackendError",
    "LazyClient",
    "RetryPolicy",
    "envelope_message",
    "error_from_payload",
    "error_from_response",
    "lines",
    "read_json",
    "retry_after_seconds",
    "retrying",
    "send",
    "translate",
]

_MAX_BODY = 64 * 1024  # bytes of an error body read at all


@dataclass(frozen=True)
class RetryPolicy:
    """How often and how patiently a transient failure is retried."""

    attempts: int = 4  # in total, the first one included
    base_delay: float = 1.0  # seconds before the first retry (doubled each time, jittered)
    max_delay: float = 30.0  # cap of the exponential backoff
    retry_after_cap: float = 60.0  # cap of a server's `Retry-After`

    def delay(self, failures: int, retry_after: float | None = None) -> float:
        """Seconds to wait after the `failures`-th failed attempt."""
        if retry_after is not None:
            return min(max(retry_after, 0.0), self.retry_after_cap)
        backoff = min(self.max_delay, self.base_delay * 2.0 ** max(failures - 1, 0))
        return backoff / 2 + random.uniform(0, backoff / 2)


def tls_verify(*urls: str) -> ssl.SSLContext | bool:
    """How a client that asks only `urls` checks TLS. When every one is plain http (a local
    model server) it gets a strict context that trusts no certificate authority: loading the
    system's CA bundle costs ~27 ms of CPU, paid on the first prompt, and with no authority an
    https address fails verification instead of going unchecked (httpx follows no redirects
    unless asked, so no other address is reached). Otherwise the default verification."""
    if urls and all(url.lower().startswith("http://") for url in urls):
        return ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)  # CERT_REQUIRED, hostnames checked
    return True


class LazyClient:
    """A backend's one `httpx.AsyncClient`, made on first use. `aclose()` also serves to drop
    pooled connections a server has closed behind our back (the next `get()` opens anew)."""

    def __init__(
        self,
        connect_timeout: float,
        read_timeout: float,
        transport: httpx.AsyncBaseTransport | None,
        base_url: str = "",
    ) -> None:
        self._timeout = httpx.Timeout(read_timeout, connect=connect_timeout)
        self._transport = transport
        self._base_url = base_url
        self._client: httpx.AsyncClient | None = None

    def get(self) -> httpx.AsyncClient:
        if self._client is None:
            self._client = httpx.AsyncClient(
                timeout=self._timeout,
                transport=self._transport,
                verify=tls_verify(self._base_url) if self._base_url else True,
            )
        return self._client

    async def aclose(self) -> None:
        if self._client is not None:
            client, self._client = self._client, None
            await client.aclose()


# ----- one attempt ------------------------------------------------------------------------------


async def send(
    client: httpx.AsyncClient,
    request: httpx.Request,
    *,
    first_byte_timeout: float | None = None,
    api_key_env: str | None = None,
) -> httpx.Response:
    """Send one request; return the open 2xx response (caller closes it) or raise BackendError.

    `first_byte_timeout` bounds the wait for the response to start (a local server may read a
    long prompt for minutes before it answers); `api_key_env` names the variable a 401 hints at.
    """
    redaction.remember_headers(request.headers.items())
    if api_key_env:
        redaction.remember_variable(api_key_env)
    try:
        async with asyncio.timeout(first_byte_timeout):
            response = await client.send(request, stream=True)
    except TimeoutError:
        raise BackendError(
            f"{SERVER} did not start answering within {_seconds(first_byte_timeout or 0)}.",
            reason="did not start answering in time",
            transient=True,
        ) from None
    except httpx.HTTPError as exc:
        raise translate(exc, request.url) from None
    if response.is_success:
        return response
    try:
        body = await _read_capped(response)
    except httpx.HTTPError:
        body = ""
    finally:
        await response.aclose()
    raise error_from_response(response.status_code, response.headers, body, api_key_env)


async def lines(response: httpx.Response) -> AsyncIterator[str]:
    """The body's lines; transport errors become a (transient) BackendError."""
    try:
        async for line in response.aiter_lines():
            yield line
    except httpx.HTTPError as exc:
        raise translate(exc, response.request.url) from None


async def read_json(response: httpx.Response) -> Any:
    """The whole body as JSON; transport errors and non-JSON become a BackendError."""
    try:
        raw = await response.aread()
    except httpx.HTTPError as exc:
        raise translate(exc, response.request.url) from None
    try:
        return _json.loads(raw)
    except ValueError:
        detail = plain_detail(raw.decode("utf-8", "replace"), response.headers)
        message = f"{SERVER} answered with something that is not JSON"
        raise BackendError(message + (f": {detail}" if detail else ".")) from None


async def _read_capped(response: httpx.Response) -> str:
    data = b""
    async for chunk in response.aiter_bytes():
        data += chunk
        if len(data) >= _MAX_BODY:
            break
    return data[:_MAX_BODY].decode("utf-8", "replace")


# ----- error translation ------------------------------------------------------------------------


def translate(exc: httpx.HTTPError, url: httpx.URL | str | None = None) -> BackendError:
    """An httpx exception as a BackendError: connection trouble is transient, the rest final."""
    where = f" at {_origin(url)}" if url is not None else ""
    detail = str(exc) or type(exc).__name__
    if isinstance(exc, httpx.ConnectTimeout):
        return BackendError(
            f"Timed out connecting to {SERVER.lower()}{where}.",
            reason="could not be reached",
            transient=True,
        )
    if isinstance(exc, httpx.ConnectError):
        return BackendError(
            f"Could not connect to {SERVER.lower()}{where}: {detail}.",
            reason="could not be reached",
            transient=True,
        )
    if isinstance(exc, httpx.TimeoutException):
        return BackendError(
            f"{SERVER}{where} stopped answering (timed out).",
            reason="stopped answering (timed out)",
            transient=True,
        )
    if isinstance(exc, httpx.TransportError) and not isinstance(
        exc, httpx.UnsupportedProtocol | httpx.ProxyError
    ):
        return BackendError(
            f"{SERVER}{where} closed the connection: {detail}.",
            reason="closed the connection",
            transient=True,
        )
    return BackendError(f"The request to {SERVER.lower()}{where} failed: {detail}.")


def _origin(url: httpx.URL | str | None) -> str:
    parsed = httpx.URL(str(url))
    return f"{parsed.scheme}://{parsed.netloc.decode('ascii', 'replace')}"


def _seconds(delay: float) -> str:
    return f"{round(delay)} s" if delay >= 1 else f"{delay:.2g} s"


# ----- retrying ---------------------------------------------------------------------------------


def retry_notice(failure: BackendError, delay: float, attempt: int, attempts: int) -> Notice:
    """What the user reads before the wait: which failure, how long, which attempt is next."""
    return Notice(
        f"{SERVER} {failure.reason}; retrying in {_seconds(delay)} (attempt {attempt} of "
        f"{attempts})."
    )


async def retrying(
    attempt: Callable[[], AsyncGenerator[Event, None]],
    policy: RetryPolicy,
    *,
    sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
) -> AsyncIterator[Event]:
    """Run `attempt()` until one completes, retrying transient failures that happened before
    the attempt yielded anything but `Notice`s; the final failure becomes a `StreamError`."""
    for number in range(1, policy.attempts + 1):
        started = False
        try:
            async with contextlib.aclosing(attempt()) as events:
                async for event in events:
                    started = started or not isinstance(event, Notice)
                    yield event
            return
        except BackendError as failure:
            if started or not failure.transient or number >= policy.attempts:
                message = _final_message(failure, number)
                yield StreamError(message, failure.context_overflow, failure.images_refused)
                return
            delay = policy.delay(number, failure.retry_after)
            yield retry_notice(failure, delay, number + 1, policy.attempts)
            await sleep(delay)


def _final_message(failure: BackendError, attempts: int) -> str:
    if attempts <= 1:
        return failure.message
    return f"{failure.message.rstrip('.')} (gave up after {attempts} attempts)."


class FrameParser(Protocol):
    """A dialect's parser of a streamed reply: events from each SSE frame, until `done`."""

    done: bool

    def feed(self, sse: SseEvent) -> list[Event]: ...


async def parsed(response: httpx.Response, parser: FrameParser) -> AsyncIterator[Event]:
    """The events `parser` makes of `response`'s SSE frames until it is done; the response is
    closed at the end, however the iteration ends."""
    stream = SseStream()
    try:
        try:
            async for chunk in response.aiter_bytes():
                for sse in stream.feed(chunk):
                    for event in parser.feed(sse):
                        yield event
                    if parser.done:
                        return
            for sse in stream.end():
                for event in parser.feed(sse):
                    yield event
                if parser.done:
                    return
        except httpx.HTTPError as exc:
            raise translate(exc, response.request.url) from None
    finally:
        await response.aclose()
