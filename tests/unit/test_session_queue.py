"""The prompt queue on its own: FIFO turns, what a cancel ends, and who waits for whom.
(tests/unit/test_session_queue_property.py drives it through the wire under seeded orders.)"""

from __future__ import annotations

import asyncio

from acp_server.session.queue import PromptOutcome, PromptQueue, Work


class Turns:
    """Turns that run until released, and the order things happened in."""

    def __init__(self) -> None:
        self.log: list[str] = []
        self.release: dict[str, asyncio.Event] = {}
        self.queue = PromptQueue(self.finish, lambda turn: None)

    async def finish(self, outcome: PromptOutcome) -> str | None:
        self.log.append(f"finish {outcome.stop}")
        return None

    def work(self, name: str, cleanup_steps: int = 0) -> Work:
        self.release[name] = asyncio.Event()

        async def turn() -> PromptOutcome:
            self.log.append(f"start {name}")
            try:
                await self.release[name].wait()
            except asyncio.CancelledError:
                for _ in range(cleanup_steps):  # a cleanup that takes a while
                    await asyncio.sleep(0)
                self.log.append(f"cleaned {name}")
                return PromptOutcome("cancelled")
            self.log.append(f"end {name}")
            return PromptOutcome("end_turn")

        return turn

    def run(self, name: str, cleanup_steps: int = 0) -> asyncio.Task[PromptOutcome]:
        return asyncio.create_task(self.queue.run(self.work(name, cleanup_steps)))


async def steps(n: int = 5) -> None:
    for _ in range(n):
        await asyncio.sleep(0)


async def test_turns_run_one_at_a_time_in_arrival_order() -> None:
    t = Turns()
    a, b = t.run("a"), t.run("b")
    await steps()
    assert t.log == ["start a"] and t.queue.busy
    t.release["a"].set()
    assert (await a).stop == "end_turn"
    await steps()
    t.release["b"].set()
    assert (await b).stop == "end_turn"
    assert t.log == ["start a", "end a", "finish end_turn", "start b", "end b", "finish end_turn"]
    assert not t.queue.busy


async def test_a_cancel_ends_the_running_and_the_queued_but_not_what_comes_after() -> None:
    t = Turns()
    a, b = t.run("a"), t.run("b")
    await steps()
    t.queue.cancel()
    c = t.run("c")  # after the cancel: served
    assert (await a).stop == "cancelled" and (await b).stop == "cancelled"
    await steps()
    t.release["c"].set()
    assert (await c).stop == "end_turn"
    assert "start b" not in t.log  # a queued prompt ends without running


async def test_a_cancel_right_after_a_turn_was_handed_the_queue_still_ends_it() -> None:
    t = Turns()
    a = t.run("a")
    b = t.run("b")
    await steps()
    t.release["a"].set()
    await a
    t.queue.cancel()  # b was queued when it came: b is cancelled, started or not
    assert (await b).stop == "cancelled"


async def test_a_request_cancelled_twice_still_holds_the_next_turn_until_its_cleanup_ends() -> None:
    t = Turns()
    a = t.run("a", cleanup_steps=20)
    b = t.run("b")
    await steps()
    a.cancel()  # $/cancel_request
    await steps(2)
    a.cancel()  # and again, while the turn cleans up
    await asyncio.gather(a, return_exceptions=True)
    await steps(30)
    assert t.log.index("cleaned a") < t.log.index("start b")  # never side by side
    t.release["b"].set()
    assert (await b).stop == "end_turn"


async def test_the_running_prompt_is_answered_before_the_queued_ones() -> None:
    t = Turns()
    answered: list[str] = []
    a, b = t.run("a"), t.run("b")
    a.add_done_callback(lambda _: answered.append("a"))
    b.add_done_callback(lambda _: answered.append("b"))
    await steps()
    t.queue.cancel()
    await asyncio.gather(a, b)
    assert answered == ["a", "b"]


async def test_idle_waits_for_the_turns_there_are_now_and_returns_at_once_without() -> None:
    t = Turns()
    await asyncio.wait_for(t.queue.idle(), 1)  # nothing runs: at once
    a = t.run("a")
    await steps()
    idle = asyncio.create_task(t.queue.idle())
    b = t.run("b")  # came after: idle does not wait for it to run
    await steps()
    assert not idle.done()
    t.release["a"].set()
    await asyncio.wait_for(idle, 1)
    assert t.log[:3] == ["start a", "end a", "finish end_turn"]
    await steps()
    assert t.log[-1] == "start b" and not b.done()
    t.release["b"].set()
    assert (await a).stop == (await b).stop == "end_turn"
