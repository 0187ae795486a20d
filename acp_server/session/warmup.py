"""What the first prompt of a session needs, prepared after `session/new` is answered; then
the look for local models.

A user opens a chat and then types for a few seconds; the first prompt should not spend that
time's worth of work after it is sent: importing the turn's modules (the loop, the context
steps, the tools) and building the model backend (the HTTP stack). Nothing is sent anywhere:
a connection attempt cut off when the editor closes the agent leaves a warning on stderr
(Python 3.11 and anyio), and the window lookup runs beside the first request anyway.

Each step runs in its own pass of the event loop, on the loop itself: a thread would hold the
GIL just as long, and a request that arrives meanwhile waits for at most one step. A step that
fails is logged (a warning: not on stderr by default) and left to the first prompt, which
does the same work itself and tells the user what failed. Last, when no prompt came meanwhile,
a thread starts bubblewrap once to see whether it works here (`sandbox.start_probe`): it waits
for the process, holding nothing, but beside a prompt's work it would slow it.
"""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from acp_server.models.source import ModelSource
    from acp_server.session.session import Session

log = logging.getLogger(__name__)

# Imported by the first turn (`session.Session._serve_turn`, `protocol.AcpAgent.prompt`).
FIRST_TURN_MODULES = (
    "acp_server.protocol.content",
    "acp_server.agent.loop",
    "acp_server.agent.turn_context",
    "acp_server.models.carryover",
)


async def prepare_first_turn(session: Session) -> None:
    """Import the turn's modules, then make the session's tools and build its backend."""
    from acp_server.backends import Preparable
    from acp_server.session.turn_parts import import_in_steps

    try:
        await import_in_steps(FIRST_TURN_MODULES)
        await asyncio.sleep(0)
        session.warm()
        await asyncio.sleep(0)
        if isinstance(session.backend, Preparable):
            session.backend.prepare()
        await asyncio.sleep(0)
        session.probe_sandbox()
    except Exception:
        # Not an error for the user: the first prompt does the same work and reports a failure.
        log.warning("could not prepare the first turn of %s ahead", session.id, exc_info=True)


class AfterNew:
    """The work started once a new session's answer has been written (the one place for it):
    what its first prompt needs, what is wrong with the configuration, and, after the warm-up
    and any prompt that came meanwhile, the discovery of local models (beside a first prompt
    sent at once, its HTTP client and a request per local server cost that turn ~15 ms of CPU;
    the model list grows a moment later instead)."""

    def __init__(self, models: ModelSource | None) -> None:
        self._models = models
        self._tasks: set[asyncio.Task[None]] = set()
        self._closed = False

    def start(self, session: Session) -> None:
        if self._closed:
            return
        task = asyncio.create_task(prepare_first_turn(session), name="first-turn-warm-up")
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        if self._models is None:
            return
        if self._models.problem is not None:
            session.tell(self._models.problem, "error")
        task.add_done_callback(lambda _: self._discover(session))

    def _discover(self, session: Session) -> None:
        if not self._closed:
            task = asyncio.create_task(self._discover_when_idle(session), name="discovery")
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)

    async def _discover_when_idle(self, session: Session) -> None:
        await session.idle()
        if not self._closed and self._models is not None:
            self._models.start_discovery()

    def close(self) -> None:
        """At exit: nothing more starts, and what runs is cancelled."""
        self._closed = True
        for task in self._tasks:
            task.cancel()
