"""What a session has cost: the tokens the model servers reported, at the prices of the
configuration file. It belongs to the session, so it outlives the context budget that a model
switch makes anew; it is not stored (a loaded session counts again from zero)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from acp_server.backends.providers import Price
from acp_server.messages import Usage


@dataclass
class Spending:
    """What a session has cost, in US dollars, from the tokens the servers reported and the
    prices of the configuration file (per million tokens). It is the session's, so it outlives
    the budget a model switch makes anew; it is not stored (a loaded session starts at zero)."""

    amount: float = 0.0
    priced: bool = False  # some round had a price: the cost is shown from then on
    tokens: Tally = field(default_factory=lambda: Tally())  # the session's, every round

    def add(self, price: Price | None, usage: Usage) -> None:
        """One round's tokens at `price`: those the prompt cache served (or took) at their own
        price where it is known, the rest at the input price."""
        self.tokens.add(usage)
        if price is not None:
            read, written = usage.cached_tokens, usage.cache_write_tokens
            fresh = max(usage.prompt_tokens - read - written, 0)
            spent = fresh * price.input + usage.completion_tokens * price.output
            spent += read * _or(price.cached_input, price.input)
            spent += written * _or(price.cache_write, price.input)
            self.amount += spent / 1_000_000
            self.priced = True

    @property
    def shown(self) -> float | None:
        return self.amount if self.priced else None


def _or(value: float | None, default: float) -> float:
    return default if value is None else value


@dataclass
class Tally:
    """Tokens the model servers reported, added up (a turn's, or a session's)."""

    input: int = 0  # the whole prompts, cached tokens included
    output: int = 0
    thought: int = 0
    read: int = 0  # of `input`, read from the prompt cache
    written: int = 0  # of `input`, written to it
    rounds: int = 0

    def add(self, usage: Usage) -> None:
        self.input += usage.prompt_tokens
        self.output += usage.completion_tokens
        self.thought += usage.thought_tokens
        self.read += usage.cached_tokens
        self.written += usage.cache_write_tokens
        self.rounds += 1

    def wire(self) -> dict[str, Any] | None:
        """As ACP's (unstable) `Usage` type has it; None when no server reported any."""
        if not self.rounds:
            return None
        return {
            "inputTokens": self.input,
            "outputTokens": self.output,
            "totalTokens": self.input + self.output,
            "thoughtTokens": self.thought,
            "cachedReadTokens": self.read,
            "cachedWriteTokens": self.written,
        }
