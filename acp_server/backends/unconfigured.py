"""The backend in place when no usable model is configured: each prompt says what to do."""

from __future__ import annotations

from collections.abc import AsyncIterator

from acp_server.messages import Event, ModelRequest, StreamError


class UnconfiguredBackend:
    label = "none"

    def __init__(self, message: str) -> None:
        self.message = message

    async def context_window(self) -> int | None:
        return None

    async def stream(self, request: ModelRequest) -> AsyncIterator[Event]:
        yield StreamError(self.message)
