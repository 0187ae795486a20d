"""Pre-flight fit: will this request fit the window, and what to do if not.

`ContextBudget` is a session's view of its context: the `Window`, the `Estimator`, and an
incremental meter of the history. `fit(system, tools, history)` is called before every model
request (tool rounds included) and answers with a `Fit`:

- "fits": send it;
- "compact": the request is above the compaction threshold (85 % of the budget, so the summary
  request itself still fits): compact first. When the last compaction could not bring the
  request under it (the kept state and the newest round alone are that large), the threshold
  is raised to what that compaction left plus `REGROW` of the room (at most the budget): the
  same useless compaction is not tried again on every turn;
- "too_large": the fixed parts alone (system prompt, tool descriptions and the current prompt)
  do not fit; no compaction can help, `problem()` says which part and by how much.

The meter is incremental: history is append-only between compactions, so a fit after one new
message only estimates that message; anything else (a rebuilt history) is re-summed from the
per-message memo.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from acp_server.context.tokens import Estimator
from acp_server.context.window import (
    ADVICE,
    SOURCES,
    TRUNCATION_MIN_GAP,
    TRUNCATION_SHARE,
    Source,
    Window,
    truncated_to,
)
from acp_server.messages import ContextOverflow, Message, ToolSpec, is_note

FitStatus = Literal["fits", "compact", "too_large"]
THRESHOLD = 0.85  # compact above this share of the budget
# A low prompt count no larger than this many times the tokens new since the last request is a
# prompt cache counting only what it read anew (Ollama's prompt_eval_count), not a cut.
CACHE_NET = 1.5
# The most the truncation guard multiplies the raw estimate by (see `after_round`).
TRUSTED_FACTOR = 1.5
REGROW = 0.1  # of the room for messages: growth past a compaction that freed too little


@dataclass(frozen=True)
class Fit:
    """One request measured against the window. Token counts are corrected estimates."""

    window: int
    budget: int  # window minus the reply reserve
    threshold: int  # compact above this (the trigger, raised after a compaction freed too little)
    trigger: int  # the share of the budget compaction aims to stay under
    system: int
    tools: int
    prompt: int  # the current prompt: the latest user message
    history: int  # every message, the current prompt included
    raw_text: int  # the raw estimate without image tokens (for the truncation guard)
    source: Source = "default"  # where the window came from

    @property
    def used(self) -> int:
        return self.system + self.tools + self.history

    @property
    def fixed(self) -> int:
        """What no compaction can remove."""
        return self.system + self.tools + self.prompt

    @property
    def room(self) -> int:
        """Tokens left in the budget (negative when over)."""
        return self.budget - self.used

    @property
    def status(self) -> FitStatus:
        if self.fixed > self.budget:
            return "too_large"
        return "compact" if self.used > self.threshold else "fits"

    def problem(self) -> str | None:
        """For a person: which fixed part is too large and by how much; None if it fits."""
        if self.fixed <= self.budget:
            return None
        parts = {
            "your message": self.prompt,
            "the system prompt": self.system,
            "the tool descriptions": self.tools,
        }
        largest = max(parts, key=lambda name: parts[name])
        others = [f"{name} ~{tokens:,}" for name, tokens in parts.items() if name != largest]
        advice = (
            "Shorten the message or attach less, or use a model with a larger context window."
            if largest == "your message"
            else ADVICE[self.source]
        )
        return (
            f"This request cannot fit the model's context window of {self.window:,} tokens "
            f"({SOURCES[self.source]}), "
            f"even with the earlier conversation removed: it needs about {self.fixed:,} tokens "
            f"but only {self.budget:,} are available ({self.window - self.budget:,} are kept "
            f"free for the reply), about {self.fixed - self.budget:,} too many. The largest "
            f"part is {largest} (~{parts[largest]:,} tokens; {' and '.join(others)}). Nothing "
            f"was sent and the conversation is unchanged. {advice}"
        )


class _Meter:
    """Running raw totals of a history, extended in place while it only grows."""

    def __init__(self, estimator: Estimator) -> None:
        self._estimator = estimator
        self._seen: list[Message] = []
        self.tokens = 0
        self.images = 0
        self.last_user = -1  # index of the latest user message, -1: none

    def measure(self, history: list[Message]) -> None:
        n = len(self._seen)
        # `==` on lists compares by identity first, so an unchanged prefix costs a C loop.
        if len(history) < n or history[:n] != self._seen:
            self._seen, self.tokens, self.images, self.last_user, n = [], 0, 0, -1, 0
        for index in range(n, len(history)):
            message = history[index]
            tokens, images = self._estimator.message(message)
            self.tokens += tokens
            self.images += images
            if message.role == "user" and not is_note(message):
                self.last_user = index
        self._seen.extend(history[n:])


class ContextBudget:
    """A session's context: the window, the estimator, the meter, the summary failures and
    how the last compaction went (for the next close call between pruning and more)."""

    def __init__(
        self,
        window: Window | None = None,
        estimator: Estimator | None = None,
        threshold: float = THRESHOLD,
    ) -> None:
        self.window = window or Window()
        self.estimator = estimator or Estimator()
        self.threshold = threshold
        self.summary_failures = 0  # consecutive failed summaries (reset by a good one)
        self.went_past_pruning = False  # the last compaction needed more than pruning
        self.floor = 0  # what the last compaction left when it could not get under the trigger
        self._meter = _Meter(self.estimator)
        self._system: tuple[str, int] = ("", 0)
        self._tools: tuple[tuple[ToolSpec, ...], int] = ((), 0)
        self._last_sent = 0  # the previous request's prompt, as the truncation guard counts it

    def fit(self, system: str, tools: Sequence[ToolSpec], history: Sequence[Message]) -> Fit:
        """Measure a request before it is sent. A window learned from low prompt counts that
        cannot hold the fixed parts is dropped first: it is never a reason to refuse."""
        fit = self._measure(system, tools, history)
        if fit.fixed > fit.budget and self.window.doubtful():
            fit = self._measure(system, tools, history)
        return fit

    def _measure(self, system: str, tools: Sequence[ToolSpec], history: Sequence[Message]) -> Fit:
        seq = history if isinstance(history, list) else list(history)
        self._meter.measure(seq)
        meter, est = self._meter, self.estimator
        prompt = est.message(seq[meter.last_user])[0] if meter.last_user >= 0 else 0
        budget = self.window.budget
        trigger = int(budget * self.threshold)
        system_tokens = est.corrected(self._system_tokens(system))
        tools_tokens = est.corrected(self._tool_tokens(tools)) + est.overhead
        messages = est.corrected(meter.tokens)
        if self.floor and system_tokens + tools_tokens + messages <= trigger:
            self.floor = 0  # the conversation got smaller (/clear, a new model): start afresh
        threshold = trigger
        if self.floor:
            regrow = int(max(budget - system_tokens - tools_tokens, 0) * REGROW)
            threshold = min(max(trigger, self.floor + regrow), budget)
        return Fit(
            window=self.window.size,
            budget=budget,
            threshold=threshold,
            trigger=trigger,
            system=system_tokens,
            tools=tools_tokens,
            prompt=est.corrected(prompt),
            history=messages,
            raw_text=self._system[1] + self._tools[1] + meter.tokens - meter.images,
            source=self.window.source,
        )

    def after_round(self, fit: Fit, reported: int, cached: int = 0, reply: int = 0) -> int | None:
        """After a model round, with the prompt tokens the server `reported` (and the part of
        them it said came from its prompt cache): run the silent-truncation guard (returns the
        window it was lowered to, for a warning), or learn the estimate's correction from the
        report (returns None). A cut is believed only when the next report agrees."""
        est = self.estimator
        # Never below the raw estimate: capped reports may have taught the factor down before
        # the cut became obvious, which would hide it. Never above TRUSTED_FACTOR times it
        # either: a slope fitted through a few reports can overshoot (1.9 after a compaction
        # changed what the history is made of), and every honest count then looks like a cut.
        factor = min(max(est.factor, 1.0), TRUSTED_FACTOR)
        sent = math.ceil(fit.raw_text * factor) + est.overhead
        fresh, last = sent - self._last_sent, self._last_sent
        self._last_sent = sent
        # A server that reports a cache hit may count only the tokens it read anew: the guard
        # takes the most it may have read.
        kept = truncated_to(sent, reported + cached)
        if kept is None:
            if reported + cached < sent * TRUNCATION_SHARE:
                return None  # too low to be a window (a prompt cache's count): teaches nothing
            self.window.plausible(reported)
            est.observe(fit.raw_text, reported)
            return None
        if last and kept <= fresh * CACHE_NET + TRUNCATION_MIN_GAP:
            return None  # only what was new since the last request: a prompt cache's count
        if not self.window.suspect_cut(kept):
            return None
        est.factor = max(est.factor, 1.0)  # what the capped reports taught is wrong
        est.forget_fixed()
        return self.window.size

    def after_overflow(self, overflow: ContextOverflow, fit: Fit | None = None) -> None:
        """After the server refused a request as too long (`StreamError.overflow`): learn the
        window (from the error, or below what was sent) and the estimate's correction."""
        if overflow.prompt_tokens and fit is not None:
            self.estimator.observe(fit.raw_text, overflow.prompt_tokens)
        if overflow.window:
            self.window.lower(overflow.window)
        elif overflow.prompt_tokens or fit is not None:  # it did not say: below what was sent
            sent = overflow.prompt_tokens or (fit.used if fit is not None else 0)
            self.window.lower(int(sent * 0.8))

    def _system_tokens(self, system: str) -> int:
        cached = self._system[0]
        if system is not cached and system != cached:
            if cached:
                self.estimator.forget_fixed()
            self._system = (system, self.estimator.text(system) if system else 0)
        return self._system[1]

    def _tool_tokens(self, tools: Sequence[ToolSpec]) -> int:
        cached = self._tools[0]
        same = len(tools) == len(cached) and all(
            a is b
            or (
                a.name == b.name and a.description == b.description and a.parameters is b.parameters
            )
            for a, b in zip(tools, cached, strict=True)
        )
        if not same:
            if cached:
                self.estimator.forget_fixed()
            self._tools = (tuple(tools), self.estimator.tools(tools))
        return self._tools[1]
