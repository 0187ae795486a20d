"""The OpenAI-compatible chat-completions backend (OpenAI, vLLM, llama.cpp, LM Studio, gateways).

One round is `POST {base_url}/chat/completions` with `stream: true`, parsed from SSE into neutral
events (the dialect lives in `wire`). Around it, in this order:

- a reply that was only reasoning and finished with `stop` is shown as the answer, and a
  `<think>…</think>` block opening the content becomes thoughts (`reasoning`);
- inline tool calls are recovered from the text (`textcalls.CallRecovery`), with one retry when
  the reply's only call could not be read;
- transient failures are retried with backoff and a notice (`_http.retrying`); a failure after
  the user saw part of the reply ends the round instead, so nothing is shown twice — in
  particular a stream that closes mid-reply (no finish reason, no `[DONE]`) is retried only if
  it had produced no event yet;
- a strict server that answers 400/422 about `stream_options` gets the request again without it,
  and never sees it again from this backend instance;
- an empty 200 stream (llama.cpp may send no chunk at all when tools are offered) is asked again
  once with `stream: false`, and the JSON answer becomes the same events.

`context_window()`, in this order: the window the configuration gave (`window=`); what the server
reports at `GET {base_url}/models` (`context_length`, vLLM's `max_model_len`, ...) or llama.cpp's
`GET {root}/props` (`n_ctx`), cached; the model catalogue's (`catalog`: api.openai.com's
`/models` tells no window); else None. `window_origin` says which one answered.

OpenAI's reasoning models get `max_completion_tokens` in place of `max_tokens`.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncGenerator, AsyncIterator, Mapping
from typing import Any

import httpx

from acp_server.backends._http import (
    BackendError,
    LazyClient,
    RetryPolicy,
    parsed,
    read_json,
    retrying,
    send,
)
from acp_server.backends.catalog import ModelFacts, lookup_at, openai_reasoning
from acp_server.backends.images import ImageInput
from acp_server.backends.keys import ApiKey
from acp_server.backends.openai.wire import (
    ChunkParser,
    cache_fields,
    completion_events,
    payload,
)
from acp_server.backends.providers import is_local_url
from acp_server.backends.reasoning import reasoning_as_answer, split_think_tags
from acp_server.backends.sampling import Sampling
from acp_server.backends.textcalls.recover import CallRecovery
from acp_server.messages import Event, ModelRequest

log = logging.getLogger(__name__)

WINDOW_FIELDS = ("context_length", "max_model_len", "max_context_length", "context_window")


class OpenAIBackend:
    """Streams rounds from an OpenAI-compatible server. Close with `aclose()`."""

    def __init__(
        self,
        base_url: str,
        model: str,
        api_key: str | None = None,
        headers: Mapping[str, str] | None = None,
        *,
        api_key_env: str | None = None,
        environ: Mapping[str, str] | None = None,
        images: bool | None = None,
        retry: RetryPolicy = RetryPolicy(),  # noqa: B008 - frozen, so sharing is safe
        connect_timeout: float = 10.0,
        read_timeout: float = 300.0,
        first_byte_timeout: float | None = None,
        transport: httpx.AsyncBaseTransport | None = None,
        window: int | None = None,
        facts: ModelFacts | None = None,
        slots: int | None = None,
        sampling: Sampling = Sampling(),  # noqa: B008 - frozen, so sharing is safe
    ) -> None:
        self.base_url = str(httpx.URL(base_url.rstrip("/")))
        self.model = model
        self.facts = facts if facts is not None else lookup_at(model, self.base_url)
        self.limit_field = "max_completion_tokens" if openai_reasoning(model) else "max_tokens"
        # OpenAI's reasoning models refuse any temperature or top_p but the default.
        self.sampling = Sampling() if openai_reasoning(model) else sampling
        self.retry = retry
        # A key given here, else read from `api_key_env` (in `environ`) at every request; the
        # variable is also named in the hint when the server refuses the key.
        self._key = ApiKey(api_key, api_key_env, environ)
        self.connect_timeout = connect_timeout
        # How long the server may think before the response starts (reading a long prompt).
        self.first_byte_timeout = read_timeout if first_byte_timeout is None else first_byte_timeout
        self._headers = dict(headers or {})
        self._client = LazyClient(connect_timeout, read_timeout, transport, self.base_url)
        self._streams_tools = True  # False once the server answered an empty stream with tools
        self._stream_options = True  # False once a strict server refused it
        self._images = ImageInput(images)  # False: notes in place of images
        self._recovery = CallRecovery()
        self._configured = window
        self._window: int | None = None
        self._window_known = False
        self.window_origin = ""  # where `context_window()` found its answer, for a person
        # The session's prompt cache: `prompt_cache_key` at api.openai.com; a slot at llama.cpp
        # (`slots`: how many it has, told by its `/props` or by who started it).
        self._openai = httpx.URL(self.base_url).host == "api.openai.com"
        self._slots = slots

    @property
    def label(self) -> str:
        return f"openai:{self.model}"

    @property
    def api_key_env(self) -> str | None:
        return self._key.variable

    @property
    def images(self) -> bool | None:
        """Whether the model reads images (None: not known; False also once it refused them)."""
        return self._images.known

    @property
    def recovery(self) -> CallRecovery:
        """The calls recovered from the model's text, and how many replies held one."""
        return self._recovery

    @property
    def sends_stream_options(self) -> bool:
        return self._stream_options

    async def aclose(self) -> None:
        await self._client.aclose()

    def stream(self, request: ModelRequest) -> AsyncIterator[Event]:
        return reasoning_as_answer(self._recovery.stream(self._round, request))

    def _round(self, request: ModelRequest) -> AsyncIterator[Event]:
        return split_think_tags(retrying(lambda: self._attempt(request), self.retry))

    async def _attempt(self, request: ModelRequest) -> AsyncGenerator[Event, None]:
        """One streamed request (and its non-streamed fallback); raises BackendError."""
        if request.tools and not self._streams_tools:
            for event in await self._complete(request):
                yield event
            return
        response = await self._open(request)
        parser = ChunkParser(self.model)
        async for event in parsed(response, parser):
            yield event
        if parser.chunks == 0:
            log.info("%s answered an empty stream; asking again without streaming", self.label)
            if request.tools:
                # llama.cpp's server cannot stream with automatic tool choice: it sends an empty
                # stream and then drops the kept-alive connection. Ask unstreamed from now on,
                # and on a fresh connection, or this very retry fails on the dead one.
                self._streams_tools = False
            await self._client.aclose()  # drop the dead connection
            for event in await self._complete(request):
                yield event
            return
        for event in parser.final_events():
            yield event

    async def _open(self, request: ModelRequest) -> httpx.Response:
        try:
            return await self._post(request, stream=True)
        except BackendError as failure:
            refused = failure.status in (400, 422) and "stream_options" in failure.body.lower()
            if not (self._stream_options and refused):
                raise
        log.info("%s refused stream_options; not sending it again", self.label)
        self._stream_options = False
        return await self._post(request, stream=True)

    async def _complete(self, request: ModelRequest) -> list[Event]:
        response = await self._post(request, stream=False)
        try:
            body = await read_json(response)
        finally:
            await response.aclose()
        return completion_events(body, self.model)

    async def _post(self, request: ModelRequest, *, stream: bool) -> httpx.Response:
        fitted = self._images.fit(request)
        body = payload(
            self.model,
            fitted,
            stream=stream,
            stream_options=self._stream_options,
            limit_field=self.limit_field,
            sampling=self.sampling.fields(),
            cache=cache_fields(fitted.cache_key, openai=self._openai, slots=self._slots),
        )
        client = self._http()
        url = f"{self.base_url}/chat/completions"
        try:
            return await send(
                client,
                client.build_request("POST", url, json=body, headers=self._request_headers()),
                # Unstreamed, the answer starts only when the whole reply is written.
                first_byte_timeout=self.first_byte_timeout if stream else None,
                api_key_env=self.api_key_env,
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
        auth = {"Authorization": f"Bearer {key}"} if key else {}
        return {**auth, **self._headers}

    # ----- context window -----------------------------------------------------------------------

    async def context_window(self) -> int | None:
        """The configured window, else the server's (cached once it answered), else the
        catalogue's; None if unknown. `window_origin` says which."""
        if self._configured:
            self.window_origin = "the configuration file"
            return self._configured
        if not self._window_known and self._catalogued():
            self.window_origin = self.facts.source if self.facts else ""
            return self.facts.window if self.facts else None
        if not self._window_known:
            self._window, self._window_known = await self._discover_window()
        if self._window is not None:
            return self._window
        if self.facts is not None and self.facts.window:
            self.window_origin = self.facts.source
            return self.facts.window
        self.window_origin = ""
        return None

    def _catalogued(self) -> bool:
        """A hosted model the catalogue knows: its window is the catalogue's, not asked for
        (the first request waits for the window, and a hosted `/models` does not tell it)."""
        known = self.facts is not None and bool(self.facts.window)
        return known and not is_local_url(self.base_url)

    async def _discover_window(self) -> tuple[int | None, bool]:
        """(window, whether the server answered at all — only then is the answer final)."""
        models = await self._get_json(f"{self.base_url}/models")
        window = window_from_models(models, self.model)
        if window is not None:
            self.window_origin = f"the server (GET {self.base_url}/models)"
            return window, True
        root = self.base_url.removesuffix("/v1")
        props = await self._get_json(f"{root}/props")
        window = window_from_props(props)
        if isinstance(props, dict) and window is not None:  # llama.cpp: its slots
            self._slots = _positive_int(props.get("total_slots")) or 1
        if window is not None:
            self.window_origin = f"the server (GET {root}/props)"
        return window, models is not None or props is not None

    async def _get_json(self, url: str) -> Any:
        """The JSON at `url`, or None when it cannot be had (discovery is best effort)."""
        try:
            response = await self._http().get(
                url, headers=self._request_headers(), timeout=httpx.Timeout(self.connect_timeout)
            )
            response.raise_for_status()
            return response.json()
        except Exception as exc:  # never fail a turn over discovery
            log.debug("context window: GET %s failed: %s", url, exc)
            return None


def window_from_models(body: Any, model: str) -> int | None:
    """The window of `model` in a `/models` listing (the only entry counts as a match)."""
    entries = body.get("data") if isinstance(body, dict) else None
    if not isinstance(entries, list):
        return None
    entries = [entry for entry in entries if isinstance(entry, dict)]
    matching = [entry for entry in entries if entry.get("id") == model]
    if not matching and len(entries) == 1:
        matching = entries  # llama.cpp serves one model, whatever name the config gave it
    for entry in matching:
        for name in WINDOW_FIELDS:
            window = _positive_int(entry.get(name))
            if window is not None:
                return window
    return None


def window_from_props(body: Any) -> int | None:
    """llama.cpp `/props`: `n_ctx`, or `default_generation_settings.n_ctx`."""
    if not isinstance(body, dict):
        return None
    settings = body.get("default_generation_settings")
    nested = settings.get("n_ctx") if isinstance(settings, dict) else None
    return _positive_int(body.get("n_ctx")) or _positive_int(nested)


def _positive_int(value: Any) -> int | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return int(value) if value >= 1 and int(value) == value else None
