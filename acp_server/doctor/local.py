"""The doctor's checks of this machine: the session store, the remembered permissions, the log
file, the command to put in an editor's settings, and the sandbox commands run in."""

from __future__ import annotations

import os
import shutil
import sqlite3
import sys
from collections.abc import Mapping
from contextlib import closing
from pathlib import Path

from acp_server.doctor import Check, fail, ok, warn
from acp_server.settings import data_dir, store_path

DATA_ADVICE = "Make it writable, or set ACP_SERVER_DATA_DIR to a folder that is."


def writable_dir(path: Path) -> str | None:
    """Why files cannot be made in `path` (None: they can, or it can be created)."""
    existing = path
    while not existing.exists():
        if existing.parent == existing:
            break
        existing = existing.parent
    if not existing.is_dir():
        return f"{existing} is not a folder"
    if not os.access(existing, os.W_OK | os.X_OK):
        return f"{existing} is not writable"
    return None


def store_check(path: Path | None = None) -> Check:
    """The session store opens and can be written."""
    path = path or store_path()
    problem = writable_dir(path.parent)
    if problem is not None:
        return fail(f"Session store: cannot be made at {path}: {problem}", DATA_ADVICE)
    if not path.exists():
        return ok(f"Session store: {path} (made at the first session)")
    try:
        uri = f"{path.as_uri()}?mode=ro"
        with closing(sqlite3.connect(uri, uri=True, timeout=2)) as db:
            (count,) = db.execute("SELECT count(*) FROM sessions").fetchone()
    except sqlite3.Error as exc:
        return fail(
            f"Session store: {path} cannot be read ({exc})",
            "If another program damaged it, move it away (a new one is made at the next "
            "session; the sessions in the old one are then not listed).",
        )
    if not os.access(path, os.W_OK):
        return fail(f"Session store: {path} is read-only", DATA_ADVICE)
    return ok(f"Session store: {path} ({count} session{'s' if count != 1 else ''})")


def permissions_check(base: Path | None = None) -> Check:
    """The folder of remembered permission rules ("always allow") can be written."""
    folder = (base or data_dir()) / "permissions"
    problem = writable_dir(folder)
    if problem is not None:
        return fail(
            f'Remembered permissions: cannot be saved in {folder}: {problem} (an "always" '
            "answer would be forgotten)",
            DATA_ADVICE,
        )
    projects = len(list(folder.glob("*.json"))) if folder.is_dir() else 0
    return ok(f"Remembered permissions: {folder} ({projects} project(s) with rules)")


def log_check(path: Path, level: str) -> Check:
    """The log file can be written; where it is, and how to see more in it."""
    problem = writable_dir(path.parent)
    if problem is not None or (path.exists() and not os.access(path, os.W_OK)):
        return warn(
            f"Log file: cannot be written at {path}: {problem or 'it is read-only'}",
            "Give another file with --log-file FILE (in the editor's arguments for the agent).",
        )
    more = "" if level == "debug" else "; for more, --log-level debug or ACP_SERVER_LOG=debug"
    return ok(f"Log file: {path} (level {level}{more})")


def editor_command_check(argv0: str | None = None, python: str | None = None) -> Check:
    """The absolute command an editor should run, and whether PATH finds this installation."""
    python = python or sys.executable
    here = _this_script(argv0 or sys.argv[0], python)
    on_path = shutil.which("acp-server")
    fallback = f'or "{python}" with the arguments -m acp_server'
    if on_path is None:
        return warn(
            "Editor command: acp-server is not on PATH, so an editor given just `acp-server` "
            "cannot start it",
            f"Put the absolute command in the editor's agent settings: {here or python} "
            f"({fallback}). JetBrains always needs it absolute; avante passes only PATH.",
        )
    found = os.path.abspath(on_path)
    if here is not None and Path(found).resolve() != Path(here).resolve():
        return warn(
            f"Editor command: the acp-server on PATH is {found}, not this one ({here})",
            f"An editor would run the other one. Give it the absolute command {here}.",
        )
    return ok(f"Editor command: {found} ({fallback}; JetBrains needs the absolute path)")


def _this_script(argv0: str, python: str) -> str | None:
    """The console script running now, else the one installed beside this Python."""
    script = Path(argv0)
    if script.name == "acp-server" and script.exists():
        return os.path.abspath(script)
    beside = Path(python).parent / "acp-server"
    return str(beside) if beside.exists() else None


def sandbox_check(level: str | None, env: Mapping[str, str], flag: str | None = None) -> Check:
    """Which sandbox keeps the commands the model runs, and why (`confine.sandbox`); the level
    as a session takes it: --sandbox, else ACP_SERVER_SANDBOX, else the configuration file."""
    from acp_server.confine.sandbox import DEFAULT_LEVEL, describe, forced_mechanism, parse_level

    source = "ACP_SERVER_SANDBOX" if env.get("ACP_SERVER_SANDBOX") else "the configuration file"
    source = "--sandbox" if flag else source
    chosen = flag or env.get("ACP_SERVER_SANDBOX") or level
    try:
        picked = parse_level(chosen or DEFAULT_LEVEL, source)
    except ValueError as exc:
        return fail("Sandbox: the level cannot be used", str(exc))
    where = f" (from {source})" if chosen else " (the default)"
    how = forced_mechanism() if picked != "off" else None
    line = describe(picked, how)
    if picked != "off" and how is None:
        return warn(line.split(":")[0] + where, line.split(": ", 1)[1])
    if how is None:
        return ok(line.rstrip(".") + where)
    from acp_server.confine.protections import protections

    return ok(f"{line.rstrip('.')}{where}. In force: {protections(picked, how)}")
