"""Our own JSON Schemas (in `schemas/`) and validation with messages that name the field.

jsonschema costs ~60 ms to import, so it is imported on first use, never on the path to the
`initialize` answer.
"""

from __future__ import annotations

import json
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from jsonschema.protocols import Validator

_HERE = Path(__file__).resolve().parent


@cache
def schema_dir() -> Path:
    """`acp_server/schemas` in a wheel; the repository's `schemas/` in a source checkout."""
    packaged = _HERE / "schemas"
    return packaged if packaged.is_dir() else _HERE.parent / "schemas"


@cache
def load(name: str) -> dict[str, Any]:
    """A schema by its path under `schemas/`, e.g. ``acp/session_new.json``."""
    with (schema_dir() / name).open(encoding="utf-8") as f:
        data: dict[str, Any] = json.load(f)
    return data


@cache
def validator(name: str) -> Validator:
    from jsonschema import Draft202012Validator

    return Draft202012Validator(load(name))


def problems(name: str, instance: Any) -> list[str]:
    """Every way `instance` breaks schema `name`, each naming the field; [] when valid."""
    errors = sorted(validator(name).iter_errors(instance), key=lambda e: list(e.absolute_path))
    return [describe(e.absolute_path, e.message, e.validator, e.validator_value) for e in errors]


def describe(path: Any, message: str, keyword: Any, expected: Any) -> str:
    """One validation error as a sentence: `field.sub[2]`: what is wrong."""
    where = field_path(path)
    if keyword == "required":
        missing = message.split("'")[1] if "'" in message else message
        where = f"{where}.{missing}" if where else missing
        return f"`{where}` is required"
    if keyword == "type":
        kinds = expected if isinstance(expected, str) else " or ".join(expected)
        text = f"must be {_article(kinds)} {kinds}"
    elif keyword == "enum":
        text = "must be one of " + ", ".join(json.dumps(v) for v in expected)
    else:
        text = message
    return f"`{where}` {text}" if where else text


def field_path(path: Any) -> str:
    out = ""
    for part in path:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out


def _article(word: str) -> str:
    return "an" if word[:1] in "aeiou" else "a"
