"""The models local servers have, found by asking them: for the model choices of a session.

`discover(providers)` asks, all at once and bounded by a short timeout, every self-hosted server
it knows of, and returns what they serve as `ModelConfig`s (what `Catalogue.with_discovered`
takes), with the providers it had to make up for servers no provider points at:

- an Ollama provider (any dialect-`ollama` provider): `GET /api/tags` lists the models, and
  `POST /api/show` for each tells its window (the `num_ctx` the Ollama backend will send: the
  Modelfile's, else the trained length capped at 32k) and its capabilities: "tools", "vision"
  (images), "thinking" (thought levels: off/on, or gpt-oss's low/medium/high);
- an OpenAI-compatible provider on this machine or the local network (LM Studio, llama.cpp,
  vLLM): `GET {base}/models` lists the models, with the window where the entry has one
  (`context_length`, vLLM's `max_model_len`, llama.cpp's `meta.n_ctx_train`); llama.cpp's
  `GET /props` adds the window it really runs with (`n_ctx`) and whether it reads images
  (`modalities.vision`). Embedding models are left out;
- LM Studio (port 1234) and llama.cpp (port 8080) on this machine when no provider points there,
  as the providers `lmstudio` and `llamacpp`.

A listed name that holds a key (a server echoing what it was sent) is left out, never shown.
Hosted APIs are never asked (their lists are long and say nothing about windows). Discovery
never raises and never waits long: a server that does not answer within the timeout adds
nothing, and why is logged at debug level.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Iterable
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

import httpx

from acp_server import redaction
from acp_server.backends._http import tls_verify
from acp_server.backends.ollama.backend import DEFAULT_NUM_CTX
from acp_server.backends.ollama.wire import capabilities, planned_num_ctx, trained_length
from acp_server.backends.openai.backend import window_from_models, window_from_props
from acp_server.backends.providers import ModelConfig, Provider, is_local_host
from acp_server.thought import guess

log = logging.getLogger(__name__)

TIMEOUT = 2.0  # seconds for the whole discovery
MAX_MODELS = 64  # models asked about per server (each costs a request)
# Local servers looked for even when no provider points at them: (provider name, base URL).
LOCAL_OPENAI = (
    ("lmstudio", "http://127.0.0.1:1234/v1"),
    ("llamacpp", "http://127.0.0.1:8080/v1"),
)


@dataclass(frozen=True)
class Discovered:
    """What the local servers serve, and the providers made up for servers found without one."""

    models: tuple[ModelConfig, ...] = ()
    providers: tuple[Provider, ...] = ()


async def discover(
    providers: Iterable[Provider],
    *,
    timeout: float = TIMEOUT,
    local_openai: Iterable[tuple[str, str]] = LOCAL_OPENAI,
    transport: httpx.AsyncBaseTransport | None = None,
) -> Discovered:
    """Ask every self-hosted server (see the module docstring); never raises."""
    servers = [p for p in providers if _self_hosted(p)]
    known = {_origin(p.base_url) for p in servers}
    made = [
        Provider(name, "openai", base, origin="discovered")
        for name, base in local_openai
        if _origin(base) not in known
    ]
    try:
        verify = tls_verify(*(p.base_url for p in [*servers, *made]))
        async with httpx.AsyncClient(timeout=timeout, transport=transport, verify=verify) as client:
            found = await _gather([_models(client, p) for p in [*servers, *made]], timeout)
    except Exception as exc:  # discovery is best effort: never fail a session over it
        log.debug("model discovery failed: %s", exc)
        return Discovered()
    models = [model for batch in found for model in batch]
    used = {model.provider for model in models}
    return Discovered(tuple(models), tuple(p for p in made if p.name in used))


async def _gather(
    jobs: list[Awaitable[list[ModelConfig]]], timeout: float
) -> list[list[ModelConfig]]:
    """The results of the jobs that finished within `timeout` (the others are cancelled)."""
    tasks = [asyncio.ensure_future(job) for job in jobs]
    if not tasks:
        return []
    done, pending = await asyncio.wait(tasks, timeout=timeout)
    for task in pending:
        task.cancel()
    if pending:
        await asyncio.gather(*pending, return_exceptions=True)
        log.debug("model discovery: %d server(s) did not answer in %s s", len(pending), timeout)
    return [task.result() for task in tasks if task in done]  # in the providers' order


async def _models(client: httpx.AsyncClient, provider: Provider) -> list[ModelConfig]:
    try:
        if provider.dialect == "ollama":
            return await ollama_models(client, provider)
        return await openai_models(client, provider)
    except Exception as exc:  # a server that is not there, or says something else
        log.debug("model discovery at %s: %s", provider.base_url, exc)
        return []


def _self_hosted(provider: Provider) -> bool:
    """Ollama anywhere but its cloud; OpenAI-compatible servers on this machine or network."""
    host = urlsplit(provider.base_url).hostname or ""
    if provider.dialect == "ollama":
        return not host.endswith("ollama.com")
    return provider.dialect == "openai" and is_local_host(host)


def _origin(url: str) -> str:
    parts = urlsplit(url)
    return f"{parts.hostname}:{parts.port}"


# ----- Ollama -----------------------------------------------------------------------------------


async def ollama_models(client: httpx.AsyncClient, provider: Provider) -> list[ModelConfig]:
    """The models of an Ollama server, each with its window and capabilities."""
    tags = await _json(client, "GET", f"{provider.base_url}/api/tags", provider)
    entries = tags.get("models") if isinstance(tags, dict) else None
    names = shown_names([name for entry in entries or [] if (name := _tag_name(entry))])
    names = names[:MAX_MODELS]
    show_url = f"{provider.base_url}/api/show"
    shows = await asyncio.gather(
        *(_json(client, "POST", show_url, provider, {"model": name}) for name in names),
        return_exceptions=True,
    )
    return [
        ollama_model(provider.name, name, show if isinstance(show, dict) else None)
        for name, show in zip(names, shows, strict=True)
    ]


def shown_names(names: list[str]) -> list[str]:
    """The model names a server listed, without those that carry a secret (a server that
    echoes the key it was sent in its list would put it in the editor's model menu)."""
    kept = [name for name in names if redaction.redact(name) == name]
    if len(kept) < len(names):
        log.warning(
            "model discovery: left out %d model name(s) holding a secret", len(names) - len(kept)
        )
    return kept


def _tag_name(entry: Any) -> str | None:
    name = entry.get("name") or entry.get("model") if isinstance(entry, dict) else None
    return name if isinstance(name, str) else None


def ollama_model(provider: str, name: str, show: dict[str, Any] | None) -> ModelConfig:
    """A model as Ollama's `/api/show` describes it (only its name when that is unknown)."""
    if show is None:
        return ModelConfig(provider, name)
    trained = trained_length(show)
    num_ctx = planned_num_ctx(show, None, DEFAULT_NUM_CTX)
    window = min(num_ctx, trained) if trained else num_ctx
    abilities = capabilities(show)
    if abilities is None:
        return ModelConfig(provider, name, window=window)
    levels: tuple[str, ...] = ()
    if "thinking" in abilities:
        levels = guess("ollama", name)[0] or ("off", "on")
    return ModelConfig(
        provider,
        name,
        window=window,
        tools="tools" in abilities,
        images="vision" in abilities,
        reasoning=levels,
    )


# ----- OpenAI-compatible --------------------------------------------------------------------------


async def openai_models(client: httpx.AsyncClient, provider: Provider) -> list[ModelConfig]:
    """The chat models of an OpenAI-compatible local server, with windows where it tells."""
    listing = await _json(client, "GET", f"{provider.base_url}/models", provider)
    entries = listing.get("data") if isinstance(listing, dict) else None
    ids = [
        entry["id"]
        for entry in entries or []
        if isinstance(entry, dict) and isinstance(entry.get("id"), str) and entry["id"]
    ]
    ids = [model for model in shown_names(ids) if "embed" not in model.lower()][:MAX_MODELS]
    props: Any = None
    if len(ids) == 1:  # llama.cpp serves one model and tells its runtime window
        root = provider.base_url.removesuffix("/v1")
        props = await _json(client, "GET", f"{root}/props", provider, quiet=True)
    return [
        ModelConfig(
            provider.name,
            model,
            window=window_from_props(props) or _window(listing, model),
            images=_vision(props),
        )
        for model in ids
    ]


def _window(listing: Any, model: str) -> int | None:
    """The window a `/models` listing gives `model`: a served window, else the trained one."""
    window = window_from_models(listing, model)
    if window is not None:
        return window
    for entry in listing.get("data") or []:
        meta = entry.get("meta") if isinstance(entry, dict) and entry.get("id") == model else None
        trained = meta.get("n_ctx_train") if isinstance(meta, dict) else None
        if isinstance(trained, int) and not isinstance(trained, bool) and trained > 0:
            return trained
    return None


def _vision(props: Any) -> bool | None:
    modalities = props.get("modalities") if isinstance(props, dict) else None
    vision = modalities.get("vision") if isinstance(modalities, dict) else None
    return vision if isinstance(vision, bool) else None


async def _json(
    client: httpx.AsyncClient,
    method: str,
    url: str,
    provider: Provider,
    body: Any = None,
    *,
    quiet: bool = False,
) -> Any:
    """The JSON answer at `url` (with the provider's headers); None when `quiet` and it fails."""
    try:
        response = await client.request(method, url, json=body, headers=dict(provider.headers))
        response.raise_for_status()
        return response.json()
    except (httpx.HTTPError, ValueError):
        if quiet:
            return None
        raise
