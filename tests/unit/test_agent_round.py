"""One model round as it streams in: what it leaves in history and when it is no answer."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from acp_server.agent.round import Reply, stream_round
from acp_server.agent.turn_text import CUT_OFF_MARK, EMPTY_REPLY, THOUGHT_ONLY
from acp_server.messages import (
    Event,
    Finish,
    FinishReason,
    ModelRequest,
    Notice,
    TextDelta,
    ThoughtDelta,
    ToolCallDelta,
)
from acp_server.updates import Update


class Plays:
    label = "plays"

    def __init__(self, *events: Event) -> None:
        self.events = events

    async def context_window(self) -> int | None:
        return None

    async def stream(self, request: ModelRequest) -> AsyncIterator[Event]:
        for event in self.events:
            yield event


async def played(*events: Event) -> tuple[Reply, list[Update], list[str]]:
    shown: list[Update] = []
    told: list[str] = []
    reply = Reply.start(shown.append)
    await stream_round(Plays(*events), ModelRequest(()), reply, lambda t, _s: told.append(t))
    reply.end()
    return reply, shown, told


async def test_a_whole_reply_is_kept_as_it_came() -> None:
    reply, shown, _ = await played(ThoughtDelta("Hm."), TextDelta("Hello."), Finish("stop"))
    message = reply.message()
    assert message is not None
    assert (message.text, message.thought) == ("Hello.", "Hm.")
    assert reply.problem() is None
    assert [u["sessionUpdate"] for u in shown] == ["agent_thought_chunk", "agent_message_chunk"]


async def test_a_reply_cut_off_is_kept_marked() -> None:
    reply, _, _ = await played(TextDelta("The first"), Finish("length"))
    message = reply.message()
    assert message is not None and message.text == "The first" + CUT_OFF_MARK
    assert reply.problem() is None  # the loop says it was cut, and ends max_tokens


@pytest.mark.parametrize(("finish", "problem"), [("stop", EMPTY_REPLY), ("length", THOUGHT_ONLY)])
async def test_a_reply_without_text_or_calls_leaves_nothing(
    finish: FinishReason, problem: str
) -> None:
    reply, _, _ = await played(ThoughtDelta("Thinking..."), Finish(finish))
    assert reply.message() is None
    assert reply.problem() == problem


async def test_tool_calls_are_assembled_when_the_round_is_over() -> None:
    reply, _, told = await played(
        ToolCallDelta(0, "c1", "read_file", '{"path": '),
        Notice("slow server", "info"),
        ToolCallDelta(0, None, None, '"a.txt"}'),
        Finish("tool_calls"),
    )
    assert [(c.id, c.arguments) for c in reply.calls] == [("c1", {"path": "a.txt"})]
    assert told == ["slow server"]
    message = reply.message()
    assert message is not None and message.tool_calls == tuple(reply.calls)


async def test_a_round_cancelled_before_anything_leaves_nothing() -> None:
    reply = Reply.start(lambda _u: None)
    reply.end()
    assert not reply.said_anything and reply.message() is None
