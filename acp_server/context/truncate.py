"""Compaction stage (c), the fallback that always works, and clipping one oversized result.

Deterministic truncation keeps the newest whole rounds that fit, behind a placeholder the model
can read ("earlier messages were removed ...") that carries the kept state (the user's messages,
the plan, the files). It needs no model round, so a session never wedges: it is what happens
when the summary fails, comes back empty or too long, or is skipped after repeated failures.
When even the newest round does not fit, its tool results are clipped (to `clip_to`, which may
be more than the goal: a file the model just asked for is not cut only to leave room); a
newest round without results (the current prompt) is kept whole: the user's own words are
never condensed.
"""

from __future__ import annotations

from collections.abc import Sequence

from acp_server.context.state import rebuild, round_starts
from acp_server.context.summary import cut_middle
from acp_server.context.tokens import MESSAGE_OVERHEAD, Estimator
from acp_server.messages import Message, text_message

HEAD_SHARE = 0.6  # of a clipped tool result, the share kept from the start

HOW_TO_READ_MORE = {
    "read_file": "read the rest with read_file, using `line` and `limit`",
    "run_command": "run the command again with its output narrowed (grep, head, tail, a file)",
    "grep": "narrow the search (a more specific pattern, `glob` or `path`, or `max_results`)",
    "glob": "narrow the pattern or the `path`",
    "list_directory": "list a subdirectory, or use glob with a narrower pattern",
}


def clip_result(text: str, max_tokens: int, estimator: Estimator, tool_name: str = "") -> str:
    """A tool result within `max_tokens`: head and tail kept, the middle replaced by a note
    saying how much was cut and how to read the rest. Unchanged when it fits."""
    if estimator.corrected(estimator.text(text)) <= max_tokens:
        return text
    how = HOW_TO_READ_MORE.get(tool_name, "ask for a smaller part at a time")

    def note(lines: int, chars: int) -> str:
        return (
            f"[... {lines:,} lines ({chars:,} characters) cut here: the output is too large "
            f"for the model's context window. To see them, {how}. ...]"
        )

    cap = estimator.chars_for(max_tokens)
    clipped = cut_middle(text, cap, HEAD_SHARE, note)
    tokens = estimator.corrected(estimator.text(clipped))
    if tokens > max_tokens:  # dense text (non-ASCII counts by bytes): cut again in proportion
        clipped = cut_middle(text, int(cap * max_tokens / tokens * 0.95), HEAD_SHARE, note)
    return clipped


def tail_start(history: Sequence[Message], max_tokens: int, estimator: Estimator) -> int:
    """Where the newest whole rounds within `max_tokens` (corrected) begin; `len(history)`
    when not even the newest round fits."""
    start = len(history)
    total = 0
    for begin in reversed(round_starts(history)):
        total += estimator.messages(history[begin:start])
        if estimator.corrected(total) > max_tokens:
            break
        start = begin
    return start


def truncate(
    history: Sequence[Message],
    max_tokens: int,
    estimator: Estimator,
    user_chars: int,
    summary: str | None = None,
    floor: int = 0,
    clip_to: int | None = None,
) -> list[Message]:
    """`[placeholder with the kept state (or `summary`), the newest whole rounds]` within
    `max_tokens` when at all possible (the state message itself is never cut). The tail starts
    at `floor` or later (a summary covers what is before it). When no whole round fits, the
    newest one is kept, its results clipped to `clip_to` (default `max_tokens`) if needed."""
    starts = [s for s in round_starts(history) if s >= floor]

    def size(out: list[Message]) -> int:
        return estimator.corrected(estimator.messages(out))

    def fits(start: int) -> bool:
        return size(rebuild(history, start, summary, user_chars)) <= max_tokens

    # The earliest round start that fits; later starts keep less, so the answer is a boundary.
    low, high = 0, len(starts)
    while low < high:
        middle = (low + high) // 2
        if fits(starts[middle]):
            high = middle
        else:
            low = middle + 1
    if low < len(starts):
        return rebuild(history, starts[low], summary, user_chars)
    limit = max_tokens if clip_to is None else max(clip_to, max_tokens)
    begin = starts[-1] if starts else len(history)
    whole = rebuild(history, begin, summary, user_chars)
    if size(whole) <= limit:
        return whole
    return _with_clipped_round(history, begin, limit, estimator, user_chars, summary)


def _with_clipped_round(
    history: Sequence[Message],
    begin: int,
    max_tokens: int,
    estimator: Estimator,
    user_chars: int,
    summary: str | None,
) -> list[Message]:
    """The newest round (from `begin`) with its tool results clipped to share what is left.
    Without results (the current prompt), the round is kept whole, behind the state without
    the user's earlier messages when the whole state does not fit."""
    last = list(history[begin:])
    results = [m for m in last if m.role == "tool"]
    if not results:
        built = rebuild(history, begin, summary, user_chars)
        if estimator.corrected(estimator.messages(built)) <= max_tokens:
            return built
        return rebuild(history, begin, summary, 0)  # the plan and files still, never the round
    built = rebuild(history, begin, summary, user_chars)
    others = [m for m in built if m.role != "tool"]
    room = max_tokens - estimator.corrected(estimator.messages(others))
    share = max(room // len(results) - MESSAGE_OVERHEAD, 0)
    names = {call.id: call.name for m in last for call in m.tool_calls}
    clipped = [
        text_message(
            "tool",
            clip_result(m.text, share, estimator, names.get(m.tool_call_id or "", "")),
            tool_call_id=m.tool_call_id,
        )
        if m.role == "tool"
        else m
        for m in built
    ]
    return clipped
