"""Settings that shape every session, where the agent keeps its data (`data_dir`,
`store_path`) and where it writes its log (`log_path`).

Later: settings loaded from TOML (XDG) and the environment and validated by
schemas/config.schema.json; for now filled from the command line and these environment
variables:

- `ACP_SERVER_CONTEXT_WINDOW`: the model's context window in tokens, when the model server does
  not tell it or tells it wrong (`--context-window N` wins over it). The smallest of this, what
  the server reports and what the agent observes is used.
- `ACP_SERVER_REPLY_RESERVE`: tokens kept free for the model's reply (default: a quarter of the
  window, at most 4,096).
- `ACP_SERVER_FETCH` (`on`/`off`) and `ACP_SERVER_FETCH_ALLOW_PRIVATE` (`on`/`off`): whether the
  `fetch_url` tool is offered, and whether it may reach private and loopback addresses. They win
  over the configuration file's `[fetch]` table (`enabled`, `allow_private`).

A value that is not a whole number, or out of range, is an error that names the setting and
says what to write instead: a wrong window silently ignored would bring back the overflows it
was set to prevent.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path

STORE_FILE = "sessions.sqlite3"
LOG_FILE = "acp-server.log"

CONTEXT_WINDOW_ENV = "ACP_SERVER_CONTEXT_WINDOW"
REPLY_RESERVE_ENV = "ACP_SERVER_REPLY_RESERVE"
FETCH_ENV = "ACP_SERVER_FETCH"
FETCH_PRIVATE_ENV = "ACP_SERVER_FETCH_ALLOW_PRIVATE"
_ON, _OFF = ("1", "on", "true", "yes"), ("0", "off", "false", "no")
# No model has a smaller window (the same floor as context.window.MIN_WINDOW).
MIN_CONTEXT_WINDOW = 512


SANDBOX_ENV = "ACP_SERVER_SANDBOX"
# The same names as confine.sandbox.LEVELS (this module sits below the tools).
SANDBOX_LEVELS = ("off", "read-only", "workspace-write", "workspace-net")


class SettingsError(ValueError):
    """A setting has a value that cannot be used; the message is for a person."""


@dataclass(frozen=True)
class FetchSettings:
    """The fetch_url tool: offered at all, and allowed to reach private addresses. None: not
    said at this level (the environment, then the configuration file, then the default)."""

    enabled: bool | None = None
    allow_private: bool | None = None

    def over(self, lower: FetchSettings | None) -> FetchSettings:
        """These settings, with what they leave unsaid taken from `lower`."""
        if lower is None:
            return self
        return FetchSettings(
            lower.enabled if self.enabled is None else self.enabled,
            lower.allow_private if self.allow_private is None else self.allow_private,
        )


@dataclass
class Settings:
    # A turn stops after this many model requests (stop reason `max_turn_requests`).
    max_turn_requests: int = 50
    # Used when neither the configuration nor the model server says how large the model's
    # context window is: unknown is never treated as unlimited.
    default_context_window: int = 8192
    context_window: int | None = None  # configured; the smallest known value wins
    reply_reserve: int | None = None  # tokens kept for the reply; None: relative to the window
    fetch: FetchSettings = field(default_factory=FetchSettings)
    # `--config FILE`: the user's own instructions file (AGENTS.md) is looked for beside it.
    config_option: str | None = None
    # The sandbox level of commands (confine.sandbox.LEVELS); None: the file's, else the default.
    sandbox: str | None = None
    # Variables commands may see besides the allowlist (the configuration file's `command_env`).
    command_env: tuple[str, ...] = ()

    @classmethod
    def from_env(cls, environ: Mapping[str, str], *, context_window: int | None = None) -> Settings:
        """Settings from the environment; `context_window` (the `--context-window` flag, read
        with `context_window_flag`) wins over `ACP_SERVER_CONTEXT_WINDOW`. Raises
        SettingsError for a value that cannot be used."""
        window = context_window
        if window is None:
            window = _tokens(
                environ.get(CONTEXT_WINDOW_ENV), CONTEXT_WINDOW_ENV, MIN_CONTEXT_WINDOW
            )
        reserve = _tokens(environ.get(REPLY_RESERVE_ENV), REPLY_RESERVE_ENV, 0, example=2048)
        if window is not None and reserve is not None and reserve * 2 >= window:
            raise SettingsError(
                f"{REPLY_RESERVE_ENV} is {reserve:,} tokens, but the context window is "
                f"{window:,}: the reply reserve must be less than half of it, so that most of "
                f"the window is left for the conversation. Lower {REPLY_RESERVE_ENV}, or unset "
                "it to use the default."
            )
        fetch = FetchSettings(_switch(environ, FETCH_ENV), _switch(environ, FETCH_PRIVATE_ENV))
        sandbox = _level(environ.get(SANDBOX_ENV, ""), SANDBOX_ENV)
        return cls(context_window=window, reply_reserve=reserve, fetch=fetch, sandbox=sandbox)

    def with_file(
        self,
        fetch: FetchSettings | None,
        sandbox: str | None = None,
        command_env: tuple[str, ...] = (),
    ) -> Settings:
        """These settings, with the configuration file's `[fetch]` and `sandbox` where they
        say nothing, and its `command_env`."""
        fetch = self.fetch.over(fetch)
        return replace(self, fetch=fetch, sandbox=self.sandbox or sandbox, command_env=command_env)


def _level(value: str, name: str) -> str | None:
    """A sandbox level by name (None when unset); SettingsError naming the choices."""
    text = value.strip().lower()
    if not text:
        return None
    if text not in SANDBOX_LEVELS:
        raise SettingsError(
            f"{name} is {value!r}, which is not a sandbox level; use one of "
            f"{', '.join(SANDBOX_LEVELS)}."
        )
    return text


def sandbox_flag(value: str) -> str:
    """argparse type for `--sandbox LEVEL`."""
    try:
        level = _level(value, "--sandbox")
    except SettingsError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from exc
    if level is None:
        raise argparse.ArgumentTypeError("--sandbox needs a level")
    return level


def _switch(environ: Mapping[str, str], name: str) -> bool | None:
    """An on/off variable; None when unset or empty."""
    text = environ.get(name, "").strip().lower()
    if not text:
        return None
    if text in _ON or text in _OFF:
        return text in _ON
    raise SettingsError(f"{name} must be on or off (or 1 / 0), but it is {text!r}.")


def context_window_flag(text: str) -> int:
    """`--context-window N` as an argparse `type`: the error names the problem."""
    try:
        value = _tokens(text, "--context-window", MIN_CONTEXT_WINDOW)
    except SettingsError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
    if value is None:
        raise argparse.ArgumentTypeError(
            "--context-window needs a number of tokens, such as 32768."
        )
    return value


def _tokens(raw: str | None, name: str, minimum: int, example: int = 32768) -> int | None:
    """A count of tokens from a setting's text; None when it is unset or empty."""
    text = (raw or "").strip().replace("_", "")
    if not text:
        return None
    if not text.isdecimal():
        raise SettingsError(
            f"{name} must be a whole number of tokens, such as {example}, but it is {raw!r}."
        )
    value = int(text)
    if value < minimum:
        raise SettingsError(
            f"{name} is {value:,} tokens, which is too small: it must be at least {minimum:,}."
        )
    return value


