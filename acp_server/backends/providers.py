"""Where models run and what is known of them: providers, the built-in ones, model facts.

A `Provider` is an API endpoint in one wire dialect (`openai`, `openai-responses`, `anthropic`,
`ollama`): its base URL, the environment variable holding its key (`api_key_env`, never the key
itself) and extra headers. Five exist without any configuration (`builtin_providers`): four
addressed from the environment variables users already set (OPENAI_BASE_URL / OPENAI_API_KEY
for `openai` and for `openai-responses`, OpenAI's Responses API at the same address;
ANTHROPIC_BASE_URL / ANTHROPIC_API_KEY; OLLAMA_HOST), and `local`, a model file the agent runs
itself (`backends/local/backend.py`). A `ModelConfig` is what is known of one model (from the
configuration file, or discovered on a local server); what is not known is None.

These are plain data shared by `configfile` (which reads them from config.toml),
`backends.selection.select` (which builds a backend for a provider) and
`backends.selection.discover` (which finds models): they live here, below all three, so that none
imports a layer above it.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Mapping
from dataclasses import dataclass
from urllib.parse import urlsplit


@dataclass(frozen=True)
class Hosted:
    """A vendor's hosted API: it always needs a key, so without one nothing is worth sending."""

    vendor: str
    base_env: str
    default_base: str
    key_env: str
    keys_page: str
    default_model: str  # used when only the key is set and nothing names a model


HOSTED = {
    "openai": Hosted(
        "OpenAI",
        "OPENAI_BASE_URL",
        "https://api.openai.com/v1",
        "OPENAI_API_KEY",
        "https://platform.openai.com/api-keys",
        "gpt-4.1-mini",
    ),
    "anthropic": Hosted(
        "Anthropic",
        "ANTHROPIC_BASE_URL",
        "https://api.anthropic.com",
        "ANTHROPIC_API_KEY",
        "https://console.anthropic.com/settings/keys",
        "claude-sonnet-4-5",
    ),
}


RESPONSES = "openai-responses"  # OpenAI's Responses API: the dialect and its built-in provider
LOCAL_URL = "http://127.0.0.1"  # the port is chosen when the embedded model's server starts


@dataclass(frozen=True)
class Provider:
    """Where models run: the API dialect, its address, the variable holding its key."""

    name: str
    dialect: str
    base_url: str
    api_key_env: str | None = None
    headers: tuple[tuple[str, str], ...] = ()
    # "built in", "built in, changed by the file", "the file", "discovered"
    origin: str = "built in"


@dataclass(frozen=True)
class Price:
    input: float  # US dollars per million tokens
    output: float
    cached_input: float | None = None  # read from the prompt cache (None: at `input`)
    cache_write: float | None = None  # written to it (Anthropic; None: at `input`)


@dataclass(frozen=True)
class ModelConfig:
    """A model as the file describes it, or as a local server told (`discover`); what is not
    known is None."""

    provider: str
    id: str
    name: str | None = None
    window: int | None = None
    reply_reserve: int | None = None
    price: Price | None = None
    tools: bool | None = None
    images: bool | None = None
    reasoning: tuple[str, ...] | None = None
    adaptive_thinking: bool | None = None
    tool_call_ids: str | None = None
    temperature: float | None = None
    top_p: float | None = None

    @property
    def value(self) -> str:
        """The model's stable id: PROVIDER:MODEL."""
        return f"{self.provider}:{self.id}"


def builtin_providers(env: Mapping[str, str]) -> dict[str, Provider]:
    """The providers that exist without a file, addressed from the environment."""
    out = {
        name: Provider(name, name, env.get(h.base_env) or h.default_base, h.key_env)
        for name, h in HOSTED.items()
    }
    out["ollama"] = Provider("ollama", "ollama", ollama_url(env.get("OLLAMA_HOST")))
    # OpenAI's API (or OPENAI_BASE_URL) through the Responses API: `openai-responses:gpt-5`.
    openai = out["openai"]
    out[RESPONSES] = Provider(RESPONSES, RESPONSES, openai.base_url, openai.api_key_env)
    # A GGUF file the agent runs itself (backends/local/): `local:smollm2`, `local:/a.gguf`.
    out["local"] = Provider("local", "local", LOCAL_URL)
    return out


def ollama_url(host: str | None) -> str:
    """OLLAMA_HOST may be `host`, `host:port` or a URL."""
    if not host:
        return "http://127.0.0.1:11434"
    if "://" not in host:
        host = f"http://{host}"
    if host.count(":") == 1:  # scheme only, no port
        host += ":11434"
    return host.rstrip("/")


def is_local_host(host: str) -> bool:
    """Whether `host` is this machine or the local network (a self-hosted server)."""
    if host == "localhost" or host.endswith((".local", ".localhost")):
        return True
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        return False
    return address.is_loopback or address.is_private


def is_local_url(url: str) -> bool:
    return is_local_host(urlsplit(url).hostname or "")


def missing_provider_key(provider: Provider, model: str, env: Mapping[str, str]) -> str | None:
    """What to do when a model of `provider` would be asked without the key it needs (None:
    the key is set, or none is needed). A built-in provider needs its key only on the vendor's
    own API (another server at OPENAI_BASE_URL may take none); a provider whose key variable
    the configuration file names needs it wherever it points."""
    variable = provider.api_key_env
    if not variable or env.get(variable):
        return None
    hosted = HOSTED.get(provider.name.removesuffix("-responses"))  # the same API, either way
    if hosted is not None and variable == hosted.key_env:
        if urlsplit(provider.base_url).hostname != urlsplit(hosted.default_base).hostname:
            return None
        return (
            f"The model {provider.name}:{model} runs on {hosted.vendor}'s API "
            f"({hosted.default_base}), which needs an API key, and {variable} is not set. "
            f"Create a key at {hosted.keys_page}, then set it where acp-server starts: "
            f"`export {variable}=...` in your shell, or in the `env` of your editor's agent "
            f"configuration. To use another server instead, set {hosted.base_env}."
        )
    return (
        f"The model {provider.name}:{model} runs on {provider.base_url}, and the configuration "
        f"says its API key is in the environment variable {variable}, which is not set. Set it "
        f"where acp-server starts: `export {variable}=...` in your shell, or in the `env` of "
        f"your editor's agent configuration. If that server needs no key, remove `api_key_env` "
        f"from [providers.{provider.name}] in the configuration file."
    )
