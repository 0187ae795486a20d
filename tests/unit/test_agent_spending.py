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


def test_a_tally_is_told_as_acps_usage_and_run_shows_the_cache_share() -> None:
    from acp_server.agent.spending import Tally
    from acp_server.cli.run.client import tokens_line

    tally = Tally()
    assert tally.wire() is None  # no server reported any: nothing is told
    tally.add(Usage(prompt_tokens=1000, completion_tokens=20, cached_tokens=900, thought_tokens=5))
    tally.add(Usage(prompt_tokens=1000, completion_tokens=30, cache_write_tokens=100))
    usage = tally.wire()
    assert usage == {
        "inputTokens": 2000,
        "outputTokens": 50,
        "totalTokens": 2050,
        "thoughtTokens": 5,
        "cachedReadTokens": 900,
        "cachedWriteTokens": 100,
    }
    session = {**usage, "inputTokens": 4000, "cachedReadTokens": 3600}
    line = tokens_line({"usage": usage, "_meta": {"acpServer": {"sessionUsage": session}}})
    assert line == (
        "[tokens: 2,000 in, 50 out; read from the provider's cache: 45 % of the input this turn,"
        " 90 % this session]"
    )
    assert tokens_line({"stopReason": "end_turn"}) == ""
