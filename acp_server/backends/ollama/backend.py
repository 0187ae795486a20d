"""The Ollama backend: native `POST {base_url}/api/chat`, streamed as NDJSON.

One round is one streamed request (the dialect lives in `wire`); its prompt count, when
the server's cache made it net, is made whole again (`cache`). Around it, as in the
OpenAI backend: inline `<tool_call>` markup is recovered from the text (`CallRecovery`;
small local models often write calls as text), a `<think>…</think>` block opening the content
(older servers) becomes thoughts and a reply that was only thinking is shown as the answer
(`reasoning`), and transient failures are retried with a notice first (`_http.retrying`).
Ollama sends tool calls without ids; ids are made up here, unique per backend instance (a
random prefix, so a restarted server never repeats one already in history).

The context window — and the `options.num_ctx` sent with every request:

Ollama runs a model with a *runtime* window (`num_ctx`) that is usually far smaller than the length
it was trained for (`model_info["<arch>.context_length"]`): its default is 4k-256k depending on
VRAM, or `OLLAMA_CONTEXT_LENGTH`, and that default cannot be asked for. A prompt longer than the
runtime window is silently cut from the start. So this backend never leaves the window to the
server: it *sends* `options.num_ctx` and budgets for exactly what it sends, capped by the trained
length (a window beyond it is not one the model can use):

    num_ctx sent = the constructor's `num_ctx`
                   else the Modelfile's `PARAMETER num_ctx` (from `/api/show` `parameters`)
                   else min(trained length, `default_num_ctx`)   # 32768: agents need room,
                                                                  # and the KV cache costs memory
    window       = min(num_ctx sent, trained length)

`/api/show` is asked once, before the first chat request, and its answer cached. When it cannot
be had (an old or unreachable server), only the constructor's `num_ctx` is sent and is the window;
without one the window is unknown (None), never "unlimited".
"""

from __future__ import annotations

import itertools
import logging
import uuid
from collections.abc import AsyncGenerator, AsyncIterator, Mapping
from typing import Any

import httpx

from acp_server.backends._http import BackendError, LazyClient, RetryPolicy, lines, retrying, send
from acp_server.backends.images import ImageInput
from acp_server.backends.keys import ApiKey
from acp_server.backends.ollama.cache import PromptCache
from acp_server.backends.ollama.wire import (
    LineParser,
    payload,
    planned_num_ctx,
    reads_images,
    trained_length,
)
from acp_server.backends.reasoning import reasoning_as_answer, split_think_tags
from acp_server.backends.sampling import Sampling
from acp_server.backends.textcalls.recover import CallRecovery
from acp_server.messages import Event, Finish, ModelRequest, Usage

log = logging.getLogger(__name__)

DEFAULT_NUM_CTX = 32768
NOT_RUNNING_HINT = " Is Ollama running? Start it with `ollama serve`."


