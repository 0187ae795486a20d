"""The compact tool profile for small windows: which tools to offer, and how briefly.

The system prompt and the tool schemas take ~4,000 tokens or more: a 4,096-token model would
have almost no room left. Below `SMALL_WINDOW`, and at it when the full tools would take more
than a quarter of it (8,192 is also the default window of a model nobody described), the
profile is compact: every description is cut to its first sentence (no examples, no defaults),
parameters that need a tool left out go with it (`COMPANIONS`), so do the options that only shape
a result, which a small model fills in without need (`OPTIONS`: the tool still takes them), and
the rarely needed tools are left out, in `LEAVE_OUT_ORDER`, until the fixed part (system prompt +
tools) is within a quarter of the window (subagents early: a window this small has no room for
a second conversation; `search_tools`, offered only when MCP tools are deferred, is never left
out, since it is the one way to reach them); when it is still larger, the parameters lose their
descriptions too (`bare`: their names, types and bounds say most of it). The core tools (read,
edit, run) are never left out. This module only decides and measures; the session applies it.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from acp_server.context.tokens import ByIdentity, Estimator
from acp_server.messages import ToolSpec

SMALL_WINDOW = 8192
FIXED_SHARE = 0.25  # of the window, the most the system prompt and tools should take
LEAVE_OUT_ORDER = (
    "fetch_url",
    # Subagents: a second conversation needs room this window does not have, and the small
    # models that run in one do better doing the work themselves.
    "task",
    # Questions to the user (offered to an editor that shows forms): a small model with a
    # small window needs its project's tools first.
    "plan_ready",
    "ask_user",
    "stop_command",
    "command_output",
    "glob",
    "update_plan",
    "list_directory",
    "write_file",
    "grep",
)
DROPPED_KEYS = frozenset({"$schema", "default", "examples"})
# Parameters that only make sense with a tool that may be left out: gone with it.
COMPANIONS: dict[str, dict[str, tuple[str, ...]]] = {
    "run_command": {"command_output": ("background", "stop_on_cancel")},
}
# Options left out of the compact profile, so that their defaults apply: those that shape the
# form of a result rather than what is searched. A small model fills in every parameter it is
# shown: the 1.5B called grep with files_only and up to 50 lines of context each time, so it got
# file names where it needed the lines (or a flood of context). The tool still takes them: the
# offered schema then allows more than it lists, and a call that gives one is not refused.
OPTIONS: dict[str, tuple[str, ...]] = {
    "grep": ("max_results", "before", "after", "files_only", "multiline"),
}
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=[A-Z])")


@dataclass(frozen=True)
class ToolRoom:
    """What the tools of a request are measured against: the window, and how tools count."""

    window: int
    measure: Callable[[Sequence[ToolSpec]], int]


@dataclass(frozen=True)
class ToolProfile:
    compact: bool
    leave_out: tuple[str, ...]
    full_tokens: int  # system prompt + every tool as is (corrected)
    fixed_tokens: int  # system prompt + the tools as this profile offers them
    limit: int  # the most the fixed part should take
    bare: bool = False  # parameters without descriptions too (the last step)

    @property
    def within_limit(self) -> bool:
        return self.fixed_tokens <= self.limit

    def describe(self) -> str:
        """For the debug log and the context meter."""
        what = "compact profile" if self.compact else "full profile"
        left = f", left out: {', '.join(self.leave_out)}" if self.leave_out else ""
        left += ", bare parameters" if self.bare else ""
        return (
            f"fixed part ~{self.fixed_tokens:,} tokens ({what}{left}; full ~{self.full_tokens:,},"
            f" limit ~{self.limit:,})"
        )


def first_sentence(text: str) -> str:
    return _SENTENCE_END.split(text.strip(), maxsplit=1)[0]


def shorten(spec: ToolSpec, left_out: Sequence[str] = (), bare: bool = False) -> ToolSpec:
    """The tool with first-sentence descriptions and no examples or defaults, without the
    parameters that need a tool left out (`COMPANIONS`) or that only shape a result
    (`OPTIONS`). The same spec shortened the same way is the same object (`_SHORT`): choosing a
    profile shortens every tool up to nine times a session, and the estimator then measures each
    shortened tool once."""
    drop = tuple(sorted({p for tool, names in COMPANIONS.get(spec.name, {}).items()
                         if tool in left_out for p in names}))  # fmt: skip
    options = OPTIONS.get(spec.name, ())

    def make() -> ToolSpec:
        parameters = _brief(spec.parameters, bare)
        if isinstance(parameters.get("properties"), dict):
            kept = {k: v for k, v in parameters["properties"].items()
                    if k not in drop and k not in options}  # fmt: skip
            parameters = {**parameters, "properties": kept}
            if set(options) & set(spec.parameters.get("properties", {})):
                parameters.pop("additionalProperties", None)
        return ToolSpec(spec.name, first_sentence(spec.description), parameters)

    return _SHORT.get(spec, (drop, bare), make)


_SHORT: ByIdentity[ToolSpec, ToolSpec] = ByIdentity(512)  # by spec and the parameters dropped


def _brief(schema: Any, bare: bool = False) -> Any:
    """`schema` without examples and defaults, each description cut to its first sentence
    (`bare`: left out)."""
    if isinstance(schema, dict):
        out = {k: _brief(v, bare) for k, v in schema.items() if k not in DROPPED_KEYS}
        if isinstance(out.get("description"), str):
            if bare and isinstance(schema.get("type"), str):
                del out["description"]
            else:
                out["description"] = first_sentence(out["description"])
        return out
    if isinstance(schema, list):
        return [_brief(v, bare) for v in schema]
    return schema


def apply_profile(profile: ToolProfile, tools: Sequence[ToolSpec]) -> tuple[ToolSpec, ...]:
    kept = tuple(t for t in tools if t.name not in profile.leave_out)
    if not profile.compact:
        return kept
    return tuple(shorten(t, profile.leave_out, profile.bare) for t in kept)


def choose_profile(
    window: int, system: str, tools: Sequence[ToolSpec], estimator: Estimator
) -> ToolProfile:
    """The profile for a window of `window` tokens, with the fixed part measured."""
    system_raw = estimator.text(system)

    def fixed(specs: Sequence[ToolSpec]) -> int:  # with what the server was seen to add
        return estimator.corrected(system_raw + estimator.tools(specs)) + estimator.overhead

    full = fixed(tools)
    limit = int(window * FIXED_SHARE)
    if window > SMALL_WINDOW or (window == SMALL_WINDOW and full <= limit):
        return ToolProfile(False, (), full, full, limit)
    names = {t.name for t in tools}
    left: list[str] = []
    for name in LEAVE_OUT_ORDER:
        if fixed(_compact(tools, left)) <= limit:
            break
        if name in names:
            left.append(name)
    size = fixed(_compact(tools, left))
    if size <= limit:
        return ToolProfile(True, tuple(left), full, size, limit)
    bare = fixed(_compact(tools, left, bare=True))
    return ToolProfile(True, tuple(left), full, bare, limit, bare=True)


def _compact(tools: Sequence[ToolSpec], left: Sequence[str], bare: bool = False) -> list[ToolSpec]:
    return [shorten(t, left, bare) for t in tools if t.name not in left]
