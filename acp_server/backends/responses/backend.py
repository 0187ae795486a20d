"""The OpenAI Responses backend: `POST {base_url}/responses` with `stream: true`, parsed from SSE.

The dialect (`openai-responses`: input items, reasoning items resent with their encrypted
content, the event types) lives in `wire`; this module does the HTTP, like the chat
backend (`openai.py`): the key as a bearer token read at each request, retries with a notice
before each wait (`_http.retrying`), images as notes once the model refused them.

Which models get it: `needs_responses` says which models lose something on chat completions
(OpenAI's reasoning models on OpenAI's own API: their reasoning is only handed back here);
`backends.selection.select` picks this backend for them, or for any model named
`openai-responses:MODEL` or on a provider whose dialect is `openai-responses`.

A request asks for reasoning summaries; an account that may not have them (OpenAI answers 400
asking to verify the organization) gets the request again without, and never again from this
backend. `context_window()`: the configured window, else what `GET {base_url}/models` says.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncGenerator, AsyncIterator, Mapping
from urllib.parse import urlsplit

import httpx

from acp_server.backends._http import (
    BackendError,
    LazyClient,
    RetryPolicy,
    parsed,
    retrying,
    send,
)
from acp_server.backends.catalog import lookup_at, openai_reasoning
from acp_server.backends.images import ImageInput
from acp_server.backends.keys import ApiKey
from acp_server.backends.providers import is_local_url
from acp_server.backends.responses.wire import DIALECT, EventParser, payload
from acp_server.messages import Event, ModelRequest

log = logging.getLogger(__name__)

OPENAI_HOST = "api.openai.com"


def reasons(model: str) -> bool:
    """Whether `model` is one of OpenAI's reasoning models (by its name)."""
    return openai_reasoning(model)  # the one rule: the catalogue's, else OpenAI's naming


def needs_responses(base_url: str, model: str) -> bool:
    """Whether a model named on the chat dialect should use the Responses API instead: an
    OpenAI reasoning model on OpenAI's own API (its reasoning survives tool rounds only here)."""
    return urlsplit(base_url).hostname == OPENAI_HOST and reasons(model)


class ResponsesBackend:
    """Streams rounds from the OpenAI Responses API. Close with `aclose()`."""

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
        context_window: int | None = None,
        reasoning: bool | None = None,
        retry: RetryPolicy = RetryPolicy(),  # noqa: B008 - frozen, so sharing is safe
        connect_timeout: float = 10.0,
        read_timeout: float = 300.0,
        first_byte_timeout: float | None = None,
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        self.base_url = str(httpx.URL(base_url.rstrip("/")))
        self.model = model
        # Whether to ask for reasoning: a model that does not reason refuses the parameter.
        self.reasoning = reasons(model) if reasoning is None else reasoning
        self.retry = retry
        self.connect_timeout = connect_timeout
        self.first_byte_timeout = read_timeout if first_byte_timeout is None else first_byte_timeout
        self._key = ApiKey(api_key, api_key_env, environ)
        self._headers = dict(headers or {})
        self._client = LazyClient(connect_timeout, read_timeout, transport, self.base_url)
        self._images = ImageInput(images)
        self._summaries = True  # False once the server refused reasoning summaries
        self._window = context_window
        self._window_known = context_window is not None
        self.facts = lookup_at(model, self.base_url)  # api.openai.com's /models tells no window
        self.window_origin = "the configuration file" if context_window else ""

    @property
    def label(self) -> str:
        return f"{DIALECT}:{self.model}"

    @property
    def api_key_env(self) -> str | None:
        return self._key.variable

    @property
    def images(self) -> bool | None:
        """Whether the model reads images (None: not known; False also once it refused them)."""
        return self._images.known

    async def aclose(self) -> None:
        await self._client.aclose()

    def prepare(self) -> None:
        """Make the HTTP client now (its TLS set-up costs ~15-30 ms), ahead of the first use."""
        self._client.get()

    def stream(self, request: ModelRequest) -> AsyncIterator[Event]:
        return retrying(lambda: self._attempt(request), self.retry)

    async def _attempt(self, request: ModelRequest) -> AsyncGenerator[Event, None]:
        """One streamed request; raises BackendError."""
        response = await self._open(request)
        parser = EventParser(self.model)
        async for event in parsed(response, parser):
            yield event
        for event in parser.final_events():
            yield event

    async def _open(self, request: ModelRequest) -> httpx.Response:
        try:
            return await self._post(request)
        except BackendError as failure:
            if not (self._summaries and self.reasoning and _refuses_summaries(failure)):
                raise
        log.info("%s refused reasoning summaries; not asking for them again", self.label)
        self._summaries = False
        return await self._post(request)

    async def _post(self, request: ModelRequest) -> httpx.Response:
        fitted = self._images.fit(request)
        body = payload(self.model, fitted, reasoning=self.reasoning, summaries=self._summaries)
        client = self._client.get()
        key = self._key.value()
        headers = {**({"Authorization": f"Bearer {key}"} if key else {}), **self._headers}
        url = f"{self.base_url}/responses"
        try:
            return await send(
                client,
                client.build_request("POST", url, json=body, headers=headers),
                first_byte_timeout=self.first_byte_timeout,
                api_key_env=self.api_key_env,
            )
        except BackendError as failure:
            if failure.images_refused:
                self._images.refused(self.label)
            raise

    async def context_window(self) -> int | None:
        """The configured window, else the one `/models` reports (cached once it answered),
        else the model catalogue's (`catalog`); `window_origin` says which."""
        hosted = not is_local_url(self.base_url)
        if not self._window_known and hosted and self.facts is not None and self.facts.window:
            self.window_origin = self.facts.source  # the catalogue's: not asked (`openai`)
            return self.facts.window
        if not self._window_known:
            self._window, self._window_known = await self._discover_window()
            if self._window is not None:
                self.window_origin = f"the server (GET {self.base_url}/models)"
        if self._window is not None:
            return self._window
        if self.facts is not None and self.facts.window:
            self.window_origin = self.facts.source
            return self.facts.window
        return None

    async def _discover_window(self) -> tuple[int | None, bool]:
        from acp_server.backends.openai.backend import window_from_models

        key = self._key.value()
        headers = {**({"Authorization": f"Bearer {key}"} if key else {}), **self._headers}
        try:
            response = await self._client.get().get(
                f"{self.base_url}/models",
                headers=headers,
                timeout=httpx.Timeout(self.connect_timeout),
            )
            response.raise_for_status()
            return window_from_models(response.json(), self.model), True
        except Exception as exc:  # never fail a turn over discovery
            log.debug("context window: GET %s/models failed: %s", self.base_url, exc)
            return None, False


def _refuses_summaries(failure: BackendError) -> bool:
    """OpenAI's 400 for an organization that may not have reasoning summaries."""
    body = failure.body.lower()
    return failure.status == 400 and "summar" in body and ("verif" in body or "reasoning" in body)
