"""The permission modes a session offers: their ids, names and descriptions.

Apart from `permissions` (which decides what each mode allows) so that answering
`session/new`, which lists the modes, does not load the permission rules.
"""

from __future__ import annotations

from typing import Literal, TypeGuard

Mode = Literal["ask", "accept_edits", "plan", "bypass"]

MODES: tuple[tuple[Mode, str, str], ...] = (
    ("ask", "Ask", "Reads inside the project run; edits and commands ask first."),
    ("accept_edits", "Accept edits", "Edits inside the project run; commands ask first."),
    ("plan", "Plan", "Read-only: the agent looks and plans, but edits and commands are refused."),
    ("bypass", "Bypass permissions", "Everything inside the project runs without asking."),
)
MODE_IDS: tuple[str, ...] = tuple(m[0] for m in MODES)


def is_mode(value: object) -> TypeGuard[Mode]:
    return isinstance(value, str) and value in MODE_IDS
