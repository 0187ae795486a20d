"""The process's stdin/stdout as a byte source and a single frame sink.

stdout is the wire, so before anything else runs we move it out of reach: the real stdout file
descriptor is duplicated for the wire writer, and fd 1 (plus `sys.stdout`) is pointed at stderr.
A stray `print`, a chatty library or a child process that inherits fd 1 then lands on stderr
instead of corrupting the protocol stream.
"""

from __future__ import annotations

import asyncio
import os
import stat
import sys
import threading
from collections.abc import Awaitable, Callable
from typing import IO

READ_CHUNK = 1 << 20


def claim_stdout() -> int:
    """Return a private fd for the wire and send everything else written to stdout to stderr."""
    sys.stdout.flush()
    wire_fd = os.dup(1)
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    return wire_fd


def _is_pipe_like(fd: int) -> bool:
    mode = os.fstat(fd).st_mode
    return stat.S_ISFIFO(mode) or stat.S_ISSOCK(mode)


class _BlockingSink:
    """Writes straight to a regular file or terminal (tests, manual runs)."""

    def __init__(self, file: IO[bytes]) -> None:
        self._file = file

    def write(self, data: bytes) -> None:
        self._file.write(data)
        self._file.flush()

    async def drain(self) -> None:
        return None


class _PipeSink:
    """Non-blocking, ordered writes to a pipe through an asyncio transport.

    Frames written during one pass of the event loop leave in one system call: a burst of
    streamed deltas that arrived in one network read costs one write, not one each. Nothing is
    held back waiting for more: the flush is queued with `call_soon`, so it runs as soon as the
    writing task yields (at the latest when it waits for the model's next bytes).
    """

    def __init__(self, writer: asyncio.StreamWriter) -> None:
        self._writer = writer
        self._pending: list[bytes] = []
        self._loop = asyncio.get_running_loop()

    def write(self, data: bytes) -> None:
        if self._writer.is_closing():
            return
        if not self._pending:
            self._loop.call_soon(self._flush)
        self._pending.append(data)

    def _flush(self) -> None:
        if not self._pending:
            return
        data = b"".join(self._pending) if len(self._pending) > 1 else self._pending[0]
        self._pending.clear()
        if not self._writer.is_closing():
            self._writer.write(data)

    @property
    def gone(self) -> bool:
        """The reader closed its end of the pipe (asyncio notices it between writes too)."""
        return self._writer.is_closing()

    async def drain(self) -> None:
        self._flush()
        if not self._writer.is_closing():
            await self._writer.drain()


async def open_sink(fd: int) -> _PipeSink | _BlockingSink:
    """A sink for frames on `fd` (a pipe in production; a file or tty also works)."""
    file = os.fdopen(fd, "wb", buffering=0)
    if not _is_pipe_like(fd):
        return _BlockingSink(file)
    loop = asyncio.get_running_loop()
    transport, protocol = await loop.connect_write_pipe(asyncio.streams.FlowControlMixin, file)
    writer = asyncio.StreamWriter(transport, protocol, None, loop)
    return _PipeSink(writer)


async def open_source(fd: int = 0) -> Callable[[], Awaitable[bytes]]:
    """A chunk reader for `fd` (b'' at end of input): asyncio for pipes, a thread otherwise."""
    loop = asyncio.get_running_loop()
    if _is_pipe_like(fd):
        reader = asyncio.StreamReader(limit=READ_CHUNK)
        proto = asyncio.StreamReaderProtocol(reader)
        await loop.connect_read_pipe(lambda: proto, os.fdopen(fd, "rb", buffering=0))
        return lambda: reader.read(READ_CHUNK)
    queue: asyncio.Queue[bytes] = asyncio.Queue()

    def pump() -> None:
        # A daemon thread: a read blocked on a terminal never holds up the process exit.
        while True:
            try:
                chunk = os.read(fd, READ_CHUNK)
            except OSError:
                chunk = b""
            loop.call_soon_threadsafe(queue.put_nowait, chunk)
            if not chunk:
                return

    threading.Thread(target=pump, name="stdin-reader", daemon=True).start()
    return queue.get
