"""The context window: the smallest of what is configured, discovered and observed.

- configured: `--context-window N` / `ACP_SERVER_CONTEXT_WINDOW`;
- discovered: what the server reports (llama.cpp `/props`, `/v1/models`, Ollama `/api/show`);
- observed: learned the hard way, from a context-overflow error that names the window, or from
  the silent-truncation guard (the server counted far fewer prompt tokens than were sent).

Unknown is never "unlimited": with nothing known the window is a conservative 8,192 tokens.
Part of the window is kept free for the reply (`reply_reserve`); the rest is the `budget` a
request may fill.
"""

from __future__ import annotations

from dataclasses import dataclass

DEFAULT_WINDOW = 8192
MIN_WINDOW = 512  # an observed window below this is a misreading, not a model
MAX_RESERVE = 4096
# The silent-truncation guard: the server reported fewer than this share of the prompt ...
TRUNCATION_SHARE = 0.7
# ... and at least this many tokens fewer.
TRUNCATION_MIN_GAP = 256


@dataclass
class Window:
    configured: int | None = None
    discovered: int | None = None
    observed: int | None = None
    reserve: int | None = None  # tokens kept for the reply; None: min(4096, window / 4)

    @property
    def known(self) -> bool:
        return any(n for n in (self.configured, self.discovered, self.observed))

    @property
    def size(self) -> int:
        """The effective window in tokens."""
        known = [n for n in (self.configured, self.discovered, self.observed) if n]
        return min(known) if known else DEFAULT_WINDOW

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

    def lower(self, tokens: int) -> bool:
        """Record an observed window; True when the effective window shrank."""
        tokens = max(tokens, MIN_WINDOW)
        before = self.size
        self.observed = tokens if self.observed is None else min(self.observed, tokens)
        return self.size < before


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
