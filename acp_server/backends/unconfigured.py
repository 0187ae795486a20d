"""The backend in place when no model is configured: it says how to configure one."""

from __future__ import annotations

from collections.abc import AsyncIterator

from acp_server.messages import Event, ModelRequest, StreamError

HOW_TO_CONFIGURE = (
    "No model is configured, so there is nothing to answer with. "
    "To play a scripted conversation, start acp-server with `--script FILE` "
    "(or set ACP_SERVER_SCRIPT=FILE); the README's 'Scripted backend' section shows the format."
)


class UnconfiguredBackend:
    label = "none"

    async def stream(self, request: ModelRequest) -> AsyncIterator[Event]:
        yield StreamError(HOW_TO_CONFIGURE)
