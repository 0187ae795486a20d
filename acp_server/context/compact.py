"""Compaction: the stages in order, cheapest first, with progress guards.

    (a) prune old tool outputs            no model round
    (b) summary of the older part         one tool-free model round (`summarize`)
    (c) deterministic truncation          always works; the fallback of (b)

Each stage runs only when the previous one did not bring the request down to the goal (60 % of
the room the system prompt and tools leave) by a clear margin; a summary that fails, comes back
empty, or is not clearly smaller than what it replaced falls through to truncation, and after
`MAX_SUMMARY_FAILURES` failures in a row the session skips the summary. Nothing is mutated: the
result is a new history for the caller to store.

A `/compact` (manual) always goes on to the summary when there is an older part to summarize.
Cancellation of `summarize` propagates (the history is then unchanged, and still valid).
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Literal

from acp_server.context.fit import ContextBudget, Fit
from acp_server.context.prune import prune_tool_outputs
from acp_server.context.state import rebuild, round_starts
from acp_server.context.summary import summary_request
from acp_server.context.truncate import tail_start, truncate
from acp_server.messages import Message, ModelRequest, ToolSpec

log = logging.getLogger(__name__)

# Runs the summary request (no tools) and returns the summary text; None or "" for a failure.
Summarize = Callable[[ModelRequest], Awaitable[str | None]]
Stage = Literal["none", "prune", "summary", "truncate"]

GOAL_SHARE = 0.6  # of the room left by the system prompt and tools, after a compaction
KEEP_OUTPUTS_SHARE = 0.25  # newest tool outputs kept whole by pruning
TAIL_SHARE = 0.3  # newest rounds kept verbatim after a summary
USER_SHARE = 0.1  # the user's earlier messages kept verbatim in the state
SUMMARY_SHARE = 0.15  # the summary's own length (its max_tokens)
SHRINK_MARGIN = 0.1  # a stage must shrink the request by at least this share
MAX_SUMMARY_FAILURES = 2


@dataclass(frozen=True)
class Compaction:
    history: list[Message]
    stage: Stage
    before: int  # corrected tokens of the whole request
    after: int
    summary: str = ""
    problems: tuple[str, ...] = field(default=())  # why stages fell through, for a log line

    def describe(self) -> str:
        """One line for the user."""
        how = {
            "none": "nothing older to compact",
            "prune": "older tool outputs removed",
            "summary": "older messages summarized",
            "truncate": "older messages removed",
        }[self.stage]
        return f"Compacted the conversation: about {self.before:,} → {self.after:,} tokens ({how})."


def shrank(before: int, after: int, margin: float = SHRINK_MARGIN) -> bool:
    """Did a stage shrink the request by a clear margin?"""
    return after <= before * (1 - margin)


@dataclass(frozen=True)
class _Plan:
    """Token amounts of one compaction, from the fit that asked for it."""

    fit: Fit
    room: int  # budget minus system prompt and tools

    def share(self, part: float) -> int:
        return max(int(self.room * part), 0)

    @property
    def goal(self) -> int:
        return self.fit.system + self.fit.tools + self.share(GOAL_SHARE)


async def compact(
    budget: ContextBudget,
    system: str,
    tools: Sequence[ToolSpec],
    history: Sequence[Message],
    summarize: Summarize | None,
    *,
    focus: str = "",
    manual: bool = False,
) -> Compaction:
    """Compact `history` so the request fits with a margin; see the module docstring."""
    fit = budget.fit(system, tools, history)
    if fit.status == "too_large":  # nothing to gain: the caller tells the user fit.problem()
        return Compaction(list(history), "none", fit.used, fit.used)
    plan = _Plan(fit, fit.budget - fit.system - fit.tools)
    est = budget.estimator

    def total(messages: Sequence[Message]) -> int:
        return fit.system + fit.tools + est.corrected(est.messages(messages))

    problems: list[str] = []
    pruned = prune_tool_outputs(history, est, plan.share(KEEP_OUTPUTS_SHARE))
    if not manual and total(pruned) <= plan.goal and shrank(fit.used, total(pruned)):
        return Compaction(pruned, "prune", fit.used, total(pruned))
    problems.append("pruning tool outputs did not free enough")
    user_chars = est.chars_for(plan.share(USER_SHARE))
    # The tail: the newest rounds within its share, and at least the newest round (the results
    # the model asked for just now); truncation clips that round when even it is too large.
    starts = round_starts(pruned)
    split = min(tail_start(pruned, plan.share(TAIL_SHARE), est), starts[-1] if starts else 0)
    if split == 0:
        if manual:
            return Compaction(list(history), "none", fit.used, fit.used)
        problems.append("the newest messages alone fill the room")
    elif summarize is None or budget.summary_failures >= MAX_SUMMARY_FAILURES:
        problems.append("the summary is skipped after repeated failures")
    else:
        text, why = await _summary(budget, pruned[:split], summarize, focus, plan)
        rebuilt = rebuild(pruned, split, text, user_chars) if text else []
        if text and total(rebuilt) <= plan.goal and shrank(total(pruned), total(rebuilt)):
            budget.summary_failures = 0
            return Compaction(rebuilt, "summary", fit.used, total(rebuilt), text or "")
        budget.summary_failures += 1
        problems.append(why or "the summary was not clearly smaller than what it replaced")
    cut = truncate(pruned, plan.goal - fit.system - fit.tools, est, user_chars)
    log.info("context: truncated the history (%s)", "; ".join(problems))
    return Compaction(cut, "truncate", fit.used, total(cut), problems=tuple(problems))


async def _summary(
    budget: ContextBudget,
    older: Sequence[Message],
    summarize: Summarize,
    focus: str,
    plan: _Plan,
) -> tuple[str | None, str]:
    """(the summary, "") or (None, why it failed). Cancellation propagates."""
    request = summary_request(
        older,
        budget.estimator,
        budget.window.budget,
        min(budget.window.reply_reserve, max(plan.share(SUMMARY_SHARE), 64)),
        focus,
    )
    try:
        text = await summarize(request)
    except Exception as exc:  # a failed round is a reason to fall back, never a failed turn
        log.warning("context: the summary round failed: %s", exc)
        return None, f"the summary round failed: {exc}"
    if not text or not text.strip():
        return None, "the summary came back empty"
    return text.strip(), ""