class OllamaBackend:
    """Streams rounds from an Ollama server's native chat API. Close with `aclose()`."""

    def __init__(
        self,
        base_url: str,
        model: str,
        *,
        num_ctx: int | None = None,
        default_num_ctx: int = DEFAULT_NUM_CTX,
        think: bool | str | None = None,
        headers: Mapping[str, str] | None = None,
        api_key_env: str | None = None,
        environ: Mapping[str, str] | None = None,
        images: bool | None = None,
        retry: RetryPolicy = RetryPolicy(),  # noqa: B008 - frozen, so sharing is safe
        connect_timeout: float = 10.0,
        read_timeout: float = 300.0,
        first_byte_timeout: float | None = None,
        transport: httpx.AsyncBaseTransport | None = None,
        sampling: Sampling = Sampling(),  # noqa: B008 - frozen, so sharing is safe
    ) -> None:
        # An OpenAI-style URL (`…:11434/v1`) names the same server: the native API is at its root.
        self.base_url = str(httpx.URL(base_url.rstrip("/").removesuffix("/v1")))
        self.model = model
        self.retry = retry
        self.sampling = sampling  # temperature and top_p, sent among the options
        self.think = think  # Ollama's `think` (True/False, or "low"/"medium"/"high"); None: omit
        self.default_num_ctx = default_num_ctx
        self.connect_timeout = connect_timeout
        # How long the server may load the model and read the prompt before it answers.
        self.first_byte_timeout = read_timeout if first_byte_timeout is None else first_byte_timeout
        self._configured_num_ctx = num_ctx
        self._num_ctx = num_ctx  # what is sent; settled by discovery
        self._trained: int | None = None
        self._discovered = False
        self._client = LazyClient(connect_timeout, read_timeout, transport, self.base_url)
        # Local Ollama needs no key; a hosted or proxied one may want a bearer token, read from
        # `api_key_env` at every request.
        self._key = ApiKey(None, api_key_env, environ)
        self._headers = dict(headers or {})
        self._images = ImageInput(images)  # False: notes; settled by /api/show when unknown
        self._recovery = CallRecovery()
        self._cache = PromptCache()  # prompt counts net of the server's cache made whole
        self._id_prefix = f"call_{uuid.uuid4().hex[:8]}_"
        self._ids = itertools.count()

    @property
    def label(self) -> str:
        return f"ollama:{self.model}"

    @property
    def num_ctx(self) -> int | None:
        """The `options.num_ctx` sent with chat requests (None: not sent)."""
        return self._num_ctx

    @property
    def images(self) -> bool | None:
        """Whether the model reads images (None: not known; False also once it refused them)."""
        return self._images.known

    async def aclose(self) -> None:
        await self._client.aclose()

    def new_call_id(self) -> str:
        return f"{self._id_prefix}{next(self._ids)}"

    # ----- one round ----------------------------------------------------------------------------

    def stream(self, request: ModelRequest) -> AsyncIterator[Event]:
        return reasoning_as_answer(self._recovery.stream(self._round, request))

    def _round(self, request: ModelRequest) -> AsyncIterator[Event]:
        return split_think_tags(retrying(lambda: self._attempt(request), self.retry))

    async def _attempt(self, request: ModelRequest) -> AsyncGenerator[Event, None]:
        """One streamed request; raises BackendError."""
        await self.context_window()  # settles the num_ctx to send
        response = await self._open(request)
        parser = LineParser(self.new_call_id)
        try:
            async for line in lines(response):
                for event in parser.feed(line):
                    if isinstance(event, Usage):
                        event = self._cache.read(request.system, request.messages, event)
                    yield event
                if parser.done:
                    break
        finally:
            await response.aclose()
        yield Finish(parser.final_reason())

    async def _open(self, request: ModelRequest) -> httpx.Response:
        request = self._images.fit(request)
        body = payload(
            self.model,
            request,
            num_ctx=self._num_ctx,
            think=self.think,
            sampling=self.sampling.fields(),
        )
        client = self._http()
        try:
            return await send(
                client,
                client.build_request(
                    "POST", f"{self.base_url}/api/chat", json=body, headers=self._request_headers()
                ),
                first_byte_timeout=self.first_byte_timeout,
                api_key_env=self._key.variable,
            )
        except BackendError as failure:
            if failure.images_refused:
                self._images.refused(self.label)
            raise self._explained(failure) from None

    def _explained(self, failure: BackendError) -> BackendError:
        """The failure with a hint for the two mistakes everyone makes once."""
        hint = ""
        if failure.reason == "could not be reached":
            hint = NOT_RUNNING_HINT
        elif failure.status == 404 and "not found" in failure.body.lower():
            hint = f" Download it with `ollama pull {self.model}`."
        if not hint:
            return failure
        return BackendError(
            failure.message.rstrip() + hint,
            reason=failure.reason,
            transient=failure.transient,
            status=failure.status,
            retry_after=failure.retry_after,
            body=failure.body,
            context_overflow=failure.context_overflow,
            images_refused=failure.images_refused,
        )

    def prepare(self) -> None:
        """Make the HTTP client now (its TLS set-up costs ~15-30 ms), ahead of the first use."""
        self._client.get()

    def _http(self) -> httpx.AsyncClient:
        return self._client.get()

    def _request_headers(self) -> dict[str, str]:
        """The configured headers and the key as it is now (read at each request)."""
        key = self._key.value()
        auth = {"Authorization": f"Bearer {key}"} if key else {}
        return {**auth, **self._headers}

    # ----- context window -----------------------------------------------------------------------

    async def context_window(self) -> int | None:
        """min(num_ctx sent, trained length), as far as known; `/api/show` is asked once."""
        if not self._discovered:
            show = await self._show()
            if show is not None:
                self._settle(show)
                self._discovered = True
        known = [n for n in (self._num_ctx, self._trained) if n is not None]
        return min(known) if known else None

    @property
    def window_origin(self) -> str:
        """Where the window `context_window()` gives comes from, for a person."""
        sent = self._num_ctx
        if sent is None:
            return f"the server (POST {self.base_url}/api/show)" if self._trained else ""
        if self._trained is not None and self._trained < sent:
            return f"the model's trained length (POST {self.base_url}/api/show)"
        if self._configured_num_ctx:
            return "the configuration file (sent as num_ctx)"
        return f"the num_ctx sent to the server (POST {self.base_url}/api/show)"

    def _settle(self, show: Any) -> None:
        """Choose the num_ctx to send from what the server told (see the module docstring)."""
        self._trained = trained_length(show)
        chosen = planned_num_ctx(show, self._configured_num_ctx, self.default_num_ctx)
        self._num_ctx = chosen
        if self._images.known is None:
            self._images.known = reads_images(show)
        log.info("%s: trained for %s tokens; sending num_ctx %s", self.label, self._trained, chosen)

    async def _show(self) -> Any:
        """`POST /api/show` as JSON, or None when it cannot be had (discovery is best effort)."""
        try:
            response = await self._http().post(
                f"{self.base_url}/api/show",
                json={"model": self.model},
                headers=self._request_headers(),
                timeout=httpx.Timeout(self.connect_timeout),
            )
            response.raise_for_status()
            return response.json()
        except Exception as exc:  # never fail a turn over discovery
            log.debug("context window: /api/show failed: %s", exc)
            return None
