"""Compaction: the stages in order, cheapest first, with progress guards.

    (a) prune old tool outputs            no model round
    (b) summary of the older part         one model round (`summarize`)
    (c) deterministic truncation          always works; the fallback of (b)

Only older exchanges are compacted: the current prompt stays as the user wrote it, and a
request with nothing older than it (`compactable`) is left alone (it fits, or the fixed parts
alone are too large and the caller says so).

Compaction leaves room. A summary or a truncation aims at the goal (half the room the system
prompt and tools leave), keeping a verbatim tail and a bounded state (`state`), so several turns
fit before the next compaction. Pruning costs nothing, so it is enough when it brings the
request to the goal, or near what a summary could reach anyway when that is more (the newest
round, which no stage removes, plus the state): with a window that holds little more than one
file read, most turns prune and a summary runs only every few turns. No stage cuts the round
the model just asked for unless the request would not fit the budget otherwise. Pruning goes
closer in only as needed: the last two exchanges' outputs stay, then the current exchange's,
then only the newest round's.

The choice has slack: a pruned request within `PRUNE_SLACK` of its goal is a close call, and a
close call goes the way the session's previous compaction went (pruned: prune again; went
further: go further), so a few tokens more or less (a longer working directory in the system
prompt) do not flip a turn between a quick prune and a summary round. A summary that fails,
comes back empty, or is not clearly smaller than what it replaced falls through to truncation,
and after `MAX_SUMMARY_FAILURES` failures in a row the session skips the summary. A summary
that could free only a little (`MIN_GAIN_SHARE`: the rest is the newest round and the state) is
not worth its model round while the request fits: the request is then sent as it is
(`worth_compacting` says so beforehand, so nothing is shown).

A compaction never leaves the request larger than it found it (it then changes nothing), and
one that cannot bring the request under the trigger tells the budget what it left (`floor`),
so the same useless compaction is not tried again until the conversation has grown. Nothing is
mutated: the result is a new history for the caller to store.

The summary round (`summary_round`) is asked as the conversation's own next request, so a
provider's prompt cache serves nearly all of it, or from a plain-text transcript.

A `/compact` (manual) always goes on to the summary when there is an older part to summarize.
Cancellation of `summarize` propagates (the history is then unchanged, and still valid).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Literal

from acp_server.context.fit import ContextBudget, Fit
from acp_server.context.prune import exchange_start, prune_tool_outputs
from acp_server.context.state import ACK, is_state_message, rebuild, round_starts
from acp_server.context.summary_round import (
    Summarize,
    ask_summary,
    shrank,
)
from acp_server.context.tokens import Estimator
from acp_server.context.truncate import tail_start, truncate
from acp_server.messages import Message, ToolSpec, is_note

log = logging.getLogger(__name__)

Stage = Literal["none", "prune", "summary", "truncate"]


# Shares of the room the system prompt and tools leave for messages under the trigger (what a
# compaction leaves), and of the whole budget's room (the margins of its decisions).
GOAL_SHARE = 0.5  # the most a summary or truncation leaves, the newest round allowing
KEEP_OUTPUTS_SHARE = 0.25  # newest older tool outputs kept whole by pruning
TAIL_SHARE = 0.15  # newest rounds kept verbatim after a summary (at least the newest round)
USER_SHARE = 0.08  # the user's earlier messages in the state (its file lists: half of it)
SUMMARY_SHARE = 0.1  # the summary's own length (its max_tokens)
NEAR_BEST_SHARE = 0.1  # pruning this close to what a summary could reach is enough
MIN_GAIN_SHARE = 0.15  # a summary must be expected to free at least this much
LIMIT_MARGIN = 0.01  # a compacted request stays this far under the budget
PRUNE_SLACK = 0.03  # a pruned request this close to its goal is a close call
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


def worth_compacting(
    budget: ContextBudget, system: str, tools: Sequence[ToolSpec], history: Sequence[Message]
) -> bool:
    """Would an automatic compaction do anything: is there an older part, and would pruning
    be enough or a summary free a clear share? (Nothing is shown when it would not.)"""
    fit = budget.fit(system, tools, history)
    if fit.status == "too_large" or not compactable(history):
        return False
    plan = _Plan(fit, budget.estimator)
    return _prune_point(budget, plan, history) is not None or _summary_pays(plan, history)


def compactable(history: Sequence[Message]) -> bool:
    """Is there an older part to compact: a message before the newest round that is neither
    the current prompt nor the lead of an earlier compaction?"""
    starts = round_starts(history)
    newest = starts[-1] if starts else 0
    current = _newest_exchange(history)
    lead = _lead(history)
    return any(index != current for index in range(lead, newest))


def _lead(history: Sequence[Message]) -> int:
    """How many messages an earlier compaction put first (its state, its acknowledgement)."""
    if not history or not is_state_message(history[0]):
        return 0
    if len(history) < 2:
        return 1
    second = history[1]
    acked = second.role == "assistant" and second.text == ACK and not second.tool_calls
    return 2 if acked else 1


@dataclass(frozen=True)
class _Plan:
    """Token amounts of one compaction, from the fit that asked for it."""

    fit: Fit
    est: Estimator
    prefix: tuple[str, tuple[ToolSpec, ...], tuple[Message, ...]] = ("", (), ())  # as sent

    @property
    def room(self) -> int:
        """What messages may use under the trigger (the system prompt and tools take the
        rest): every share is of this, so a large fixed part does not leave the goal at the
        trigger itself."""
        return self.fit.trigger - self.fit.system - self.fit.tools

    def share(self, part: float) -> int:
        return max(int(self.room * part), 0)

    def budget_share(self, part: float) -> int:
        """A share of the whole budget's room for messages: for the margins of a decision,
        which must not vanish when the fixed part leaves little room under the trigger."""
        return max(int((self.fit.budget - self.fit.system - self.fit.tools) * part), 0)

    @property
    def goal(self) -> int:
        """The whole request after a summary or truncation, at most (the newest round allowing)."""
        return self.fit.system + self.fit.tools + self.share(GOAL_SHARE)

    @property
    def limit(self) -> int:
        """The most a compaction may leave: the budget, less a margin."""
        return self.fit.budget - self.budget_share(LIMIT_MARGIN)

    @property
    def user_chars(self) -> int:
        return self.est.chars_for(self.share(USER_SHARE))

    def total(self, messages: Sequence[Message]) -> int:
        return self.fit.system + self.fit.tools + self.est.corrected(self.est.messages(messages))

    def split(self, history: Sequence[Message]) -> int:
        """Where the verbatim tail starts: the newest rounds within its share, and at least the
        newest round (the results the model asked for just now; clipped if too large), or the
        whole current exchange when it fits the goal beside the state (the prompt stays a
        message)."""
        tail = tail_start(history, self.share(TAIL_SHARE), self.est)
        current = _newest_exchange(history)
        room = self.share(GOAL_SHARE) - self.share(USER_SHARE)
        if current and self.est.corrected(self.est.messages(history[current:])) <= room:
            return min(tail, current)
        return min(tail, _newest(history))

    def best(self, history: Sequence[Message]) -> int:
        """The least a summary could leave: the state and the newest round."""
        return self.total(rebuild(history, _newest(history), None, self.user_chars))

    def prune_goal(self, history: Sequence[Message]) -> int:
        """What pruning must reach: the goal, or near the least a summary could leave when
        that is more; within the limit."""
        near = self.best(history) + self.budget_share(NEAR_BEST_SHARE)
        return min(max(self.goal, near), self.limit)


def _newest(history: Sequence[Message]) -> int:
    """Where the newest round starts."""
    starts = round_starts(history)
    return starts[-1] if starts else 0


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
    """Compact `history` so the request fits with room to spare; see the module docstring."""
    fit = budget.fit(system, tools, history)
    # Too large: nothing to gain, the caller tells the user fit.problem(). Nothing older: the
    # current prompt is never condensed.
    if fit.status == "too_large" or not compactable(history):
        return Compaction(list(history), "none", fit.used, fit.used)
    plan = _Plan(fit, budget.estimator, (system, tuple(tools), tuple(history)))
    result = await _stages(budget, plan, history, summarize, focus, manual)
    return _settled(budget, plan, history, result)


def _settled(
    budget: ContextBudget, plan: _Plan, history: Sequence[Message], result: Compaction
) -> Compaction:
    """The result, unless it grew the request (then nothing changes); and the floor below
    which the next compaction would be as useless."""
    if result.stage != "none" and result.after >= result.before:
        log.info("context: a compaction would not shrink the request (%s)", result.describe())
        budget.floor = result.before
        return Compaction(list(history), "none", result.before, result.before)
    budget.floor = result.after if result.after > plan.fit.trigger else 0
    return result


async def _stages(
    budget: ContextBudget,
    plan: _Plan,
    history: Sequence[Message],
    summarize: Summarize | None,
    focus: str,
    manual: bool,
) -> Compaction:
    fit = plan.fit
    if not manual:
        protect = _prune_point(budget, plan, history)
        budget.went_past_pruning = protect is None
        if protect is not None:
            pruned = _pruned(plan, history, protect)
            return Compaction(pruned, "prune", fit.used, plan.total(pruned))
        if not _summary_pays(plan, history):
            return Compaction(list(history), "none", fit.used, fit.used)
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
    room = plan.goal - fit.system - fit.tools
    clip_to = plan.limit - fit.system - fit.tools
    cut = truncate(pruned, room, plan.est, plan.user_chars, clip_to=clip_to)
    log.info("context: truncated the history (%s)", "; ".join(problems))
    return Compaction(cut, "truncate", fit.used, plan.total(cut), problems=tuple(problems))


def _prune_point(budget: ContextBudget, plan: _Plan, history: Sequence[Message]) -> int | None:
    """Where the outputs pruning keeps begin, when pruning alone is enough; None when not.

    Decided on the most pruning can do (every older output removed), which moves smoothly with
    the sizes: how many outputs a share keeps jumps by a whole file. The last two exchanges'
    outputs are protected first, then only the current exchange's, then the newest round's."""
    goal = plan.prune_goal(history)
    slack = plan.budget_share(PRUNE_SLACK)
    for protect in _protections(history):
        after = plan.total(prune_tool_outputs(history, plan.est, 0, protect_from=protect))
        close = abs(after - goal) <= slack  # a close call goes the way the last one went
        enough = not budget.went_past_pruning if close else after < goal
        if enough and shrank(plan.fit.used, after):
            return protect
    return None


def _pruned(plan: _Plan, history: Sequence[Message], protect: int) -> list[Message]:
    """Every older output pruned, but the newest ones within their share and the goal."""
    least = prune_tool_outputs(history, plan.est, 0, protect_from=protect)
    keep = min(plan.share(KEEP_OUTPUTS_SHARE), plan.prune_goal(history) - plan.total(least))
    return prune_tool_outputs(history, plan.est, keep, protect_from=protect) if keep > 0 else least


def _summary_pays(plan: _Plan, history: Sequence[Message]) -> bool:
    """Is a summary worth its model round: the request does not fit otherwise, or it would
    free a clear share of the room (not only the few messages beside a large newest round)?"""
    gain = plan.fit.used - plan.best(history)
    return plan.fit.used > plan.limit or gain >= plan.budget_share(MIN_GAIN_SHARE)


def _protections(history: Sequence[Message]) -> list[int]:
    """Where the outputs pruning keeps begin, from the most kept to the least."""
    points = [exchange_start(history, 2), exchange_start(history, 1), _newest(history)]
    return sorted(set(points))


def _newest_exchange(history: Sequence[Message]) -> int:
    """Where the newest exchange starts: the latest user message (0: none before it)."""
    users = [
        i
        for i, m in enumerate(history)
        if m.role == "user" and not is_state_message(m) and not is_note(m)
    ]
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
    reply_tokens = min(budget.window.reply_reserve, max(plan.share(SUMMARY_SHARE), 64))
    text, why = await ask_summary(
        history[:split],
        summarize,
        focus,
        prefix=plan.prefix,
        used=plan.fit.used,
        budget=budget.window.budget,
        est=plan.est,
        reply_tokens=reply_tokens,
    )
    if text is not None:
        rebuilt = rebuild(history, split, text, plan.user_chars)
        if plan.total(rebuilt) > plan.limit:  # the newest round is large: clip it
            room = plan.goal - plan.fit.system - plan.fit.tools
            clip_to = plan.limit - plan.fit.system - plan.fit.tools
            rebuilt = truncate(history, room, plan.est, plan.user_chars, text, split, clip_to)
        if plan.total(rebuilt) <= plan.fit.budget:
            budget.summary_failures = 0
            return rebuilt, text, ""
        why = "the summary and the kept state do not fit together"
    budget.summary_failures += 1
    return None, "", why
