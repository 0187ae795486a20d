"""Model backends: each turns a neutral `ModelRequest` into a stream of neutral events.

The seam is one method. Real HTTP backends (OpenAI-compatible, Ollama, Anthropic) and the
scripted backend used by tests and demos implement the same protocol, so the agent loop cannot
tell them apart.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import TYPE_CHECKING, Protocol, runtime_checkable

if TYPE_CHECKING:  # the protocol is read by type checkers; at run time it names no message
    from acp_server.messages import Event, ModelRequest


class Backend(Protocol):
    """Streams one model round as neutral events, ending with `Finish` or `StreamError`."""

    @property
    def label(self) -> str:
        """A short name for people: e.g. ``scripted:demo.json``."""
        ...

    def stream(self, request: ModelRequest) -> AsyncIterator[Event]: ...

    async def context_window(self) -> int | None:
        """The model's context window in tokens as the server reports it (None: unknown)."""
        ...


@runtime_checkable
class Preparable(Protocol):
    """A backend that can do its set-up ahead of its first request: imports and objects, no
    I/O (a connection cut off when the editor closes the agent would be a warning on stderr)."""

    def prepare(self) -> None: ...


def window_origin(backend: object) -> str:
    """Where the window a backend's `context_window()` gave comes from, for a person ("": it
    does not say). Looks through the wrappers that keep their backend as `inner`."""
    for _ in range(4):
        origin = getattr(backend, "window_origin", None)
        if isinstance(origin, str):
            return origin
        backend = getattr(backend, "inner", None)
        if backend is None:
            break
    return ""
