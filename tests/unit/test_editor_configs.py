"""The editor configurations in `editor-configs/` say what each editor needs to work, in the
shape that editor reads (../shared/CLIENTS.md §4), and name only what exists.

Each file is parsed (JSON, Zed's with its comment lines; Lua and Emacs Lisp by a small reader
that checks the brackets balance outside strings and comments) and what it names is checked
against the code: the command is our console script by absolute path, its arguments parse
with our CLI, every `--flag` it mentions is one of our options, every environment variable is
one acp-server reads (or one of the system's), every mode and config option exists, and every
model is written PROVIDER:MODEL with a built-in provider.
"""

from __future__ import annotations

import argparse
import json
import re
import tomllib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import acp_server
from acp_server.backends.providers import builtin_providers
from acp_server.cli import build_parser
from acp_server.cli.sessions import build_parser as sessions_parser
from acp_server.models.catalogue import MODEL_OPTION, THOUGHT_OPTION, split_value
from acp_server.permissions import MODE_IDS
from acp_server.session.options import MODE_OPTION

ROOT = Path(__file__).parents[2]
CONFIGS = ROOT / "editor-configs"
PLACEHOLDER_DIR = "/absolute/path/to/.venv/bin/"
SYSTEM_VARIABLES = {"HOME", "PATH", "XDG_CONFIG_HOME", "XDG_DATA_HOME", "XDG_STATE_HOME"}
OUR_VARIABLE = re.compile(r"\b(?:ACP_SERVER|OPENAI|ANTHROPIC|OLLAMA)_[A-Z0-9_]+\b")
FLAG = re.compile(r"(?<![\w-])--[a-z][a-z-]+")


# --- what our CLI and code know ---------------------------------------------------------------


def _parsers(parser: argparse.ArgumentParser) -> Iterator[argparse.ArgumentParser]:
    yield parser
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for sub in action.choices.values():
                yield from _parsers(sub)


def known_flags() -> set[str]:
    flags: set[str] = set()
    for parser in [*_parsers(build_parser()), *_parsers(sessions_parser())]:
        for action in parser._actions:
            flags.update(s for s in action.option_strings if s.startswith("--"))
    return flags


def variables_read() -> set[str]:
    """The quoted upper-case names in acp_server's source: the variables it reads."""
    source = Path(acp_server.__file__).parent
    text = "\n".join(p.read_text(encoding="utf-8") for p in source.rglob("*.py"))
    return set(re.findall(r"[\"']([A-Z][A-Z0-9_]+)[\"']", text))


def console_script() -> str:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    (name,) = (n for n, target in project["scripts"].items() if target == "acp_server.cli:main")
    return str(name)


# --- small readers ----------------------------------------------------------------------------


def code_of(text: str, comment: str) -> str:
    """`text` with its strings blanked and comments removed; ValueError if brackets do not
    balance (a structural check for Lua and Emacs Lisp)."""
    out, stack, i = [], [], 0
    pairs = {")": "(", "]": "[", "}": "{"}
    while i < len(text):
        char = text[i]
        if text.startswith(comment, i):
            i = text.find("\n", i) if "\n" in text[i:] else len(text)
            continue
        if char in "\"'" and not (comment == ";" and char == "'"):  # ' quotes a list in Lisp
            end = i + 1
            while text[end] != char:
                end += 2 if text[end] == "\\" else 1
            out.append('""')
            i = end + 1
            continue
        if char in "([{":
            stack.append(char)
        elif char in pairs and (not stack or stack.pop() != pairs[char]):
            raise ValueError(f"unbalanced {char!r} at offset {i}")
        out.append(char)
        i += 1
    if stack:
        raise ValueError(f"unclosed {stack[-1]!r}")
    return "".join(out)


def jsonc(path: Path) -> Any:
    """JSON with whole-line `//` comments (Zed's settings allow them)."""
    lines = path.read_text(encoding="utf-8").splitlines()
    return json.loads("\n".join(line for line in lines if not line.lstrip().startswith("//")))


def strings(text: str) -> list[str]:
    return re.findall(r'"((?:[^"\\]|\\.)*)"', text)


# --- each editor: (command, args, environment variables, models) -------------------------------

Launch = tuple[str, list[str], set[str], list[str]]


def zed() -> Launch:
    server = jsonc(CONFIGS / "zed.json")["agent_servers"]["acp-server"]
    assert server["type"] == "custom"
    assert server["default_mode"] in MODE_IDS
    options = server["default_config_options"]
    assert set(options) <= {MODEL_OPTION, MODE_OPTION, THOUGHT_OPTION}
    models = [options[MODEL_OPTION], *_env_models(server["env"])]
    return server["command"], server["args"], set(server["env"]), models


def jetbrains() -> Launch:
    server = json.loads((CONFIGS / "jetbrains-acp.json").read_text("utf-8"))["agent_servers"]
    entry = server["acp-server"]
    return entry["command"], entry["args"], set(entry["env"]), _env_models(entry["env"])


def _env_models(env: dict[str, str]) -> list[str]:
    return [v for value in [env.get("ACP_SERVER_MODEL", "")] for v in value.split(",") if v]


