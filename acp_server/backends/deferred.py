"""A backend built at its first use.

Building an HTTP backend imports the HTTP stack (httpx and its dependencies, ~30 ms on a small
machine). Every session gets its model's backend at `session/new`, which editors wait for
before the user can type, while nothing is asked of the model until the first prompt: so the
session gets this stand-in, and the real backend is made when the first request (or the first
look at the context window) needs it.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable

from acp_server.backends import Backend, Preparable, window_origin
from acp_server.messages import Event, ModelRequest


class Deferred:
    """Stands in for the backend `build` makes, building it once, when it is first used."""

    def __init__(self, build: Callable[[], Backend], label: str) -> None:
        self._build: Callable[[], Backend] | None = build
        self._backend: Backend | None = None
        self._label = label

    @property
    def label(self) -> str:
        return self._label

    @property
    def built(self) -> bool:
        return self._backend is not None

    def _real(self) -> Backend:
        if self._backend is None:
            assert self._build is not None
            self._backend, self._build = self._build(), None
        return self._backend

    def prepare(self) -> None:
        """Build the backend now (after session/new, while the user types), and let it
        prepare itself in turn."""
        backend = self._real()
        if isinstance(backend, Preparable):
            backend.prepare()

    def stream(self, request: ModelRequest) -> AsyncIterator[Event]:
        return self._real().stream(request)

    async def context_window(self) -> int | None:
        return await self._real().context_window()

    @property
    def window_origin(self) -> str:
        return window_origin(self._backend) if self._backend is not None else ""
