"""The environment of every command the model runs: an allowlist, not a denylist.

A command gets only the variables below, plus the names the user lists in the configuration
file (`command_env = ["NAME", ...]`), at every sandbox level (`off` and commands run outside
the sandbox too): tokens such as GITHUB_TOKEN, AWS_SECRET_ACCESS_KEY or GEMINI_API_KEY never
reach a command unless the user names them, and the agent's own keys (redaction.key_variables)
never do, named or not. Agent sockets (`SSH_AUTH_SOCK`, `GPG_AGENT_INFO`,
`DBUS_SESSION_BUS_ADDRESS`, `DOCKER_HOST`, `XDG_RUNTIME_DIR` where they live) are not passed
either; naming one in the file passes it.

What is passed and why: what a shell and the usual tools need to find programs and behave as
the user expects (PATH, HOME, USER, LOGNAME, SHELL), to speak the user's language and time
(LANG, LANGUAGE, LC_*, TZ), to draw output (TERM, COLORTERM, NO_COLOR, TERMINFO), where to keep
caches and settings (XDG_CONFIG_HOME, XDG_CACHE_HOME, XDG_DATA_HOME, XDG_STATE_HOME: folders,
not secrets; a tool that did not see them would write its cache somewhere else than the user's),
and the virtual environment the agent was started in (VIRTUAL_ENV, a folder: uv, poetry and
pip use it). PWD is not passed: ours names the agent's folder, and `/bin/sh` sets it to the
command's. TMPDIR is passed, and set to the sandbox's private folder when there is one.

A local command's environment is built here (`command_environment`). An editor terminal starts
with the editor's environment, which we cannot read or empty through ACP (terminal/create only
sets variables), so its command line starts with `keep_env.py` (`terminal_argv`), which keeps
the same names of the editor's environment and drops the rest before the command starts.
"""

from __future__ import annotations

import sys
from collections.abc import Iterable, Mapping
from pathlib import Path

from acp_server import redaction

ALLOWED = (
    "PATH", "HOME", "USER", "LOGNAME", "SHELL", "LANG", "LANGUAGE", "LC_*", "TZ",
    "TERM", "COLORTERM", "NO_COLOR", "TERMINFO", "TMPDIR",
    "XDG_CONFIG_HOME", "XDG_CACHE_HOME", "XDG_DATA_HOME", "XDG_STATE_HOME", "VIRTUAL_ENV",
)  # fmt: skip
_KEEP_ENV = Path(__file__).with_name("keep_env.py")


def kept_names(passed: Iterable[str] = (), source: Mapping[str, str] | None = None) -> list[str]:
    """The allowlist and the user's `passed` names, without the agent's key variables (those
    of `source`, default: our environment); a name ending in `*` stands for a prefix."""
    keys = redaction.key_variables(source)
    return [name for name in dict.fromkeys([*ALLOWED, *passed]) if name not in keys]


def command_environment(source: Mapping[str, str], passed: Iterable[str] = ()) -> dict[str, str]:
    """The variables of `source` a command may see (see the module's docstring)."""
    names = kept_names(passed, source)
    exact = {name for name in names if not name.endswith("*")}
    prefixes = tuple(name[:-1] for name in names if name.endswith("*"))
    kept = {k: v for k, v in source.items() if k in exact or k.startswith(prefixes)}
    return redaction.command_environment(kept)


def terminal_argv(argv: list[str], passed: Iterable[str], also: Iterable[str]) -> list[str]:
    """`argv` for an editor terminal: run through `keep_env.py`, which keeps of the editor's
    environment only the allowlist, the user's names and `also` (the variables we set in the
    terminal/create request)."""
    names = ",".join(dict.fromkeys([*kept_names(passed), *also]))
    return [sys.executable, "-I", "-S", str(_KEEP_ENV), names, "--", *argv]
