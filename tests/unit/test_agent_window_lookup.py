"""The window the server reports, asked beside the first turn."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

from acp_server.agent.window_lookup import WindowLookup
from acp_server.context import Window
from acp_server.messages import Event, ModelRequest


class Tells:
    """A backend whose window lookup answers when the test says so."""

    label = "tells"

    def __init__(self, window: int | None) -> None:
        self.window = window
        self.asked = 0
        self.answer = asyncio.Event()

    async def context_window(self) -> int | None:
        self.asked += 1
        await self.answer.wait()
        if self.window is None:
            raise OSError("no discovery here")
        return self.window

    async def stream(self, request: ModelRequest) -> AsyncIterator[Event]:
        return
        yield


async def test_the_answer_is_taken_once_it_is_there() -> None:
    window = Window()
    lookup = WindowLookup(window)
    backend = Tells(50_000)
    lookup.start(backend)
    lookup.start(backend)  # asked once
    await asyncio.sleep(0)
    await lookup.settle(wait=False)  # not answered yet: nothing taken
    assert lookup.running and not window.known
    backend.answer.set()
    await lookup.settle(wait=True)
    assert (window.discovered, lookup.running, backend.asked) == (50_000, False, 1)
    lookup.start(backend)  # the server told already
    assert not lookup.running


async def test_a_failed_lookup_leaves_the_window_unknown() -> None:
    window = Window()
    lookup = WindowLookup(window)
    backend = Tells(None)
    backend.answer.set()
    lookup.start(backend)
    await lookup.settle(wait=True)
    assert window.discovered is None and not lookup.running


async def test_a_cancelled_turn_does_not_cancel_the_lookup() -> None:
    window = Window()
    lookup = WindowLookup(window)
    backend = Tells(32_768)
    lookup.start(backend)
    waiting = asyncio.create_task(lookup.settle(wait=True))
    await asyncio.sleep(0)
    waiting.cancel()
    await asyncio.gather(waiting, return_exceptions=True)
    backend.answer.set()
    await lookup.settle(wait=True)
    assert window.discovered == 32_768
