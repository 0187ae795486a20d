"""Settings that shape every session. Later: loaded from TOML (XDG) and the environment and
validated by schemas/config.schema.json; for now filled from the command line."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass
class Settings:
    # A turn stops after this many model requests (stop reason `max_turn_requests`).
    max_turn_requests: int = 50
    # Used when neither the configuration nor the model server says how large the model's
    # context window is: unknown is never treated as unlimited.
    default_context_window: int = 8192
    context_window: int | None = None  # configured; the smallest known value wins
