"""The doctor's checks of one model server: it answers, takes the key, has the models named, and
what is known of each model's window and tool calling. Every request is bounded by TIMEOUT;
keys go only to the server they belong to and are never shown (only their variable)."""

from __future__ import annotations

import asyncio
import socket
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import httpx

from acp_server.backends import window_origin
from acp_server.backends.providers import HOSTED, Provider
from acp_server.backends.selection.discover import ollama_model
from acp_server.backends.selection.select import from_provider, missing_provider_key
from acp_server.doctor import Check, fail, ok, warn
from acp_server.doctor.embedded import capped, local_checks
from acp_server.models.catalogue import ModelEntry
from acp_server.redaction import redact

TIMEOUT = 3.0  # seconds for each request
ANTHROPIC_VERSION = "2023-06-01"


@dataclass(frozen=True)
class Listing:
    """The models a server lists (None: it cannot list them), or why it cannot be used."""

    models: tuple[str, ...] | None = None
    problem: Check | None = None
    note: Check | None = None


def server_name(provider: Provider) -> str:
    return f"Provider {provider.name} at {provider.base_url}"


async def provider_checks(
    client: httpx.AsyncClient,
    provider: Provider,
    entries: Sequence[ModelEntry],
    env: Mapping[str, str],
) -> list[Check]:
    """The server's checks, then each model's."""
    if provider.dialect == "local":  # no server until the first prompt starts one
        return local_checks(entries, env)
    missing = missing_provider_key(provider, entries[0].model if entries else "...", env)
    if missing is not None:
        return [fail(f"{server_name(provider)}: {provider.api_key_env} is not set", missing)]
    listing = await list_models(client, provider, env)
    if listing.problem is not None:
        return [listing.problem]
    checks = [listing.note or ok(_answers(provider, listing, env))]
    for entry in entries:
        checks += await model_checks(client, entry, listing, env)
    return checks


def _answers(provider: Provider, listing: Listing, env: Mapping[str, str]) -> str:
    count = len(listing.models or ())
    variable = provider.api_key_env
    key = f"; the key in {variable} is accepted" if variable and env.get(variable) else ""
    return f"{server_name(provider)}: answers{key} ({count} model{'s' if count != 1 else ''})"


def _listing_request(provider: Provider, env: Mapping[str, str]) -> tuple[str, dict[str, str]]:
    headers = dict(provider.headers)
    key = env.get(provider.api_key_env or "") or ""
    if provider.dialect == "ollama":
        return f"{provider.base_url}/api/tags", headers
    if provider.dialect == "anthropic":
        headers["anthropic-version"] = ANTHROPIC_VERSION
        if key:
            headers["x-api-key"] = key
        return f"{provider.base_url}/v1/models", headers
    if key:
        headers["Authorization"] = f"Bearer {key}"
    return f"{provider.base_url}/models", headers


async def list_models(
    client: httpx.AsyncClient, provider: Provider, env: Mapping[str, str]
) -> Listing:
    """Ask the server for its models: that it answers, that the key is accepted."""
    url, headers = _listing_request(provider, env)
    try:
        response = await client.get(url, headers=headers, timeout=TIMEOUT)
    except httpx.TimeoutException:
        return Listing(problem=_down(provider, f"no answer within {TIMEOUT:g} s"))
    except httpx.HTTPError as exc:
        return Listing(problem=_down(provider, _reason(exc)))
    status = response.status_code
    if status in (401, 403):
        return Listing(problem=_refused(provider, status, env))
    if status == 404:
        note = warn(
            f"{server_name(provider)}: answers, but cannot list its models (HTTP 404 at {url})",
            "So whether the models named exist is not checked; a prompt will tell.",
        )
        return Listing(note=note)
    if status >= 400:
        said = _error_message(response)
        return Listing(problem=fail(f"{server_name(provider)}: answered HTTP {status}", said))
    return Listing(models=_ids(_json(response)))


def _down(provider: Provider, why: str) -> Check:
    if provider.dialect == "ollama":
        what = "Start Ollama (`ollama serve`), or set OLLAMA_HOST to where it runs."
    elif provider.name in HOSTED and provider.origin == "built in":
        variable = HOSTED[provider.name].base_env
        what = f"Check the network, and {variable} if you set it."
    else:
        what = "Start that server, or correct the address (`base_url` in the configuration file)."
    return fail(f"{server_name(provider)}: cannot be reached ({why})", what)


def _refused(provider: Provider, status: int, env: Mapping[str, str]) -> Check:
    variable = provider.api_key_env
    name = server_name(provider)
    if variable and env.get(variable):
        hosted = HOSTED.get(provider.name)
        where = f" (keys: {hosted.keys_page})" if hosted else ""
        return fail(
            f"{name}: refuses the key in {variable} (HTTP {status})",
            f"The key in {variable} is wrong or expired: set a valid one{where}.",
        )
    if variable:
        return fail(
            f"{name}: wants an API key (HTTP {status}), and {variable} is not set",
            f"Set {variable} to its key where the agent starts (your shell, or the `env` of "
            "the editor's agent settings).",
        )
    return fail(
        f"{name}: wants an API key (HTTP {status}), and none is sent",
        f"Name the variable holding its key with `api_key_env` under [providers."
        f"{provider.name}] in the configuration file, and set that variable.",
    )


