"""The compact tool profile for small windows: which tools to offer, and how briefly.

The system prompt and the eleven tool schemas take ~3,000 tokens or more: a 4,096-token model would
have almost no room left. Below `SMALL_WINDOW` the profile is compact: every description is cut
to its first sentence (no examples, no defaults), and tools are left out until the fixed part
(system prompt with the project's instructions and environment + tools) is within a quarter of
the window: first the tools this module does not name (tools added later, MCP servers' tools),
the last offered first, then the rarely needed ones in `LEAVE_OUT_ORDER`. The `CORE` tools
(read, edit, run) are never left out. This module only decides and measures; the session
applies it.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from acp_server.context.tokens import Estimator
from acp_server.messages import ToolSpec

SMALL_WINDOW = 8192
FIXED_SHARE = 0.25  # of the window, the most the system prompt and tools should take
LEAVE_OUT_ORDER = (
    "fetch_url",
    "stop_command",
    "command_output",
    "list_directory",
    "glob",
    "update_plan",
    "write_file",
    "grep",
)
CORE = frozenset({"read_file", "edit_file", "run_command"})
DROPPED_KEYS = frozenset({"$schema", "default", "examples"})
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=[A-Z])")


@dataclass(frozen=True)
class ToolProfile:
    compact: bool
    leave_out: tuple[str, ...]
    full_tokens: int  # system prompt + every tool as is (corrected)
    fixed_tokens: int  # system prompt + the tools as this profile offers them
    limit: int  # the most the fixed part should take

    @property
    def within_limit(self) -> bool:
        return self.fixed_tokens <= self.limit

    def describe(self) -> str:
        """For the debug log and the context meter."""
        what = "compact profile" if self.compact else "full profile"
        left = f", left out: {', '.join(self.leave_out)}" if self.leave_out else ""
        return (
            f"fixed part ~{self.fixed_tokens:,} tokens ({what}{left}; full ~{self.full_tokens:,},"
            f" limit ~{self.limit:,})"
        )


def first_sentence(text: str) -> str:
    return _SENTENCE_END.split(text.strip(), maxsplit=1)[0]


def shorten(spec: ToolSpec) -> ToolSpec:
    """The tool with first-sentence descriptions and no examples or defaults."""
    return ToolSpec(spec.name, first_sentence(spec.description), _brief(spec.parameters))


def _brief(schema: Any) -> Any:
    if isinstance(schema, dict):
        out = {k: _brief(v) for k, v in schema.items() if k not in DROPPED_KEYS}
        if isinstance(out.get("description"), str):
            out["description"] = first_sentence(out["description"])
        return out
    if isinstance(schema, list):
        return [_brief(v) for v in schema]
    return schema


def apply_profile(profile: ToolProfile, tools: Sequence[ToolSpec]) -> tuple[ToolSpec, ...]:
    kept = tuple(t for t in tools if t.name not in profile.leave_out)
    return tuple(shorten(t) for t in kept) if profile.compact else kept


def leave_out_order(tools: Sequence[ToolSpec]) -> list[str]:
    """The offered tools that may be left out, in the order they are: unnamed ones (the last
    offered first), then LEAVE_OUT_ORDER; never CORE."""
    names = [t.name for t in tools]
    unnamed = [n for n in reversed(names) if n not in CORE and n not in LEAVE_OUT_ORDER]
    return unnamed + [n for n in LEAVE_OUT_ORDER if n in names]


def choose_profile(
    window: int, system: str, tools: Sequence[ToolSpec], estimator: Estimator
) -> ToolProfile:
    """The profile for a window of `window` tokens, with the fixed part measured."""
    system_raw = estimator.text(system)

    def fixed(specs: Sequence[ToolSpec]) -> int:  # with what the server was seen to add
        return estimator.corrected(system_raw + estimator.tools(specs)) + estimator.overhead

    full = fixed(tools)
    limit = int(window * FIXED_SHARE)
    if window >= SMALL_WINDOW:
        return ToolProfile(False, (), full, full, limit)
    short = [shorten(t) for t in tools]
    left: list[str] = []
    for name in leave_out_order(tools):
        if fixed([t for t in short if t.name not in left]) <= limit:
            break
        left.append(name)
    kept = [t for t in short if t.name not in left]
    return ToolProfile(True, tuple(left), full, fixed(kept), limit)