def data_dir() -> Path:
    """Where sessions and remembered permission rules are kept: `$ACP_SERVER_DATA_DIR`, else
    the user data directory (`~/.local/share/acp-server/` on Linux)."""
    configured = os.environ.get("ACP_SERVER_DATA_DIR")
    if configured:
        return Path(configured)
    # Imported here: only needed when the variable is unset, and it costs a few ms at start-up.
    import platformdirs

    return Path(platformdirs.user_data_dir("acp-server", appauthor=False))


def store_path() -> Path:
    """The session store (SQLite) inside the data directory."""
    return data_dir() / STORE_FILE


def log_dir() -> Path:
    """Where the log file is kept: the user state directory's `log` folder
    (`$XDG_STATE_HOME/acp-server/log`, else `~/.local/state/acp-server/log` on Linux)."""
    if sys.platform not in ("darwin", "win32"):  # XDG, as platformdirs has it, without its import
        base = os.environ.get("XDG_STATE_HOME", "").strip() or "~/.local/state"
        return Path(base).expanduser() / "acp-server" / "log"
    import platformdirs

    return Path(platformdirs.user_log_dir("acp-server", appauthor=False))


def log_path() -> Path:
    """The log file serving writes to unless `--log-file` names another."""
    return log_dir() / LOG_FILE
