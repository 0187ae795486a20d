"""The cost a turn's context counts, and the summary model it asks: each round at the price of
the model that answered it, and a compaction model's overflow never taken for the session's
window."""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence

import pytest

from acp_server.agent.history import History
from acp_server.agent.turn_context import SessionContext, TurnContext
from acp_server.backends.providers import Price
from acp_server.context import Window
from acp_server.messages import (
    ContextOverflow,
    Event,
    Message,
    ModelRequest,
    StreamError,
    TextDelta,
    ToolCall,
    Usage,
    text_message,
)
from acp_server.updates import Update


class Replies:
    """A backend that answers every request with the same events, and counts the requests."""

    label = "fake"

    def __init__(self, *events: Event) -> None:
        self.events = events
        self.requests: list[ModelRequest] = []

    async def context_window(self) -> int | None:
        return None

    async def stream(self, request: ModelRequest) -> AsyncIterator[Event]:
        self.requests.append(request)
        for event in self.events:
            yield event


def history(turns: int) -> list[Message]:
    messages: list[Message] = []
    for n in range(turns):
        call = ToolCall(f"r{n}", "read_file", {"path": f"f{n}.py"})
        messages += [
            text_message("user", f"request {n}"),
            Message("assistant", tool_calls=(call,)),
            text_message("tool", "x = 1\n" * 400, tool_call_id=f"r{n}"),
            text_message("assistant", f"answer {n}"),
        ]
    return messages


def context(
    turn: Replies, summarizer: tuple[Replies, Price | None] | None, shown: list[Update]
) -> TurnContext:
    session = SessionContext(Window(configured=32768))
    ctx = TurnContext(session, turn, shown.append, price=Price(2, 8), summarizer=summarizer)
    ctx.begin("You are a coding agent.", ())
    return ctx


def costs(shown: Sequence[Update]) -> list[float]:
    return [u["cost"]["amount"] for u in shown if "cost" in u]


async def test_a_summary_round_is_counted_at_the_compaction_models_price() -> None:
    turn = Replies(TextDelta("unused"))
    cheap = Replies(TextDelta("A summary."), Usage(prompt_tokens=10_000, completion_tokens=500))
    shown: list[Update] = []
    ctx = context(turn, (cheap, Price(0.1, 0.4)), shown)
    await ctx.compact(History(history(8)), manual=True)
    assert len(cheap.requests) == 1 and turn.requests == []
    # 10,000 in at $0.10 and 500 out at $0.40 per million tokens (not the turn model's $2/$8).
    assert costs(shown) == [pytest.approx(0.0012)]


async def test_a_compaction_models_overflow_does_not_lower_the_sessions_window() -> None:
    overflow = ContextOverflow(window=2048, prompt_tokens=9000)
    cheap = Replies(StreamError("too long for me", overflow=overflow))
    shown: list[Update] = []
    ctx = context(Replies(), (cheap, None), shown)
    await ctx.compact(History(history(8)), manual=True)  # the summary fails: truncation instead
    assert ctx.budget.window.size == 32768


async def test_the_turn_models_summary_round_is_counted_at_its_price() -> None:
    turn = Replies(TextDelta("A summary."), Usage(prompt_tokens=1000, completion_tokens=100))
    shown: list[Update] = []
    ctx = context(turn, None, shown)
    await ctx.compact(History(history(8)), manual=True)
    assert len(turn.requests) == 1
    assert costs(shown) == [pytest.approx(0.0028)]
