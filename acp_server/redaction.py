"""Keeping the agent's API keys out of everything it shows, stores, logs or hands to commands.

A model server may echo the key it was sent in an error body ("Invalid key sk-…"); an HTTP
library's debug log prints headers; a command the model runs could print its environment.
So:

- `redact(text)` replaces every known key, and whatever follows `Bearer `, `x-api-key:`,
  `api_key=` or `Authorization:`, with `[redacted]`. Backend errors pass through it where they
  are made (`backends._http.BackendError`), and so does every log line (see `cli`).
- `hide_keys(text)` / `hide_keys_in(value)` replace the known keys only; every tool result
  passes through them (`tools.toolbox`) before the model, the editor or the store sees it.
- `command_environment(env)` is `env` without the key variables, for the commands the model
  runs; `key_variables()` names them, for editor terminals that can only set variables.

A key is known when it is in one of `KEY_VARIABLES` (or a variable that a backend, or the
configuration file's `api_key_env`, said holds a key) in our environment, or when a request or
the configuration file's `headers` carried it (`remember_headers`). Values shorter
than MIN_SECRET_CHARS are left alone: local servers take placeholders such as "ollama", and
hiding those words would garble messages without protecting anything.
"""

from __future__ import annotations

import logging
import os
import re
from collections.abc import Iterable, Mapping
from typing import Any, TypeVar, cast

T = TypeVar("T")
KEY_VARIABLES = frozenset({"OPENAI_API_KEY", "ANTHROPIC_API_KEY"})
MIN_SECRET_CHARS = 8
REDACTED = "[redacted]"
SECRET_HEADERS = frozenset({"authorization", "x-api-key", "api-key", "proxy-authorization"})
# A header whose name has one of these words carries a secret (a gateway's `X-Portkey-Api-Key`).
SECRET_HEADER_WORDS = ("auth", "key", "token", "secret", "cookie", "password")

_BEARER = re.compile(r"(?i)\b(bearer\s+)[A-Za-z0-9._~+/=-]{8,}")
_LABELLED = re.compile(
    r"(?i)(?<![a-z0-9])(x-api-key|api[-_]?key|authorization|access[-_]?token)"
    r"""(["']?\s*[:=]\s*["']?)(?!(?:(?:bearer|basic|token)\s+)?\[redacted\])"""
    r"""((?:bearer|basic|token)\s+)?[^\s"',;)}\]]+"""
)

_remembered: set[str] = set()  # keys seen in requests this process sent
_variables: set[str] = set(KEY_VARIABLES)  # where keys are configured


def remember_variable(name: str) -> None:
    """`name` is an environment variable that holds a model server's key."""
    _variables.add(name)


def remember_headers(headers: Iterable[tuple[str, str]]) -> None:
    """Remember the secrets a request carries (its Authorization / x-api-key values, and any
    header named like a key or a token)."""
    for name, value in headers:
        lowered = name.lower()
        if lowered in SECRET_HEADERS or any(word in lowered for word in SECRET_HEADER_WORDS):
            scheme, _, token = value.strip().partition(" ")  # "Bearer <token>" or the key
            _remember(token.strip() or scheme)


def remember_environment(env: Iterable[tuple[str, str]]) -> None:
    """Remember the values of variables named like a key or a token (an MCP server's `env`)."""
    for name, value in env:
        if any(word in name.lower() for word in SECRET_HEADER_WORDS):
            _remember(value.strip())


def remember_secret(value: str) -> None:
    """`value` is a key (one stored in the configuration file, say): hide it everywhere."""
    _remember(value)


def _remember(value: str) -> None:
    if len(value) >= MIN_SECRET_CHARS:
        _remembered.add(value)


def key_variables(env: Mapping[str, str] | None = None) -> frozenset[str]:
    """The variables that hold the agent's keys: the known names, and any variable of `env`
    (default: ours) whose value is a known key."""
    env = os.environ if env is None else env
    secrets = known_secrets()
    return frozenset(_variables | {name for name, value in env.items() if value in secrets})


def known_secrets() -> frozenset[str]:
    """Every key this process knows of, from the key variables and from requests sent."""
    configured = (os.environ.get(name, "") for name in _variables)
    return frozenset(_remembered | {v for v in configured if len(v) >= MIN_SECRET_CHARS})


def hide_keys(text: str) -> str:
    """`text` with every known key replaced by [redacted], and nothing else: unlike `redact`,
    it leaves labelled values alone, so a file that says `api_key = os.environ[...]` reads as
    it is (for tool results: what the model reads must still match the file)."""
    return _hide(text, _longest_first(known_secrets()))


def hide_keys_in(value: T) -> T:
    """A JSON-like value (an update, a tool's content) with every known key in its strings
    replaced by [redacted]; the value itself is left as it is."""
    secrets = _longest_first(known_secrets())
    return cast(T, _hide_in(value, secrets)) if secrets else value


def _longest_first(secrets: frozenset[str]) -> list[str]:
    return sorted(secrets, key=len, reverse=True)  # a key that contains another goes first


def _hide(text: str, secrets: list[str]) -> str:
    for secret in secrets:
        if secret in text:
            text = text.replace(secret, REDACTED)
    return text


def _hide_in(value: Any, secrets: list[str]) -> Any:
    if isinstance(value, str):
        return _hide(value, secrets)
    if isinstance(value, dict):
        return {key: _hide_in(item, secrets) for key, item in value.items()}
    if isinstance(value, list):
        return [_hide_in(item, secrets) for item in value]
    if isinstance(value, tuple):
        return tuple(_hide_in(item, secrets) for item in value)
    return value


def redact(text: str) -> str:
    """`text` with every known key and every labelled credential replaced by [redacted]."""
    text = hide_keys(text)
    text = _BEARER.sub(lambda m: m.group(1) + REDACTED, text)
    return _LABELLED.sub(lambda m: m.group(1) + m.group(2) + (m.group(3) or "") + REDACTED, text)


def command_environment(env: Mapping[str, str]) -> dict[str, str]:
    """`env` without the variables that hold the agent's keys."""
    hidden = key_variables(env)
    return {name: value for name, value in env.items() if name not in hidden}


class RedactingFormatter(logging.Formatter):
    """A log formatter whose lines (tracebacks included) go through `redact`."""

    def format(self, record: logging.LogRecord) -> str:
        return redact(super().format(record))
