"""Asking the model server for its context window, beside the first turn.

The lookup is a task the session's context shares: the turn does not wait for it (two requests
on a cold connection, before the first reply could start); its answer is taken once it is
there, or awaited when the history does not fit the window known so far (`settle`).
"""

from __future__ import annotations

import asyncio
import logging

from acp_server.backends import Backend
from acp_server.context import Window

log = logging.getLogger(__name__)

WINDOW_LOOKUP_SECONDS = 3.0


async def reported_window(backend: Backend) -> int | None:
    """The window the model server reports; None when it does not say (or fails to)."""
    try:
        # Not `asyncio.wait_for`: on Python 3.11 it swallows a cancel that arrives as the
        # lookup finishes, and the cancelled turn would then run to its end.
        async with asyncio.timeout(WINDOW_LOOKUP_SECONDS):
            return await backend.context_window()
    except (TimeoutError, Exception):
        log.debug("context window lookup failed", exc_info=True)
        return None


class WindowLookup:
    """The one lookup of a session's context: started once, its answer kept in the window."""

    def __init__(self, window: Window) -> None:
        self._window = window
        self._task: asyncio.Task[int | None] | None = None

    def start(self, backend: Backend) -> None:
        """Start asking, unless the server told already or is being asked."""
        if self._window.discovered is None and self._task is None:
            self._task = asyncio.create_task(reported_window(backend), name="window-lookup")

    @property
    def running(self) -> bool:
        return self._task is not None

    async def settle(self, *, wait: bool) -> None:
        """Take the reported window once the lookup has answered (with `wait`, wait for it)."""
        task = self._task
        if task is None or not (wait or task.done()):
            return
        # Shielded: a cancelled turn must not cancel the lookup the session shares.
        found = await asyncio.shield(task)
        self._task = None
        if found is not None:
            self._window.discovered = found
