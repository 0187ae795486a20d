"""The stdio transport to an MCP server: a subprocess in its own process group.

Ours rather than the SDK's `stdio_client` so that we hold the process: its group is
registered (`procs`) and ended at exit, and its stderr goes to our log line by line (never
to our stdout, which is the wire); the last lines are kept to say why a server failed. The
server gets a small environment (HOME, PATH, USER, … like the SDK) plus the `env` it was
configured with; our own variables (API keys) are not passed on.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import logging
import os
from collections.abc import AsyncIterator
from pathlib import Path

import anyio
import mcp.types as types
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream
from mcp.shared.message import SessionMessage

from acp_server.tools.commands.procgroup import stop_group
from acp_server.tools.mcp import procs
from acp_server.tools.mcp.config import ServerConfig

log = logging.getLogger(__name__)

INHERITED = ("HOME", "LOGNAME", "PATH", "SHELL", "TERM", "USER", "LANG", "LC_ALL", "TMPDIR")
LINE_LIMIT = 64 * 1024 * 1024  # a tool result with an image is one long line
STDIN_GRACE = 1.0  # for the server to exit by itself once its stdin is closed
Streams = tuple[
    MemoryObjectReceiveStream[SessionMessage | Exception], MemoryObjectSendStream[SessionMessage]
]


class StdioProcess:
    """A running stdio server: its process, the end of its stderr."""

    def __init__(self, config: ServerConfig, proc: asyncio.subprocess.Process) -> None:
        self.config = config
        self.proc = proc
        self.stderr_tail: collections.deque[str] = collections.deque(maxlen=5)

    def last_words(self) -> str:
        """The last lines the server wrote to stderr ("" when it wrote none)."""
        return " | ".join(self.stderr_tail)


async def spawn(config: ServerConfig, cwd: Path) -> StdioProcess:
    """Start the server in a new session (its own process group). OSError if it cannot."""
    env = {k: os.environ[k] for k in INHERITED if k in os.environ} | dict(config.env)
    start = asyncio.ensure_future(
        asyncio.create_subprocess_exec(
            config.command,
            *config.args,
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            env=env,
            cwd=cwd if cwd.is_dir() else None,
            start_new_session=True,
            limit=LINE_LIMIT,
        )
    )
    try:
        # Shielded: a cancel during the spawn must not leave a started process unrecorded.
        proc = await asyncio.shield(start)
    except BaseException:
        with contextlib.suppress(BaseException):
            late = await start
            procs.started(late.pid)
            await stop(StdioProcess(config, late))
        raise
    procs.started(proc.pid)
    return StdioProcess(config, proc)


@contextlib.asynccontextmanager
async def connected(process: StdioProcess) -> AsyncIterator[Streams]:
    """The (read, write) streams an MCP `ClientSession` takes; the server is stopped on exit."""
    read_in, read_out = anyio.create_memory_object_stream[SessionMessage | Exception](0)
    write_in, write_out = anyio.create_memory_object_stream[SessionMessage](0)
    tasks = [
        asyncio.create_task(_read(process, read_in)),
        asyncio.create_task(_write(process, write_out)),
        asyncio.create_task(_log_stderr(process)),
    ]
    try:
        yield read_out, write_in
    finally:
        for task in tasks[:2]:
            task.cancel()
        await asyncio.shield(stop(process))
        await asyncio.wait(tasks, timeout=1.0)


async def _read(
    process: StdioProcess, out: MemoryObjectSendStream[SessionMessage | Exception]
) -> None:
    stdout = process.proc.stdout
    assert stdout is not None
    async with out:
        while line := await stdout.readline():
            if not line.strip():
                continue
            try:
                message = types.jsonrpc_message_adapter.validate_json(line, by_name=False)
            except ValueError:
                log.warning(
                    "MCP server %s wrote a line that is not JSON-RPC: %.200r",
                    process.config.name,
                    line,
                )
                continue
            try:
                await out.send(SessionMessage(message))
            except (anyio.BrokenResourceError, anyio.ClosedResourceError):
                return


async def _write(
    process: StdioProcess, messages: MemoryObjectReceiveStream[SessionMessage]
) -> None:
    stdin = process.proc.stdin
    assert stdin is not None
    async with messages:
        try:
            async for item in messages:
                data = item.message.model_dump_json(by_alias=True, exclude_unset=True)
                stdin.write(data.encode() + b"\n")
                await stdin.drain()
        except (ConnectionError, OSError):
            log.info("MCP server %s closed its stdin", process.config.name)


async def _log_stderr(process: StdioProcess) -> None:
    stderr = process.proc.stderr
    assert stderr is not None
    while line := await stderr.readline():
        text = line.decode("utf-8", errors="replace").rstrip()
        if text:
            process.stderr_tail.append(text[:300])
            log.info("MCP server %s: %s", process.config.name, text)


async def stop(process: StdioProcess) -> None:
    """Close its stdin, give it a moment to exit, then end its whole process group."""
    proc = process.proc
    if proc.stdin is not None:
        with contextlib.suppress(OSError):
            proc.stdin.close()
    with contextlib.suppress(TimeoutError):
        await asyncio.wait_for(proc.wait(), STDIN_GRACE)
    await stop_group(proc.pid)
    with contextlib.suppress(ProcessLookupError):
        proc.kill()
    await proc.wait()
    procs.ended(proc.pid)
