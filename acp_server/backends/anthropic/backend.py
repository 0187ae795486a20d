"""The Anthropic backend: `POST {base_url}/v1/messages` with `stream: true`, parsed from SSE.

The dialect (rendering, thinking signatures, event parsing) lives in `wire`; this
module does the HTTP: the `x-api-key` and `anthropic-version` headers, retries with a notice
before each wait (`_http.retrying`: 429, 5xx, 529 and `overloaded_error` frames that arrive before
any output), and a hint to check ANTHROPIC_API_KEY on 401/403.

Thinking: a request's thought level sets it (a budget, or adaptive thinking when the backend is
made with `adaptive_thinking`); without one, `thinking_budget` enables extended thinking
(`{"type": "enabled", "budget_tokens": N}`). Either way not for a request whose pending tool
calls lost their signed thinking blocks (the API would reject it). The blocks themselves travel in
`Message.extra` (see `wire`).

`context_window()`: the Messages API has no endpoint that tells a model's window, so it comes from
the constructor (configured), else the model catalogue (`catalog`), else the table below
(Anthropic's published windows by model family); `window_origin` says which.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncGenerator, AsyncIterator, Mapping

import httpx

from acp_server.backends._http import (
    BackendError,
    LazyClient,
    RetryPolicy,
    parsed,
    retrying,
    send,
)
from acp_server.backends.anthropic.wire import (
    CACHE_TTLS,
    EventParser,
    payload,
    thinking_fields,
)
from acp_server.backends.catalog import ModelFacts, lookup_at
from acp_server.backends.images import ImageInput
from acp_server.backends.keys import ApiKey
from acp_server.messages import Event, Finish, ModelRequest

log = logging.getLogger(__name__)

API_VERSION = "2023-06-01"
API_KEY_ENV = "ANTHROPIC_API_KEY"
DEFAULT_MAX = 8192  # the reply's cap for a model the catalogue does not know
# (model id prefix, window in tokens), first match wins. Every current Claude model has 200k by
# default (Sonnet 4/4.5's 1M window needs a beta header: pass `context_window=` for it).
WINDOWS = (
    ("claude-instant", 100_000),
    ("claude-2.0", 100_000),
    ("claude-", 200_000),
)


def known_window(model: str) -> int | None:
    """The documented window of a Claude model family; None for names this table does not know
    (a gateway serving some other model under the Anthropic dialect)."""
    name = model.lower().rsplit("/", 1)[-1]  # gateways may prefix a provider: "anthropic/claude-"
    for prefix, window in WINDOWS:
        if name.startswith(prefix):
            return window
    return None


def _window(model: str, configured: int | None, facts: ModelFacts | None) -> tuple[int | None, str]:
    """(window, where it comes from): configured, else the catalogue's, else this table's."""
    if configured:
        return configured, "the configuration file"
    if facts is not None and facts.window:
        return facts.window, facts.source
    window = known_window(model)
    return window, ("the documented window of its model family" if window else "")


class AnthropicBackend:
    """Streams rounds from the Anthropic Messages API. Close with `aclose()`."""

    def __init__(
        self,
        base_url: str,
        model: str,
        api_key: str | None = None,
        *,
        api_key_env: str | None = None,
        environ: Mapping[str, str] | None = None,
        images: bool | None = None,
        max_tokens: int | None = None,
        thinking_budget: int | None = None,
        adaptive_thinking: bool = False,
        context_window: int | None = None,
        headers: Mapping[str, str] | None = None,
        retry: RetryPolicy = RetryPolicy(),  # noqa: B008 - frozen, so sharing is safe
        connect_timeout: float = 10.0,
        read_timeout: float = 300.0,
        first_byte_timeout: float | None = None,
        transport: httpx.AsyncBaseTransport | None = None,
        cache_ttl: str | None = None,
    ) -> None:
        base = base_url.rstrip("/")
        self.url = str(httpx.URL(base if base.endswith("/v1") else f"{base}/v1")) + "/messages"
        self.model = model
        facts = lookup_at(model, base)
        # The reply's cap when a request sets none (the API needs one): the model's output
        # limit from the catalogue, else 8,192 (a long file edit needs more than the old 4K).
        self.max_tokens = max_tokens or (facts.output if facts and facts.output else DEFAULT_MAX)
        self.thinking_budget = thinking_budget
        self.adaptive_thinking = adaptive_thinking  # Claude 4.6 and later: `{"type": "adaptive"}`
        self.retry = retry
        self.first_byte_timeout = read_timeout if first_byte_timeout is None else first_byte_timeout
        self._window, self.window_origin = _window(model, context_window, facts)
        # A key given here, else read from `api_key_env` (in `environ`) at every request.
        self._key = ApiKey(api_key, api_key_env, environ)
        self._headers = {"anthropic-version": API_VERSION, **(headers or {})}
        self._client = LazyClient(connect_timeout, read_timeout, transport, base)
        self._images = ImageInput(images)  # False: notes in place of images
        self.cache_ttl = cache_ttl if cache_ttl in CACHE_TTLS else None  # None: five minutes
        if cache_ttl and self.cache_ttl is None:
            log.warning("cache TTL %r is neither of %s: the default is used", cache_ttl, CACHE_TTLS)

    @property
    def label(self) -> str:
        return f"anthropic:{self.model}"

    @property
    def images(self) -> bool | None:
        """Whether the model reads images (None: not known; False also once it refused them)."""
        return self._images.known

    async def aclose(self) -> None:
        await self._client.aclose()

    async def context_window(self) -> int | None:
        return self._window

    def stream(self, request: ModelRequest) -> AsyncIterator[Event]:
        return retrying(lambda: self._attempt(request), self.retry)

    async def _attempt(self, request: ModelRequest) -> AsyncGenerator[Event, None]:
        """One streamed request; raises BackendError."""
        response = await self._open(request)
        parser = EventParser(self.model)
        async for event in parsed(response, parser):
            yield event
        reason = parser.final_reason()
        for event in parser.final_events():
            yield event
        yield Finish(reason)

    async def _open(self, request: ModelRequest) -> httpx.Response:
        request = self._images.fit(request)
        body = payload(
            self.model,
            request,
            max_tokens=self.max_tokens,
            thinking_budget=self.thinking_budget,
            adaptive=self.adaptive_thinking,
            cache_ttl=self.cache_ttl,
        )
        wanted = thinking_fields(
            request.thought_level, self.thinking_budget, self.adaptive_thinking
        )
        if wanted and "thinking" not in body:
            log.info("%s: thinking off: pending tool calls lost their thinking", self.label)
        client = self._http()
        try:
            return await send(
                client,
                client.build_request("POST", self.url, json=body, headers=self._request_headers()),
                first_byte_timeout=self.first_byte_timeout,
                api_key_env=self._key.variable or API_KEY_ENV,
            )
        except BackendError as failure:
            if failure.images_refused:
                self._images.refused(self.label)
            raise

    def prepare(self) -> None:
        """Make the HTTP client now (its TLS set-up costs ~15-30 ms), ahead of the first use."""
        self._client.get()

    def _http(self) -> httpx.AsyncClient:
        return self._client.get()

    def _request_headers(self) -> dict[str, str]:
        """The configured headers and the key as it is now (read at each request)."""
        key = self._key.value()
        return {"x-api-key": key, **self._headers} if key else dict(self._headers)
