"""`acp-server login [VARIABLE]` and `acp-server logout [VARIABLE]`: store an API key in the
configuration file, or remove it.

`login` is what an editor's terminal authentication runs (ACP `authMethods`, type `terminal`,
see `auth.py`), and what a person can run by hand. It asks for the key without echoing it (a
line read from stdin when stdin is not a terminal, for scripts), and stores it in the file's
`[keys]` table under the variable it stands in for, the file readable only by its owner
(`configkeys`). Without VARIABLE it is the key variable of the default model. The key is never
printed, and nothing goes to stdout.
"""

from __future__ import annotations

import argparse
import getpass
import os
import sys
from pathlib import Path


def login(args: argparse.Namespace) -> int:
    from acp_server.config.keys import KeyFileError, store_key

    path = config_file(args)
    variable = args.variable or _default_variable(args, path)
    if variable is None:
        say(
            "acp-server login: the default model needs no key, so there is nothing to ask "
            "for. To store a key anyway, name its variable: acp-server login OPENAI_API_KEY"
        )
        return 2
    key = ask_secret(f"{variable} (typing is not shown): ")
    if not key:
        say("acp-server login: no key entered; nothing was stored.")
        return 1
    try:
        store_key(path, variable, key)
    except KeyFileError as exc:
        say(f"acp-server login: {exc}")
        return 1
    say(
        f"Stored {variable} in {path} (readable only by you). The agent uses it when "
        f"{variable} is not set in its environment; `acp-server logout` removes it."
    )
    return 0


def logout(args: argparse.Namespace) -> int:
    from acp_server.config.keys import KeyFileError, remove_keys

    path = config_file(args)
    try:
        gone = remove_keys(path, [args.variable] if args.variable else None)
    except KeyFileError as exc:
        say(f"acp-server logout: {exc}")
        return 1
    if gone:
        say(f"Removed {', '.join(gone)} from {path}.")
    else:
        say(f"No key is stored in {path}" + (f" for {args.variable}." if args.variable else "."))
    return 0


def config_file(args: argparse.Namespace) -> Path:
    from acp_server.config.file import config_path

    return config_path(getattr(args, "config", None), os.environ)[0]


def _default_variable(args: argparse.Namespace, path: Path) -> str | None:
    """The key variable of the default model (None: it needs none, or there is no default)."""
    from acp_server.models.catalogue import model_values
    from acp_server.models.source import ModelSource

    source = ModelSource(model_values(getattr(args, "model", None), os.environ), os.environ, path)
    if source.problem is not None:
        say(f"acp-server login: {source.problem}")
    entry = source.default_entry()
    return entry.provider.api_key_env if entry is not None else None


def ask_secret(prompt: str) -> str:
    """The key, not echoed on a terminal; a line of stdin otherwise."""
    if sys.stdin.isatty():
        return getpass.getpass(prompt, stream=sys.stderr).strip()
    say(prompt.rstrip())
    return sys.stdin.readline().strip()


def say(text: str) -> None:
    print(text, file=sys.stderr, flush=True)
