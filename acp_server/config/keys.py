"""Storing an API key in the configuration file's `[keys]` table, and removing it again: what
`acp-server login` / `logout` (and ACP's `logout`) do; and setting `default_model` (with the
provider of a local server found without one), what `acp-server setup` does.

The file is edited line by line (`tomllines` says where the table and the key are), so its
comments and everything else in it stay as they were. It is written whole to a temporary file
beside it, readable only by its owner (mode 0600, since it now holds a secret), and moved into
place, so a failure half-way leaves the old file. The result must still be valid TOML, else
nothing is written and the error says to edit the file by hand.
"""

from __future__ import annotations

import json
import os
import re
import tomllib
from pathlib import Path

from acp_server.config.tomllines import key_lines

TABLE = "keys"
_VARIABLE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


class KeyFileError(Exception):
    """The key cannot be stored or removed; the message says why and what to do."""


def store_key(path: Path, variable: str, key: str) -> None:
    """Set `variable = "key"` in the file's [keys] table (the file is made if need be)."""
    _check_variable(variable)
    text = _read(path)
    lines = text.splitlines()
    found = key_lines(text)
    entry = f"{variable} = {json.dumps(key)}"
    if (TABLE, variable) in found:
        lines[found[(TABLE, variable)] - 1] = entry
    elif (TABLE,) in found and lines[found[(TABLE,)] - 1].strip() == f"[{TABLE}]":
        lines.insert(found[(TABLE,)], entry)
    elif (TABLE,) in found:
        raise KeyFileError(
            f"{path} defines `{TABLE}` in a form this command does not edit; add the line "
            f'`{variable} = "..."` under a [{TABLE}] table by hand.'
        )
    else:
        lines += ([""] if lines and lines[-1].strip() else []) + [f"[{TABLE}]", entry]
    _write(path, "\n".join(lines) + "\n")


def set_default_model(path: Path, value: str, provider: tuple[str, str, str] | None = None) -> None:
    """Set the top-level `default_model = "value"`; with `provider` (name, dialect, base URL),
    add its [providers.NAME] table unless the file has one."""
    text = _read(path)
    lines = text.splitlines()
    found = key_lines(text)
    entry = f"default_model = {json.dumps(value)}"
    if ("default_model",) in found:
        lines[found[("default_model",)] - 1] = entry
    else:
        headers = [n for n in found.values() if lines[n - 1].lstrip().startswith("[")]
        at = min(headers, default=len(lines) + 1) - 1
        lines[at:at] = [entry, ""] if at < len(lines) else [entry]
    if provider is not None and ("providers", provider[0]) not in found:
        name, dialect, base = provider
        lines += ([""] if lines and lines[-1].strip() else []) + [
            f"[providers.{name}]",
            f"dialect = {json.dumps(dialect)}",
            f"base_url = {json.dumps(base)}",
        ]
    _write(path, "\n".join(lines) + "\n")


def remove_keys(path: Path, variables: list[str] | None = None) -> list[str]:
    """Remove the named stored keys (None: all of them); the variables removed."""
    text = _read(path)
    found = key_lines(text)
    stored = [k[1] for k in found if len(k) == 2 and k[0] == TABLE and isinstance(k[1], str)]
    gone = [v for v in stored if variables is None or v in variables]
    if not gone:
        return []
    every = text.splitlines()
    drop = {found[(TABLE, v)] - 1 for v in gone}
    if len(gone) == len(stored) and (TABLE,) in found:
        drop |= _emptied_table(every, found[(TABLE,)] - 1, drop)
    lines = [line for n, line in enumerate(every) if n not in drop]
    while lines and not lines[-1].strip():
        lines.pop()
    _write(path, "\n".join(lines) + "\n" if lines else "")
    return gone


def _emptied_table(lines: list[str], header: int, drop: set[int]) -> set[int]:
    """The lines of a plain `[keys]` table left with nothing in it once `drop` is gone (its
    header and the blank lines in it), so no empty table stays behind; none when something
    else (a comment) is still in it."""
    if lines[header].strip() != f"[{TABLE}]":
        return set()
    end = header + 1
    while end < len(lines) and not lines[end].lstrip().startswith("["):
        if end not in drop and lines[end].strip():
            return set()
        end += 1
    return set(range(header, end))


def _check_variable(variable: str) -> None:
    if not _VARIABLE.match(variable):
        raise KeyFileError(
            f"{variable!r} is not an environment variable name (letters, digits and _, "
            "for example OPENAI_API_KEY)."
        )


def _read(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return ""
    except OSError as exc:
        raise KeyFileError(f"Cannot read {path}: {exc.strerror}.") from exc


def _write(path: Path, text: str) -> None:
    try:
        tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise KeyFileError(
            f"{path} is not valid TOML ({exc}); fix it (`acp-server config` shows where), "
            "then try again."
        ) from exc
    temporary = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w", encoding="utf-8") as sink:
            sink.write(text)
        os.chmod(temporary, 0o600)  # an existing temporary file kept its mode
        os.replace(temporary, path)
    except OSError as exc:
        temporary.unlink(missing_ok=True)
        raise KeyFileError(f"Cannot write {path}: {exc.strerror}.") from exc
