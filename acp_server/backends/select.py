"""Which model answers: `--model` / ACP_SERVER_MODEL as `<dialect>:<model id>`, else a quick probe
of the usual local servers, else a clear message saying how to configure one.

The model string is split at the first colon, so `ollama:qwen3:8b` is dialect `ollama` and
model `qwen3:8b`. Endpoints and keys come from the environment:

| dialect     | endpoint (default)                                   | key               |
|-------------|------------------------------------------------------|-------------------|
| `openai`    | OPENAI_BASE_URL (https://api.openai.com/v1)          | OPENAI_API_KEY    |
| `ollama`    | OLLAMA_HOST (http://127.0.0.1:11434)                 | —                 |
| `anthropic` | ANTHROPIC_BASE_URL (https://api.anthropic.com)       | ANTHROPIC_API_KEY |

A hosted API (OpenAI's, Anthropic's) without its key gets no request at all: every prompt fails
at once with a message naming the variable to set (a request would only be refused, or on a
machine without network, retried for seconds before failing with nothing said about the key).
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Callable, Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from acp_server.backends import Backend
from acp_server.messages import Event, ModelRequest, StreamError

log = logging.getLogger(__name__)

DIALECTS = ("openai", "ollama", "anthropic")
HOW_TO_CONFIGURE = (
    "No model is configured, and no local model server answered (Ollama on port 11434, "
    "LM Studio on 1234, llama.cpp on 8080). Choose a model with `--model DIALECT:MODEL` or "
    "ACP_SERVER_MODEL, for example `ollama:qwen3:8b`, `openai:gpt-4.1-mini` (with "
    "OPENAI_API_KEY, and OPENAI_BASE_URL for any OpenAI-compatible server) or "
    "`anthropic:claude-sonnet-4-5` (with ANTHROPIC_API_KEY). To try the agent without a "
    "model, start it with `--script FILE` (see the README, 'Scripted backend')."
)
# (dialect, base URL, how to list models) tried in this order when nothing is configured.
LOCAL_SERVERS = (
    ("ollama", "http://127.0.0.1:11434", "/api/tags"),
    ("openai", "http://127.0.0.1:1234/v1", "/models"),
    ("openai", "http://127.0.0.1:8080/v1", "/models"),
)
PROBE_TIMEOUT = 0.3


@dataclass(frozen=True)
class Hosted:
    """A vendor's hosted API: it always needs a key, so without one nothing is worth sending."""

    vendor: str
    base_env: str
    default_base: str
    key_env: str
    keys_page: str


HOSTED = {
    "openai": Hosted(
        "OpenAI",
        "OPENAI_BASE_URL",
        "https://api.openai.com/v1",
        "OPENAI_API_KEY",
        "https://platform.openai.com/api-keys",
    ),
    "anthropic": Hosted(
        "Anthropic",
        "ANTHROPIC_BASE_URL",
        "https://api.anthropic.com",
        "ANTHROPIC_API_KEY",
        "https://console.anthropic.com/settings/keys",
    ),
}


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


def missing_key(spec: ModelSpec, env: Mapping[str, str]) -> str | None:
    """What to do when `spec` would reach a vendor's hosted API without its key (None: the key
    is set, or the endpoint is another server, which may need none)."""
    hosted = HOSTED.get(spec.dialect)
    if hosted is None or env.get(hosted.key_env):
        return None
    base = env.get(hosted.base_env) or hosted.default_base
    if urlsplit(base).hostname != urlsplit(hosted.default_base).hostname:
        return None
    return (
        f"The model {spec.dialect}:{spec.model} runs on {hosted.vendor}'s API "
        f"({hosted.default_base}), which needs an API key, and {hosted.key_env} is not set. "
        f"Create a key at {hosted.keys_page}, then set it where acp-server starts: "
        f"`export {hosted.key_env}=...` in your shell, or in the `env` of your editor's agent "
        f"configuration. To use another server instead, set {hosted.base_env}."
    )


def build(spec: ModelSpec, env: Mapping[str, str]) -> Backend:
    """The backend for an explicit model choice (one that only explains, when a key is missing)."""
    problem = missing_key(spec, env)
    if problem is not None:
        from acp_server.backends.unconfigured import UnconfiguredBackend

        return UnconfiguredBackend(problem)
    options = http_options(env)
    if spec.dialect == "openai":
        from acp_server.backends.openai import OpenAIBackend

        base = env.get("OPENAI_BASE_URL") or HOSTED["openai"].default_base
        key = env.get("OPENAI_API_KEY") or None
        return OpenAIBackend(base, spec.model, api_key=key, api_key_env="OPENAI_API_KEY", **options)
    if spec.dialect == "ollama":
        from acp_server.backends.ollama import OllamaBackend

        return OllamaBackend(ollama_url(env.get("OLLAMA_HOST")), spec.model, **options)
    from acp_server.backends.anthropic import AnthropicBackend

    base = env.get("ANTHROPIC_BASE_URL") or HOSTED["anthropic"].default_base
    key = env.get("ANTHROPIC_API_KEY") or None
    return AnthropicBackend(base, spec.model, api_key=key, **options)


def ollama_url(host: str | None) -> str:
    """OLLAMA_HOST may be `host`, `host:port` or a URL."""
    if not host:
        return "http://127.0.0.1:11434"
    if "://" not in host:
        host = f"http://{host}"
    if host.count(":") == 1:  # scheme only, no port
        host += ":11434"
    return host.rstrip("/")


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
    async with httpx.AsyncClient(timeout=timeout) as client:
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

    @property
    def label(self) -> str:
        return self._chosen.label if self._chosen else "auto"

    async def _backend(self) -> Backend | None:
        if not self._probed:
            self._probed = True
            found = await probe_local(self._env, candidates=self._candidates)
            if found is not None:
                spec, base = found
                key = "OPENAI_BASE_URL" if spec.dialect == "openai" else "OLLAMA_HOST"
                self._chosen = build(spec, {**self._env, key: base})
        return self._chosen

    async def context_window(self) -> int | None:
        backend = await self._backend()
        return await backend.context_window() if backend else None

    async def stream(self, request: ModelRequest) -> AsyncIterator[Event]:
        backend = await self._backend()
        if backend is None:
            self._probed = False  # maybe the user starts a server: look again next time
            yield StreamError(HOW_TO_CONFIGURE)
            return
        async for event in backend.stream(request):
            yield event


def choose(model: str | None, env: Mapping[str, str]) -> Backend:
    """The backend for `--model`/ACP_SERVER_MODEL, or one that probes on first use."""
    text = model or env.get("ACP_SERVER_MODEL")
    if text:
        return build(ModelSpec.parse(text), env)
    return AutoBackend(env)
