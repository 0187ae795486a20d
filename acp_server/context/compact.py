"""Compaction: the stages in order, cheapest first, with progress guards.

    (a) prune old tool outputs            no model round
    (b) summary of the older part         one tool-free model round (`summarize`)
    (c) deterministic truncation          always works; the fallback of (b)

Each stage runs only when the previous one did not bring the request down to the goal (60 % of
the room the system prompt and tools leave) by a clear margin. Pruning is judged with slack:
a pruned request within `PRUNE_SLACK` of the goal either way is a close call, and a close call
goes the way the session's previous compaction went (pruned: prune again; went further: go
further). So a few tokens more or less (a longer working directory in the system prompt) do not
flip a turn between a quick prune and a summary round, nor make a session alternate between
them; a summary that fails, comes back
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
from acp_server.context.state import is_state_message, rebuild, round_starts
from acp_server.context.summary import summary_request
from acp_server.context.tokens import Estimator
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
PRUNE_SLACK = 0.05  # of the room: a pruned request this close to the goal is a close call
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
    est: Estimator

    @property
    def room(self) -> int:
        """The budget minus the system prompt and tools: what messages may use."""
        return self.fit.budget - self.fit.system - self.fit.tools

    def share(self, part: float) -> int:
        return max(int(self.room * part), 0)

    @property
    def goal(self) -> int:
        """The whole request after a compaction, at most."""
        return self.fit.system + self.fit.tools + self.share(GOAL_SHARE)

    @property
    def user_chars(self) -> int:
        return self.est.chars_for(self.share(USER_SHARE))

    def total(self, messages: Sequence[Message]) -> int:
        return self.fit.system + self.fit.tools + self.est.corrected(self.est.messages(messages))

    def split(self, history: Sequence[Message]) -> int:
        """Where the verbatim tail starts: the newest rounds within its share, and at least the
        newest round (the results the model asked for just now; clipped if too large)."""
        starts = round_starts(history)
        newest = starts[-1] if starts else 0
        return min(tail_start(history, self.share(TAIL_SHARE), self.est), newest)


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
    plan = _Plan(fit, budget.estimator)
    if not manual:
        pruned = _prune(budget, plan, history)
        if pruned is not None:
            return Compaction(pruned, "prune", fit.used, plan.total(pruned))
    pruned = prune_tool_outputs(history, plan.est, plan.share(KEEP_OUTPUTS_SHARE))
    split = plan.split(pruned)
    if split == 0 and manual:  # all of it fits the tail's share: keep the newest exchange only
        split = _newest_exchange(pruned)
    if split == 0 and manual:
        return Compaction(list(history), "none", fit.used, fit.used)
    problems = ["pruning tool outputs did not free enough"]
    why = _skip_summary(budget, split, summarize)
    if summarize is not None and not why:
        rebuilt, text, why = await _summary_stage(budget, plan, pruned, split, summarize, focus)
        if rebuilt is not None:
            return Compaction(rebuilt, "summary", fit.used, plan.total(rebuilt), text)
    problems.append(why)
    cut = truncate(pruned, plan.goal - fit.system - fit.tools, plan.est, plan.user_chars)
    log.info("context: truncated the history (%s)", "; ".join(problems))
    return Compaction(cut, "truncate", fit.used, plan.total(cut), problems=tuple(problems))


def _prune(budget: ContextBudget, plan: _Plan, history: Sequence[Message]) -> list[Message] | None:
    """The pruned history when pruning alone is enough, else None (the next stages run).

    Decided on the most pruning can do (every older output removed), which moves smoothly with
    the sizes: how many outputs a share keeps jumps by a whole file. A close call (within the
    slack of the goal) goes the way the previous compaction went. The newest older outputs are
    then kept whole while they stay within their share and under the goal."""
    least = prune_tool_outputs(history, plan.est, 0)
    after = plan.total(least)
    if abs(after - plan.goal) <= plan.share(PRUNE_SLACK):
        enough = not budget.went_past_pruning
    else:
        enough = after < plan.goal
    budget.went_past_pruning = not (enough and shrank(plan.fit.used, after))
    if budget.went_past_pruning:
        return None
    keep = min(plan.share(KEEP_OUTPUTS_SHARE), plan.goal - after)
    return prune_tool_outputs(history, plan.est, keep) if keep > 0 else least


def _newest_exchange(history: Sequence[Message]) -> int:
    """Where the newest exchange starts: the latest user message (0: none before it)."""
    users = [i for i, m in enumerate(history) if m.role == "user" and not is_state_message(m)]
    return users[-1] if users else 0


def _skip_summary(budget: ContextBudget, split: int, summarize: Summarize | None) -> str:
    """Why the summary stage is skipped; "" when it runs."""
    if split == 0:
        return "the newest messages alone fill the room"
    if summarize is None:
        return "no summary round is available"
    if budget.summary_failures >= MAX_SUMMARY_FAILURES:
        return f"the summary failed {budget.summary_failures} times in a row"
    return ""


async def _summary_stage(
    budget: ContextBudget,
    plan: _Plan,
    history: list[Message],
    split: int,
    summarize: Summarize,
    focus: str,
) -> tuple[list[Message] | None, str, str]:
    """(the rebuilt history, the summary, "") or (None, "", why it is not used)."""
    text, why = await _summary(budget, history[:split], summarize, focus, plan)
    if text is not None:
        rebuilt = rebuild(history, split, text, plan.user_chars)
        if plan.total(rebuilt) > plan.goal:  # the newest round is large: clip it, keep the rest
            room = plan.goal - plan.fit.system - plan.fit.tools
            rebuilt = truncate(history, room, plan.est, plan.user_chars, text, floor=split)
        if plan.total(rebuilt) <= plan.fit.budget:
            budget.summary_failures = 0
            return rebuilt, text, ""
        why = "the summary and the kept state do not fit together"
    budget.summary_failures += 1
    return None, "", why


async def _summary(
    budget: ContextBudget,
    older: Sequence[Message],
    summarize: Summarize,
    focus: str,
    plan: _Plan,
) -> tuple[str | None, str]:
    """(the summary, "") or (None, why it failed). Cancellation propagates."""
    est = budget.estimator
    reply_tokens = min(budget.window.reply_reserve, max(plan.share(SUMMARY_SHARE), 64))
    request = summary_request(older, est, budget.window.budget, reply_tokens, focus)
    try:
        text = await summarize(request)
    except Exception as exc:  # a failed round is a reason to fall back, never a failed turn
        log.warning("context: the summary round failed: %s", exc)
        return None, f"the summary round failed: {exc}"
    if not text or not text.strip():
        return None, "the summary came back empty"
    size = est.text(text)
    if not shrank(est.messages(older), size):
        return None, "the summary was not clearly shorter than what it replaced"
    if est.corrected(size) > reply_tokens * 3 // 2:  # the server ignored max_tokens
        return None, f"the summary was longer than the {reply_tokens:,} tokens asked for"
    return text.strip(), ""
