"""`McpConnection.connect` given up on (its session closed, or its servers replaced by
session/load, while it was still connecting) leaves nothing behind: no failure that nobody
reads ("Future exception was never retrieved" in the log, which the MCP fuzz found)."""

from __future__ import annotations

import asyncio
import gc
import socket
from pathlib import Path
from typing import Any

import pytest

from acp_server.tools.mcp.config import ServerConfig, Transport
from acp_server.tools.mcp.connection import McpConnection


def closed_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
    return port


@pytest.mark.parametrize("transport", ["http", "sse", "stdio"])
async def test_a_connect_cancelled_at_any_point_leaves_no_unread_failure(
    transport: Transport,
) -> None:
    problems: list[str] = []

    def handler(loop: asyncio.AbstractEventLoop, context: dict[str, Any]) -> None:
        problems.append(context["message"])

    asyncio.get_running_loop().set_exception_handler(handler)
    url = f"http://127.0.0.1:{closed_port()}/mcp"
    for ticks in range(60):  # cancelled after 0, 1, 2, … turns of the event loop
        server = ServerConfig(name="w", transport=transport, url=url, command="/nonexistent/x")
        connection = McpConnection(server, Path("/"), lambda _: None)
        task = asyncio.create_task(connection.connect())
        for _ in range(ticks):
            await asyncio.sleep(0)
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
        await connection.close()
        del task, connection
    gc.collect()  # a lost failure is logged when its future is freed
    assert problems == []