def _reason(exc: httpx.HTTPError) -> str:
    """Why a request failed, in words: the OS error under httpx's, where there is one."""
    cause: BaseException | None = exc
    while cause is not None:
        if isinstance(cause, ConnectionRefusedError) or "refused" in str(cause).lower():
            return "connection refused: nothing listens there"
        if isinstance(cause, socket.gaierror):
            return "the host name is not known"
        cause = cause.__cause__ or cause.__context__
    return redact(str(exc).strip())[:200] or type(exc).__name__


def _json(response: httpx.Response) -> Any:
    try:
        return response.json()
    except ValueError:
        return None


def _error_message(response: httpx.Response) -> str:
    body = _json(response)
    error = body.get("error") if isinstance(body, dict) else None
    message = error.get("message") if isinstance(error, dict) else error
    if isinstance(message, str) and message:
        return redact(message)[:300]
    return "The server gave no reason; its own log may say more."


def _ids(body: Any) -> tuple[str, ...]:
    entries = (body.get("data") or body.get("models") or []) if isinstance(body, dict) else []
    names = (e.get("id") or e.get("name") or e.get("model") for e in entries if isinstance(e, dict))
    return tuple(n for n in names if isinstance(n, str) and n)


def served(model: str, listed: Sequence[str], dialect: str) -> bool:
    if model in listed:
        return True
    return dialect == "ollama" and ":" not in model and f"{model}:latest" in listed


async def model_checks(
    client: httpx.AsyncClient, entry: ModelEntry, listing: Listing, env: Mapping[str, str]
) -> list[Check]:
    """The model is there; its window; whether it calls tools, where that is known."""
    if listing.models is not None and not served(entry.model, listing.models, entry.dialect):
        return [_absent(entry, listing.models)]
    window, source = capped(*await _window(entry, env), env)
    tools = await _tools(client, entry)
    checks = [ok(f"Model {entry.value}: {_facts(window, source, tools)}")]
    if window is None:
        checks.append(_unknown_window(entry))
    if tools is False:
        checks.append(_no_tools(entry))
    return checks


def _facts(window: int | None, source: str, tools: bool | None) -> str:
    parts = ["served"]
    if window is not None:
        parts.append(f"context window {window:,} tokens, {source}")
    if tools:
        parts.append("calls tools (its server says so)")
    elif tools is None:
        parts.append("tool calling not tried (`acp-server doctor --live` tries it)")
    return "; ".join(parts)


def _absent(entry: ModelEntry, listed: Sequence[str]) -> Check:
    has = ", ".join(listed[:8]) + (", ..." if len(listed) > 8 else "") if listed else "none"
    advice = f"That server has: {has}. Name one of those"
    if entry.dialect == "ollama":
        advice += f", or download it with `ollama pull {entry.model}`"
    return fail(f"Model {entry.value}: not on its server", advice + ".")


def _unknown_window(entry: ModelEntry) -> Check:
    return warn(
        f"Model {entry.value}: neither its server nor the model catalogue says how long a "
        "context it takes, so the agent assumes 8,192 tokens",
        f'Set it: `window = N` under the [[models]] entry with id = "{entry.model}" in the '
        "configuration file, or --context-window N.",
    )


def _no_tools(entry: ModelEntry) -> Check:
    return fail(
        f"Model {entry.value}: cannot call tools, so the agent can talk but not read, edit "
        "or run anything",
        "Choose a model that calls tools (for example qwen3 or llama3.1 on Ollama).",
    )


async def _window(entry: ModelEntry, env: Mapping[str, str]) -> tuple[int | None, str]:
    """(window, where it comes from) as the agent itself would learn it, in its order: the
    configuration file, what the server reports, the model catalogue (the backend's own)."""
    backend = from_provider(entry.provider, entry.model, env, window=entry.window)
    try:
        window = await asyncio.wait_for(backend.context_window(), TIMEOUT)
    except (TimeoutError, httpx.HTTPError):  # the server did not answer: what is known so far
        window, source = entry.known_window()
        return window, f"from the {'configuration file' if source == 'configured' else source}"
    else:
        return window, f"from {window_origin(backend) or 'the server'}"
    finally:
        closing = getattr(backend, "aclose", None)
        if closing is not None:
            await closing()


async def _tools(client: httpx.AsyncClient, entry: ModelEntry) -> bool | None:
    """Whether the model calls tools: configured off, or as Ollama's /api/show tells."""
    if not entry.tools:
        return False
    if entry.dialect != "ollama":
        return None
    url = f"{entry.provider.base_url}/api/show"
    try:
        response = await client.post(url, json={"model": entry.model}, timeout=TIMEOUT)
        show = response.json() if response.status_code == 200 else None
    except (httpx.HTTPError, ValueError):
        return None
    return ollama_model(entry.provider.name, entry.model, show).tools
