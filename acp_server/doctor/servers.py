"""Which model servers the doctor asks, and what new sessions would start with.

Asked: the server of every model named (command line, ACP_SERVER_MODEL, the configuration
file); every provider the file adds; a hosted API whose key or address is set in the
environment (its key is checked even when no model names it); Ollama when OLLAMA_HOST is set;
and, unless ACP_SERVER_DISCOVER=0, the local servers discovery finds (Ollama, LM Studio,
llama.cpp), each with the first model it serves. A local server that is simply not running is
not a problem unless a model needs it.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping

import httpx

from acp_server.backends.providers import HOSTED, Provider
from acp_server.backends.selection.discover import discover
from acp_server.doctor import Check, fail, ok
from acp_server.doctor.remote import provider_checks
from acp_server.doctor.setup import Setup
from acp_server.errors import InvalidParams
from acp_server.models.catalogue import Catalogue, ModelEntry


def no_model_advice(env: Mapping[str, str]) -> str:
    """What to do when no model can be found, the embedded model's command fitted to how
    acp-server was installed here (or how to switch it back on)."""
    from acp_server.backends.local import backend as local

    if not local.embedded_allowed(env):
        return NO_MODEL_ADVICE + (
            f", switched off here by {local.EMBEDDED_ENV}=0: unset that variable, or name it "
            f"with --model {EMBEDDED}."
        )
    return f"{NO_MODEL_ADVICE}: {local.install_command()}"


NO_MODEL_ADVICE = (
    "Run a model on this machine: install Ollama (https://ollama.com) and `ollama pull "
    "qwen3:8b`; it is found by itself (so are LM Studio on port 1234 and llama.cpp on 8080).\n"
    "Or use a hosted model: set OPENAI_API_KEY and add --model openai:gpt-4.1-mini (or "
    "ANTHROPIC_API_KEY and --model anthropic:claude-sonnet-4-5).\n"
    "Or name any OpenAI-compatible server: set OPENAI_BASE_URL=http://HOST:PORT/v1 and add "
    "--model openai:MODEL.\n"
    "Or try the agent offline on the small embedded model"
)


EMBEDDED = "local:smollm2"


def discovery_on(env: Mapping[str, str]) -> bool:
    return env.get("ACP_SERVER_DISCOVER", "1").strip() not in ("0", "off")


async def server_checks(setup: Setup, env: Mapping[str, str]) -> tuple[list[Check], Catalogue]:
    """The default model's line, then each server's checks (asked all at once); the
    catalogue with what discovery found."""
    catalogue = setup.catalogue
    if discovery_on(env):
        found = await discover(list(catalogue.providers.values()))
        catalogue = catalogue.with_discovered(found.models, found.providers)
    groups = asked(catalogue, env)
    async with httpx.AsyncClient() as client:
        results = await asyncio.gather(
            *(provider_checks(client, provider, entries, env) for provider, entries in groups)
        )
    first = starting_model(catalogue, env, setup.named_by)
    return [first, *(c for r in results for c in r)], catalogue


def asked(catalogue: Catalogue, env: Mapping[str, str]) -> list[tuple[Provider, list[ModelEntry]]]:
    """The servers to ask, each with the models of it to check."""
    picked: dict[str, list[ModelEntry]] = {}
    for entry in catalogue.entries:
        if entry.origin != "discovered":
            picked.setdefault(entry.provider.name, []).append(entry)
    for entry in catalogue.entries:
        if entry.origin == "discovered" and entry.provider.name not in picked:
            picked[entry.provider.name] = [entry]  # the first one it serves
    for provider in catalogue.providers.values():
        if provider.name not in picked and _meant(provider, env):
            picked[provider.name] = []
    return [(catalogue.providers[name], entries) for name, entries in picked.items()]


def _meant(provider: Provider, env: Mapping[str, str]) -> bool:
    """Whether the person set this provider up (then it must work, even without a model)."""
    if provider.origin != "built in":
        return provider.origin != "discovered"
    hosted = HOSTED.get(provider.name)
    if hosted is not None:
        return bool(env.get(hosted.key_env) or env.get(hosted.base_env))
    return provider.name == "ollama" and bool(env.get("OLLAMA_HOST"))


def first_model(catalogue: Catalogue) -> ModelEntry | None:
    """The model new sessions start with: the default, also when it is a `PROVIDER:MODEL` the
    file's `default_model` names without a [[models]] entry (a session takes it as it is)."""
    if catalogue.default:
        try:
            return catalogue.resolve(catalogue.default)
        except InvalidParams:
            pass
    return next(iter(catalogue.entries), None)


def implied_model(catalogue: Catalogue, env: Mapping[str, str]) -> ModelEntry | None:
    """The model new sessions start with when none is named and no local server answered, as
    the server chooses it (backends/selection/select.py): a hosted API whose key is set, else the
    embedded model when it is installed and allowed; None: there is none."""
    from acp_server.backends.local import backend as local
    from acp_server.backends.selection.select import hosted_default

    found = hosted_default(env)
    if found is not None:
        value = f"{found[0]}:{found[1].default_model}"
    elif local.embedded_allowed(env) and local.missing("") is None:
        value = EMBEDDED
    else:
        return None
    try:
        return catalogue.resolve(value)
    except InvalidParams:
        return None


def starting_model(
    catalogue: Catalogue, env: Mapping[str, str], named_by: str = "command line"
) -> Check:
    entry = first_model(catalogue)
    if entry is not None:
        where = {
            "discovered": "found on a local server",
            "chosen": "the default_model",
            "command line": named_by,
        }.get(entry.origin, entry.origin)
        others = len(catalogue.entries) - 1
        more = f"; {others} more to switch to" if others > 0 else ""
        return ok(f"Model: new sessions start with {entry.value} ({where}{more})")
    unnamed = _unnamed_default(env)
    if unnamed is not None:
        return unnamed
    off = "" if discovery_on(env) else " (looking for them is off: ACP_SERVER_DISCOVER=0)"
    return fail(
        "Model: none is named (--model, ACP_SERVER_MODEL, the configuration file) and no "
        f"local model server answered{off}, so every prompt would fail",
        no_model_advice(env),
    )


def _unnamed_default(env: Mapping[str, str]) -> Check | None:
    """What a session uses when no model is named and no local server answered, as the server
    chooses it (backends/selection/select.py): a hosted API whose key is set, else the embedded
    model."""
    from acp_server.backends.local import backend as local
    from acp_server.backends.selection.select import hosted_default

    found = hosted_default(env)
    if found is not None:
        name, hosted = found
        return ok(
            f"Model: none is named; new sessions start with {name}:{hosted.default_model} "
            f"({hosted.key_env} is set)"
        )

    if not local.embedded_allowed(env) or local.missing("") is not None:
        return None
    return ok(
        "Model: none is named and no local model server answered, so new sessions use the "
        f"embedded SmolLM2-135M ({EMBEDDED}, context window {local.n_ctx(env):,} tokens), "
        "started at the first prompt. It is for trying the agent offline; for real work name "
        "a model (see `acp-server --help`, Choosing a model)"
    )
