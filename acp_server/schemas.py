"""Our own JSON Schemas (in `schemas/`) and validation with messages that name the field.

jsonschema is the authority, but it costs ~50 ms to import, which would double the time an
editor waits for `session/new`. So `quick_accept` first runs a small interpreter for the few
keywords our inbound schemas use. It only ever says "valid" when it is sure; anything it
rejects or does not understand goes to jsonschema, which then decides and words the error.
tests/unit/test_schemas.py checks that it never accepts what jsonschema rejects.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
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
    # Imported on first use: ~50 ms that well-formed params never need (see above).
    from jsonschema import Draft202012Validator

    return Draft202012Validator(load(name))


def problems(name: str, instance: Any) -> list[str]:
    """Every way `instance` breaks schema `name`, each naming the field; [] when valid."""
    if quick_accept(load(name), instance):
        return []
    errors = sorted(validator(name).iter_errors(instance), key=lambda e: list(e.absolute_path))
    return [describe(e.absolute_path, e.message, e.validator, e.validator_value) for e in errors]


def without_empty_options(
    arguments: dict[str, Any], schema: Mapping[str, Any] | None
) -> dict[str, Any]:
    """A call's `arguments` without the optional ones given as "" where `schema` wants a
    non-empty string: small models fill every parameter they were shown (Qwen2.5-Coder-1.5B
    sent grep `"glob": ""`, and its call was refused twice), and such a value can only mean
    "not given". Used for every call, written as text or sent natively."""
    if schema is None or not isinstance(schema.get("properties"), Mapping):
        return arguments
    properties = schema["properties"]
    listed = schema.get("required")
    required = set(listed) if isinstance(listed, list) else set()

    def empty_option(key: str, value: Any) -> bool:
        spec = properties.get(key)
        least = spec.get("minLength") if isinstance(spec, Mapping) else None
        wants_text = isinstance(least, int) and least >= 1  # an MCP server's schema may be odd
        return value == "" and key not in required and wants_text

    return {k: v for k, v in arguments.items() if not empty_option(k, v)}


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
    elif keyword == "anyOf" and all(isinstance(s, dict) and "title" in s for s in expected):
        # jsonschema's message quotes the whole value, which may be a large base64 blob.
        text = "must be " + " or ".join(s["title"] for s in expected)
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


_IGNORED = frozenset({"$schema", "title", "description", "$comment", "examples", "default"})
_TYPES: dict[str, Any] = {
    "object": dict,
    "array": list,
    "string": str,
    "null": type(None),
}


def quick_accept(schema: dict[str, Any], instance: Any) -> bool:
    """True only if `instance` certainly satisfies `schema` (a subset of draft 2020-12). A
    schema this cannot read (an MCP server's `"minLength": "1"`) is not certain: False."""
    try:
        return _accepts(schema, instance, schema)
    except (TypeError, ValueError, re.error, RecursionError):
        return False


def _is_type(kind: str, value: Any) -> bool:
    if kind == "integer":
        return isinstance(value, int) and not isinstance(value, bool)
    if kind == "number":
        return isinstance(value, int | float) and not isinstance(value, bool)
    if kind == "boolean":
        return isinstance(value, bool)
    return kind in _TYPES and isinstance(value, _TYPES[kind])


def _accepts(schema: Any, value: Any, root: dict[str, Any]) -> bool:
    if schema is True:
        return True
    if not isinstance(schema, dict):
        return False
    for key, rule in schema.items():
        if key in _IGNORED or key == "$defs" or key in ("then", "else"):
            continue
        if not _keyword(key, rule, schema, value, root):
            return False
    return True


def _keyword(key: str, rule: Any, schema: dict[str, Any], value: Any, root: dict[str, Any]) -> bool:
    if key == "type":
        kinds = [rule] if isinstance(rule, str) else rule
        return any(_is_type(k, value) for k in kinds)
    if key == "$ref":
        if not isinstance(rule, str) or not rule.startswith("#/$defs/"):
            return False
        return _accepts(root["$defs"][rule[len("#/$defs/") :]], value, root)
    if key == "enum":
        return any(value == v and type(value) is type(v) for v in rule)
    if key == "const":
        return value == rule and type(value) is type(rule)
    if key == "allOf":
        return all(_accepts(sub, value, root) for sub in rule)
    if key == "anyOf":
        return any(_accepts(sub, value, root) for sub in rule)
    if key == "if":
        branch = schema.get("then" if _accepts(rule, value, root) else "else", True)
        return _accepts(branch, value, root)
    if key == "not":
        return _rejects(rule, value, root)
    if key == "additionalProperties":
        known = schema.get("properties", {})
        extra = [k for k in value if k not in known] if isinstance(value, dict) else []
        return all(_accepts(rule, value[k], root) for k in extra)
    return _shape_keyword(key, rule, value, root)


def _rejects(schema: Any, value: Any, root: dict[str, Any]) -> bool:
    """True only if `value` certainly fails `schema`; only `required` is understood."""
    if isinstance(schema, dict) and set(schema) == {"required"} and isinstance(value, dict):
        return any(name not in value for name in schema["required"])
    return False


def _shape_keyword(key: str, rule: Any, value: Any, root: dict[str, Any]) -> bool:
    if key == "required":
        return not isinstance(value, dict) or all(name in value for name in rule)
    if key == "properties":
        return not isinstance(value, dict) or all(
            _accepts(sub, value[name], root) for name, sub in rule.items() if name in value
        )
    if key == "items":
        return not isinstance(value, list) or all(_accepts(rule, item, root) for item in value)
    if key in ("minItems", "maxItems"):
        if not isinstance(value, list):
            return True
        return bool(len(value) >= rule if key == "minItems" else len(value) <= rule)
    if key == "minLength":
        return not isinstance(value, str) or len(value) >= rule
    if key == "maxLength":
        return not isinstance(value, str) or len(value) <= rule
    if key == "pattern":
        return not isinstance(value, str) or re.search(rule, value) is not None
    if key == "propertyNames":
        return not isinstance(value, dict) or all(_accepts(rule, name, root) for name in value)
    if key == "uniqueItems":
        return not rule or not isinstance(value, list) or _distinct(value)
    if key in ("minimum", "maximum"):
        if not _is_type("number", value):
            return True
        return bool(value >= rule if key == "minimum" else value <= rule)
    return False  # a keyword this interpreter does not know: let jsonschema decide


def _distinct(items: list[Any]) -> bool:
    """No two items alike; only plain strings and numbers are judged here (True = sure)."""
    if not all(isinstance(i, str) for i in items):
        return False
    return len(set(items)) == len(items)
