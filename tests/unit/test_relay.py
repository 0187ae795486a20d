"""Relaying a streamed reply: deltas that arrive together share a chunk, nothing is held back,
and the order of everything the editor sees is kept; frames written together share a write."""

from __future__ import annotations

import asyncio
import os
from collections.abc import AsyncIterator
from typing import Any

from acp_server import updates
from acp_server.agent.history import History
from acp_server.agent.loop import Turn, run_turn
from acp_server.agent.turn_context import SessionContext, TurnContext
from acp_server.context import Window
from acp_server.messages import (
    Event,
    Finish,
    ModelRequest,
    Notice,
    StreamError,
    TextDelta,
    ThoughtDelta,
    Usage,
    text_message,
)
from acp_server.session.voice import PlainVoice
from acp_server.wire.stdio import _PipeSink, open_sink

# Between two events: None = none (same pass of the event loop), "yield" = the loop runs.
YIELD = "yield"


class Burst:
    """A backend playing events, yielding to the event loop where the script says so."""

    label = "burst"

    def __init__(self, *script: Event | str) -> None:
        self.script = script

    async def context_window(self) -> int | None:
        return None

    async def stream(self, request: ModelRequest) -> AsyncIterator[Event]:
        for item in self.script:
            if item == YIELD:
                await asyncio.sleep(0)
            else:
                assert not isinstance(item, str)
                yield item


async def relay(*script: Event | str) -> tuple[str, list[dict[str, Any]]]:
    seen: list[updates.Update] = []
    backend = Burst(*script)
    context = TurnContext(SessionContext(Window(configured=4000)), backend, seen.append)
    turn = Turn(
        backend=backend,
        history=History([text_message("user", "hi")]),
        emit=seen.append,
        voice=PlainVoice(seen.append),
        context=context,
    )
    stop = await run_turn(turn)
    return stop, [
        {
            "kind": u["sessionUpdate"],
            "text": u.get("content", {}).get("text"),
            "id": u.get("messageId"),
        }
        for u in seen
        if u["sessionUpdate"] != "usage_update"  # after every round; the meter is not relayed
    ]


async def test_a_burst_becomes_one_chunk() -> None:
    stop, seen = await relay(TextDelta("a"), TextDelta("b"), TextDelta("c"), Finish("stop"))
    assert stop == "end_turn"
    assert [(s["kind"], s["text"]) for s in seen] == [("agent_message_chunk", "abc")]


async def test_deltas_that_arrive_apart_are_not_held_back() -> None:
    _, seen = await relay(
        TextDelta("a"), YIELD, TextDelta("b"), TextDelta("c"), YIELD, TextDelta("d"), Finish("stop")
    )
    assert [s["text"] for s in seen] == ["a", "bc", "d"]
    assert len({s["id"] for s in seen}) == 1


async def test_order_is_kept_across_kinds() -> None:
    _, seen = await relay(
        ThoughtDelta("t1"),
        ThoughtDelta("t2"),
        TextDelta("a"),
        Notice("careful"),
        TextDelta("b"),
        Usage(10, 5),
        TextDelta("c"),
        Finish("stop"),
    )
    assert [(s["kind"], s["text"]) for s in seen] == [
        ("agent_thought_chunk", "t1t2"),
        ("agent_message_chunk", "a"),
        ("agent_message_chunk", "careful"),
        ("agent_message_chunk", "bc"),  # usage is reported after the round: no flush
    ]
    assert seen[0]["id"] == seen[1]["id"] + "_thought"


async def test_pending_text_goes_out_before_an_error() -> None:
    stop, seen = await relay(TextDelta("par"), TextDelta("tial"), StreamError("boom"))
    assert stop == "end_turn"
    assert [s["text"] for s in seen] == ["partial", "\n\nboom"]  # the error on its own paragraph


async def test_pending_text_goes_out_when_cancelled() -> None:
    seen: list[updates.Update] = []

    class Hangs:
        label = "hangs"

        async def context_window(self) -> int | None:
            return None

        async def stream(self, request: ModelRequest) -> AsyncIterator[Event]:
            yield TextDelta("said ")
            yield TextDelta("so far")
            await asyncio.Event().wait()
            yield Finish("stop")  # never reached

    history = History([text_message("user", "hi")])
    turn = Turn(Hangs(), history, seen.append, PlainVoice(seen.append))
    task = asyncio.create_task(run_turn(turn))
    await asyncio.sleep(0.01)
    task.cancel()
    await asyncio.gather(task, return_exceptions=True)
    assert [u["content"]["text"] for u in seen] == ["said so far"]
    assert turn.history[-1].text == "said so far"


async def test_frames_written_together_share_one_write() -> None:
    read_fd, write_fd = os.pipe()
    sink = await open_sink(write_fd)
    writes: list[bytes] = []
    assert isinstance(sink, _PipeSink)  # a pipe gets the batching sink
    transport = sink._writer.transport
    real_write = transport.write

    def counting(data: bytes | bytearray | memoryview) -> None:
        writes.append(bytes(data))
        real_write(data)

    # Counting system calls: asyncio's transport is wrapped, none of our code is replaced.
    transport.write = counting  # type: ignore[method-assign]
    for n in range(3):
        sink.write(b"frame %d\n" % n)
    assert writes == []  # queued for this pass of the loop
    await asyncio.sleep(0)
    assert writes == [b"frame 0\nframe 1\nframe 2\n"]
    sink.write(b"last\n")
    await sink.drain()  # drain flushes at once
    assert writes[-1] == b"last\n"
    assert os.read(read_fd, 1000) == b"frame 0\nframe 1\nframe 2\nlast\n"
    transport.close()
    os.close(read_fd)
