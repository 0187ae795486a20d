"""What a session has cost, from the reported tokens and the configured prices."""

from __future__ import annotations

import pytest

from acp_server.agent.spending import Spending
from acp_server.backends.providers import Price
from acp_server.messages import Usage


def test_no_price_shows_no_cost() -> None:
    spending = Spending()
    spending.add(None, Usage(prompt_tokens=1000, completion_tokens=100))
    assert spending.shown is None


def test_each_round_at_its_own_price_per_million_tokens() -> None:
    spending = Spending()
    spending.add(Price(2, 8), Usage(prompt_tokens=4000, completion_tokens=100))
    spending.add(None, Usage(prompt_tokens=4000, completion_tokens=100))  # unpriced: free
    spending.add(Price(1, 4), Usage(prompt_tokens=5000, completion_tokens=200))
    assert spending.shown == pytest.approx(0.0088 + 0.005 + 0.0008)