def codecompanion() -> Launch:
    text = (CONFIGS / "codecompanion.lua").read_text(encoding="utf-8")
    code_of(text, "--")
    assert 'require("codecompanion").setup(' in text and 'type = "acp"' in text
    command, *args = strings(_table(text, "default"))
    options = _table(text, "session_config_options")
    assert set(re.findall(r"(\w+)\s*=", options)) <= {MODEL_OPTION, MODE_OPTION, THOUGHT_OPTION}
    assert set(re.findall(r"\bmode\s*=\s*\"(\w+)\"", options)) <= set(MODE_IDS)
    models = re.findall(r"\bmodel\s*=\s*\"([^\"]+)\"", text)
    return command, args, set(), models


def avante() -> Launch:
    text = (CONFIGS / "avante.lua").read_text(encoding="utf-8")
    code_of(text, "--")
    assert 'require("avante").setup(' in text and "acp_providers" in text
    command = re.search(r"\bcommand\s*=\s*\"([^\"]+)\"", text)
    assert command is not None
    env = _table(text, "env")
    names = set(re.findall(r"\b([A-Z][A-Z0-9_]*)\s*=", env))
    assert names == set(re.findall(r'os\.getenv\("([A-Z0-9_]+)"\)', env))  # each forwards itself
    return command.group(1), strings(_table(text, "args")), names, []


def _table(text: str, key: str) -> str:
    """The body of the Lua table `key = { ... }` (the first one)."""
    start = re.search(rf"\b{key}\s*=\s*\{{", text)
    assert start is not None, f"no `{key} = {{` table"
    depth, i = 1, start.end()
    while depth:
        depth += {"{": 1, "}": -1}.get(text[i], 0)
        i += 1
    return text[start.end() : i - 1]


def agent_shell() -> Launch:
    text = (CONFIGS / "agent-shell.el").read_text(encoding="utf-8")
    code_of(text, ";")
    assert "(agent-shell-make-agent-config" in text and "agent-shell-agent-configs" in text
    command = re.search(r':command\s+"([^"]+)"', text)
    params = re.search(r":command-params\s+'\(([^)]*)\)", text)
    env = re.search(r"agent-shell-make-environment-variables\s+:inherit-env t\s+([^)]*)\)", text)
    assert command is not None and params is not None and env is not None
    pairs = strings(env.group(1))
    variables = dict(zip(pairs[::2], pairs[1::2], strict=True))
    return command.group(1), strings(params.group(1)), set(variables), _env_models(variables)


EDITORS = {
    "zed.json": zed,
    "jetbrains-acp.json": jetbrains,
    "codecompanion.lua": codecompanion,
    "avante.lua": avante,
    "agent-shell.el": agent_shell,
}


def test_every_editor_config_is_tested() -> None:
    assert {p.name for p in CONFIGS.iterdir() if p.name != "README.md"} == set(EDITORS)


@pytest.mark.parametrize("name", sorted(EDITORS))
def test_the_config_starts_our_console_script_as_our_cli_takes_it(name: str) -> None:
    command, args, _, _ = EDITORS[name]()
    # An absolute path (JetBrains and Zed need one), to the console script.
    assert command == PLACEHOLDER_DIR + console_script()
    parsed = build_parser().parse_args(args)  # exits (fails the test) on an unknown argument
    assert parsed.command in (None, "serve", "acp")


@pytest.mark.parametrize("name", sorted(EDITORS))
def test_the_config_names_only_variables_and_models_that_exist(name: str) -> None:
    _, _, variables, models = EDITORS[name]()
    read = variables_read()
    text = (CONFIGS / name).read_text(encoding="utf-8")
    named = variables | set(OUR_VARIABLE.findall(text))  # comments included
    assert sorted(v for v in named if v not in read and v not in SYSTEM_VARIABLES) == []
    assert models or "ACP_SERVER_MODEL" in variables, "each config shows how to pick a model"
    for model in models:
        split_value(model, builtin_providers({}))  # ModelChoiceError if malformed


@pytest.mark.parametrize("name", [*sorted(EDITORS), "README.md"])
def test_every_flag_and_command_mentioned_exists(name: str) -> None:
    text = (CONFIGS / name).read_text(encoding="utf-8")
    assert sorted(set(FLAG.findall(text)) - known_flags()) == []
    commands = set(re.findall(r"`acp-server ([a-z][a-z-]*)", text))
    assert commands <= set(_subcommands()), commands


def _subcommands() -> list[str]:
    for action in build_parser()._actions:
        if isinstance(action, argparse._SubParsersAction):
            return list(action.choices)
    return []


def test_avante_passes_the_environment_the_agent_needs() -> None:
    # avante starts the agent with only PATH in its environment: without these entries no API
    # key, no ACP_SERVER_* setting and no HOME ever reach it.
    text = (CONFIGS / "avante.lua").read_text(encoding="utf-8")
    assert re.search(r"--.*only\s+`?PATH`?", text), "the file must say why `env` matters"
    _, _, env, _ = avante()
    assert {"HOME", "ACP_SERVER_MODEL", "OPENAI_API_KEY", "ANTHROPIC_API_KEY"} <= env
