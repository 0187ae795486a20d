"""A session's prompts, one at a time in arrival order, and what a cancel ends.

Each prompt (or slash command) is a piece of work run in its turn: `PromptQueue.run` waits for
the work before it, runs it in a task of its own (the *turn*) and then the session's `finish`
(record the end of the turn, wait for its writes). A cancel ends exactly the turns running or
queued when it is called: the running turn is cancelled (once: a second cancel must not cut
its cleanup short), and every prompt waiting then ends `cancelled` without running. A prompt
that comes after the cancel is served normally, whatever the order in which the event loop
wakes the tasks involved: the queue compares a count of cancels, taken when each prompt comes
in, not moments.

The next turn starts only when the one before it has really ended, however its caller fared:
a request cancelled (`$/cancel_request`) hands the slot over to its turn's own task, which
releases it when it ends (a request cancelled twice stopped waiting for its turn's cleanup,
and let the next prompt run beside it). A request that got its outcome releases the slot
itself, so the running prompt is answered before the prompts queued behind it.
"""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Awaitable, Callable, Coroutine
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from acp_server.agent.loop import StopReason, TurnFailure


@dataclass(frozen=True)
class PromptOutcome:
    """How a prompt ended: its stop reason, the failure if the turn failed, and the message the
    user was shown if its records could not be saved."""

    stop: StopReason
    failure: TurnFailure | None = None
    not_saved: str | None = None
    usage: dict[str, Any] | None = None  # the turn's tokens, as ACP's `Usage` (Tally.wire)
    session_usage: dict[str, Any] | None = None  # the session's so far, likewise


Work = Callable[[], Coroutine[Any, Any, PromptOutcome]]
# The end of every turn: record it and wait for its writes; the message if they failed.
Finish = Callable[[PromptOutcome], Awaitable[str | None]]

CANCELLED = PromptOutcome("cancelled")


class PromptQueue:
    """FIFO turns with cancel; `finish` ends each turn that ran (the session's), `cancelled` is
    told of a turn a cancel ends, before it is cancelled (its background commands stop)."""

    def __init__(self, finish: Finish, cancelled: Callable[[asyncio.Task[Any]], None]) -> None:
        self._finish = finish
        self._cancelled = cancelled
        self._slot = asyncio.Lock()  # FIFO: waiters acquire it in the order they came
        self._cancels = 0  # cancels so far; a prompt that saw fewer than now was cancelled
        self._turn: asyncio.Task[PromptOutcome] | None = None
        self._stopped: asyncio.Task[PromptOutcome] | None = None

    @property
    def busy(self) -> bool:
        """A turn is running or about to (work changed now waits for the next prompt)."""
        return self._slot.locked()

    async def idle(self) -> None:
        """Return once the turns running or waiting now have ended (at once when none is)."""
        async with self._slot:  # in line behind them; held for no time at all
            pass

    async def run(self, work: Work) -> PromptOutcome:
        """Run `work` once every prompt before it is done, and say how it ended. Cancelling the
        caller (a `$/cancel_request`) cancels the turn too, and waits for it to end."""
        cancels = self._cancels
        await self._slot.acquire()
        if cancels != self._cancels:
            self._slot.release()
            return CANCELLED
        turn = asyncio.create_task(work())  # `work()` runs its first part now, in order
        self._turn = turn
        slot = asyncio.create_task(self._serve(turn))
        handed_over = False
        try:
            return await asyncio.shield(slot)
        except asyncio.CancelledError:
            self._stop(turn)  # this turn only: the next may have started since (one did)
            # The next turn waits for this one to end, however often this request is cancelled.
            handed_over = True
            slot.add_done_callback(lambda _: self._slot.release())
            await asyncio.wait({slot})
            raise
        finally:
            if not handed_over:  # ended (or failed) with its outcome: answered before the next
                self._slot.release()

    def cancel(self) -> None:
        """End the running turn and every prompt waiting now (nothing to end: nothing happens)."""
        self._cancels += 1
        if self._turn is not None:
            self._stop(self._turn, self._cancelled)

    async def _serve(self, turn: asyncio.Task[PromptOutcome]) -> PromptOutcome:
        try:
            # `wait` (not `await turn`): this task is never the one cancelled, only the turn.
            await asyncio.wait({turn})
        finally:
            self._turn = None
        outcome = CANCELLED if turn.cancelled() else turn.result()
        return dataclasses.replace(outcome, not_saved=await self._finish(outcome))

    def _stop(
        self,
        turn: asyncio.Task[PromptOutcome],
        tell: Callable[[asyncio.Task[Any]], None] | None = None,
    ) -> None:
        # Once per turn: a second cancel must not interrupt the first one's cleanup (releasing
        # terminals, killing processes).
        if not turn.done() and self._stopped is not turn:
            self._stopped = turn
            if tell is not None:
                tell(turn)
            turn.cancel()
