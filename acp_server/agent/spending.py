"""What a session has cost: the tokens the model servers reported, at the prices of the
configuration file. It belongs to the session, so it outlives the context budget that a model
switch makes anew; it is not stored (a loaded session counts again from zero)."""

from __future__ import annotations

from dataclasses import dataclass

from acp_server.backends.providers import Price
from acp_server.messages import Usage


@dataclass
class Spending:
    """What a session has cost, in US dollars, from the tokens the servers reported and the
    prices of the configuration file (per million tokens). It is the session's, so it outlives
    the budget a model switch makes anew; it is not stored (a loaded session starts at zero)."""

    amount: float = 0.0
    priced: bool = False  # some round had a price: the cost is shown from then on

    def add(self, price: Price | None, usage: Usage) -> None:
        if price is not None:
            spent = usage.prompt_tokens * price.input + usage.completion_tokens * price.output
            self.amount += spent / 1_000_000
            self.priced = True

    @property
    def shown(self) -> float | None:
        return self.amount if self.priced else None
