"""What the first prompt of a session needs, prepared after `session/new` is answered.

A user opens a chat and then types for a few seconds; the first prompt should not spend that
time's worth of work after it is sent: importing the turn's modules (the loop, the context
steps, the tools) and building the model backend (the HTTP stack). Nothing is sent anywhere:
a connection attempt cut off when the editor closes the agent leaves a warning on stderr
(Python 3.11 and anyio), and the window lookup runs beside the first request anyway.

Each step runs in its own pass of the event loop, on the loop itself: a thread would hold the
GIL just as long, and a request that arrives meanwhile waits for at most one step. A step that
fails is logged (a warning: not on stderr by default) and left to the first prompt, which
does the same work itself and tells the user what failed.
"""

from __future__ import annotations

import asyncio
import importlib
import logging
from typing import TYPE_CHECKING

from acp_server.backends import Preparable

if TYPE_CHECKING:
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
    try:
        for name in FIRST_TURN_MODULES:
            await asyncio.sleep(0)
            importlib.import_module(name)
        await asyncio.sleep(0)
        session.warm()
        await asyncio.sleep(0)
        if isinstance(session.backend, Preparable):
            session.backend.prepare()
    except Exception:
        # Not an error for the user: the first prompt does the same work and reports a failure.
        log.warning("could not prepare the first turn of %s ahead", session.id, exc_info=True)
