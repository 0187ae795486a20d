"""The context window: the smallest of what is configured, discovered and observed.

- configured: `--context-window N` / `ACP_SERVER_CONTEXT_WINDOW`;
- discovered: what the server reports (llama.cpp `/props`, `/v1/models`, Ollama `/api/show`);
- observed: learned the hard way, from a context-overflow error that names the window, or from
  the silent-truncation guard (the server counted far fewer prompt tokens than were sent).

An observed window is a hypothesis, never a wedge. A low prompt count is believed only when it
repeats (`suspect`: two in a row that agree; a single one may be a prompt cache counting only
the tokens it read anew); an overflow error is believed at once. A prompt count above the observed
window is evidence that the server holds more: the window is raised to what it read
(`plausible`), never further (a reply's tokens are no such evidence: a server that cuts the
prompt still writes its reply), so no later request exceeds what the server was seen to keep;
and a window learned from low counts that cannot hold a request's fixed parts (system prompt,
tools, the current message) is dropped (`doubtful`).

Unknown is never "unlimited": with nothing known the window is a conservative 8,192 tokens.
Part of the window is kept free for the reply (`reply_reserve`); the rest is the `budget` a
request may fill.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

DEFAULT_WINDOW = 8192
MIN_WINDOW = 512  # an observed window below this is a misreading, not a model
MAX_RESERVE = 4096
# The silent-truncation guard: the server reported fewer than this share of the prompt ...
TRUNCATION_SHARE = 0.7
# ... and at least this many tokens fewer.
TRUNCATION_MIN_GAP = 256
# Two low counts in a row "agree" (the same cut) when they are this close.
SAME_CUT = 0.2
Source = Literal["configured", "discovered", "overflow", "truncation", "default"]
SOURCES: dict[Source, str] = {
    "configured": "as configured (--context-window, ACP_SERVER_CONTEXT_WINDOW or the "
    "configuration file's window)",
    "discovered": "as the model server reports it",
    "overflow": 'as learned from the model server\'s "too long" error',
    "truncation": "as learned from a model server that read only part of the prompt",
    "default": "the default for a model whose window is not known",
}


@dataclass
class Window:
    configured: int | None = None
    discovered: int | None = None
    observed: int | None = None
    reserve: int | None = None  # tokens kept for the reply; None: min(4096, window / 4)
    observed_from: Source = "overflow"  # how `observed` was learned
    suspect: int | None = None  # the last low prompt count, not yet believed

    @property
    def known(self) -> bool:
        return any(n for n in (self.configured, self.discovered, self.observed))

    @property
    def size(self) -> int:
        """The effective window in tokens."""
        known = [n for n in (self.configured, self.discovered, self.observed) if n]
        return min(known) if known else DEFAULT_WINDOW

    @property
    def source(self) -> Source:
        """Where the effective window comes from."""
        size = self.size
        if self.observed and self.observed == size:
            return self.observed_from
        if self.configured == size:
            return "configured"
        return "discovered" if self.discovered == size else "default"

    def describe(self) -> str:
        """The window and where it came from, for a person."""
        return f"{self.size:,} tokens ({SOURCES[self.source]})"

    @property
    def reply_reserve(self) -> int:
        size = self.size
        if self.reserve is not None:
            return min(max(self.reserve, 0), size // 2)
        return min(MAX_RESERVE, size // 4)

    @property
    def budget(self) -> int:
        """Tokens a request (system prompt, tools and messages) may use."""
        return self.size - self.reply_reserve

    def lower(self, tokens: int, source: Source = "overflow") -> bool:
        """Record an observed window; True when the effective window shrank."""
        tokens = max(tokens, MIN_WINDOW)
        before = self.size
        if self.observed is None or tokens < self.observed:
            self.observed, self.observed_from = tokens, source
        return self.size < before

    def suspect_cut(self, kept: int) -> bool:
        """A prompt count that looks like a cut at `kept` tokens: believed (the window lowered;
        True) only when the count before it looked like the same cut."""
        previous, self.suspect = self.suspect, kept
        if previous is None or abs(previous - kept) > SAME_CUT * max(previous, kept):
            return False
        self.suspect = None
        return self.lower(kept, "truncation")

    def plausible(self, read: int) -> bool:
        """A round in which the server said it read `read` prompt tokens in full: the
        suspicion ends, and an observed window below it is too small (True): it is raised to
        what was read, and no further (the server was seen to hold that much, not more)."""
        self.suspect = None
        if self.observed is None or read <= self.observed:
            return False
        self.observed = read
        return True

    def doubtful(self) -> bool:
        """The request's fixed parts do not fit: a window learned from low prompt counts is
        dropped rather than believed (the server will tell: an error or a full count). True
        when it was dropped."""
        if self.observed is None or self.source != "truncation":
            return False
        self.observed = None
        return True


ADVICE: dict[Source, str] = {
    "configured": "Use a model with a larger context window, or, if this one takes more, raise "
    "the configured window (--context-window, ACP_SERVER_CONTEXT_WINDOW or the configuration "
    "file's window).",
    "discovered": "Start the model server with a larger context (llama.cpp -c, Ollama's "
    "num_ctx, LM Studio's context length), or use a model with a larger window.",
    "overflow": "Start the model server with a larger context, or use a model with a larger "
    "window.",
    "truncation": "Start the model server with a larger context, or use a model with a larger "
    "window.",
    "default": "If the model takes more, set its real window with --context-window N (or the "
    "configuration file's window); else use a model with a larger context window.",
}


def truncated_to(sent: int, reported: int) -> int | None:
    """The silent-truncation guard: when the server reports far fewer prompt tokens than were
    `sent` (below 70 % and at least 256 fewer), it dropped part of the prompt; the window to
    lower to is what it kept. None when the report is plausible (or missing).

    A count below `MIN_WINDOW` is never taken for a cut: no model keeps that little, but a
    server with a prompt cache may count only the tokens it had to read anew (older Ollama)."""
    if reported < MIN_WINDOW:
        return None
    if reported < sent * TRUNCATION_SHARE and sent - reported >= TRUNCATION_MIN_GAP:
        return reported
    return None
