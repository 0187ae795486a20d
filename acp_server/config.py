"""Settings that shape every session, and where the agent keeps its data.

Later: settings loaded from TOML (XDG) and the environment and validated by
schemas/config.schema.json; for now filled from the command line.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

STORE_FILE = "sessions.sqlite3"


@dataclass
class Settings:
    # A turn stops after this many model requests (stop reason `max_turn_requests`).
    max_turn_requests: int = 50
    # Used when neither the configuration nor the model server says how large the model's
    # context window is: unknown is never treated as unlimited.
    default_context_window: int = 8192
    context_window: int | None = None  # configured; the smallest known value wins


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
