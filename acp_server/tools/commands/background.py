"""How a background command runs: in an editor terminal the user sees, or a local process group.

With an editor that offers terminals, the command runs in one (`terminal/create`), embedded in
the tool call so the user watches it live; it is kept (not released) until it is stopped, and
`terminal/output` is read for what is new since the last read. Otherwise it runs as a local
process group of its own (see `procgroup`), its output kept in a bounded buffer.

A local group must not outlive the agent, even one killed with SIGKILL, which runs no cleanup:
next to each group a tiny watchdog shell waits on a pipe whose only writer is the agent. When
the agent dies, however it dies, the kernel closes the pipe, the watchdog's `read` returns and
it ends the group (SIGTERM, then SIGKILL). At an ordinary exit `end_all` ends every group at
once. An editor terminal belongs to the editor: the agent kills and releases it on stop, on
`session/close` and on a cancel that asked for it; if the agent dies, the editor ends it.
"""

from __future__ import annotations

import asyncio
import atexit
import codecs
import contextlib
import logging
import os
import signal
from pathlib import Path
from typing import Any

from acp_server.editor_api import EditorApi
from acp_server.tools.base import settle
from acp_server.tools.commands.jobs import Chunk, Job
from acp_server.tools.commands.procgroup import (
    EOF_GRACE,
    end_groups,
    signal_group,
    spawn,
    stop_group,
)

log = logging.getLogger(__name__)

SHELL = "/bin/sh"
OUTPUT_BYTE_LIMIT = 64 * 1024  # kept per command, the newest
POLL_SECONDS = 0.2  # how often an editor terminal's output is looked at while waiting
GATHER = 0.1  # once new output arrives while waiting, how long more of it is collected
END_GRACE = 0.3  # at agent exit: SIGTERM, then SIGKILL after this long
# The watchdog: when its stdin (a pipe only the agent writes) ends, end the group "$1".
WATCHDOG = 'read _; kill -s TERM -- "-$1" 2>/dev/null; sleep 1; kill -s KILL -- "-$1" 2>/dev/null'

_groups: set[int] = set()  # local groups running now, for `end_all`


class _Buffer(asyncio.Protocol):
    """The newest `limit` bytes of a command's output, and where the last read stopped."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.data = bytearray()
        self.start = 0  # offset in the whole output of data[0]
        self.cursor = 0  # offset up to which the model has read
        self.arrived = asyncio.Event()
        self.closed = asyncio.Event()
        self._decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")

    def data_received(self, data: bytes) -> None:
        self.data += data
        excess = len(self.data) - self.limit
        if excess > 0:
            del self.data[:excess]
            self.start += excess
        self.arrived.set()

    def connection_lost(self, exc: Exception | None) -> None:
        self.arrived.set()
        self.closed.set()

    def take(self) -> tuple[str, int]:
        """The text since the last read, and how many bytes of it were already dropped."""
        dropped = max(0, self.start - self.cursor)
        if dropped:
            self._decoder.reset()  # the cut may have split a character
        new = bytes(self.data[max(self.cursor, self.start) - self.start :])
        self.cursor = self.start + len(self.data)
        self.arrived.clear()
        return self._decoder.decode(new), dropped


class LocalJob(Job):
    """A background command in a local process group of its own, watched by a watchdog."""

    def __init__(
        self, job_id: str, command: str, owner: object, stop_on_cancel: bool, limit: int
    ) -> None:
        super().__init__(job_id, command, owner, stop_on_cancel)
        self._buffer = _Buffer(limit)
        self._proc: asyncio.subprocess.Process | None = None
        self._transport: asyncio.ReadTransport | None = None
        self._watchdog: asyncio.subprocess.Process | None = None
        self._watch_fd = -1
        self._ended: asyncio.Task[None] | None = None

    async def begin(self, cwd: Path, env: dict[str, str], argv: list[str] | None = None) -> None:
        """Start the command (`argv`: the command line as it is to run, e.g. in the sandbox)
        and its watchdog (OSError if it cannot start)."""
        self._proc, self._transport = await spawn(
            argv or [SHELL, "-c", self.command], cwd, env, self._buffer
        )
        _groups.add(self._proc.pid)
        self._watchdog, self._watch_fd = await _start_watchdog(self._proc.pid)
        self._ended = asyncio.ensure_future(self._supervise())

    def status(self) -> str | None:
        code = self._proc.returncode if self._proc else None
        if code is None:
            return None
        return f"exit code {code}" if code >= 0 else f"killed by {_signal_name(-code)}"

    async def read(self, wait: float) -> Chunk:
        if wait > 0 and self.status() is None and not self._buffer.arrived.is_set():
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._buffer.arrived.wait(), wait)
                await asyncio.sleep(GATHER)  # the rest of a line printed in pieces
        text, dropped = self._buffer.take()
        return Chunk(text, dropped, self.status())

    async def stop(self) -> None:
        if self._proc is not None and self._ended is not None:
            await settle(stop_group(self._proc.pid), "stopping a background command")
            await settle(asyncio.shield(self._ended), "reaping a background command")

    async def _supervise(self) -> None:
        """When the shell exits: stop what is left of its group, then the watchdog. Cancelled
        before that (the agent is going), the group is left to `end_all` and the watchdog."""
        assert self._proc is not None and self._transport is not None
        await self._proc.wait()
        try:
            await stop_group(self._proc.pid)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._buffer.closed.wait(), EOF_GRACE)
        finally:
            self._transport.close()
            _groups.discard(self._proc.pid)
            await _end_watchdog(self._watchdog, self._watch_fd)


async def _start_watchdog(pgid: int) -> tuple[asyncio.subprocess.Process, int]:
    """The watchdog for group `pgid`, and the pipe end to keep open while the group may run."""
    read_fd, write_fd = os.pipe()  # not inheritable: no other child holds the write end
    try:
        proc = await asyncio.create_subprocess_exec(
            SHELL,
            "-c",
            WATCHDOG,
            "watchdog",
            str(pgid),
            stdin=read_fd,
            stdout=asyncio.subprocess.DEVNULL,
            stderr=asyncio.subprocess.DEVNULL,
            start_new_session=True,
        )
    except BaseException:
        os.close(write_fd)
        signal_group(pgid, signal.SIGKILL)
        raise
    finally:
        os.close(read_fd)
    return proc, write_fd


async def _end_watchdog(proc: asyncio.subprocess.Process | None, write_fd: int) -> None:
    """The group is gone: the watchdog is killed before its pipe closes (which would wake it)."""
    if proc is not None and proc.returncode is None:
        with contextlib.suppress(ProcessLookupError):
            proc.kill()
        await proc.wait()
    if write_fd >= 0:
        os.close(write_fd)


class TerminalJob(Job):
    """A background command in an editor terminal, kept until it is stopped."""

    def __init__(
        self,
        job_id: str,
        command: str,
        owner: object,
        stop_on_cancel: bool,
        client: EditorApi,
        terminal_id: str,
    ) -> None:
        super().__init__(job_id, command, owner, stop_on_cancel)
        self.client = client
        self.terminal_id = terminal_id
        self._seen = ""  # the terminal's output at the last read (bounded by the editor)
        self._unread = ("", 0)  # what was printed before a stop, for the next read
        self._exit: str | None = None
        self._released = False

    def status(self) -> str | None:
        return self._exit

    async def refresh(self) -> None:
        if not self._released:
            answer = await self.client.terminal_output(self.terminal_id)
            self._note_exit(answer.get("exitStatus"))

    async def read(self, wait: float) -> Chunk:
        """What is new; once the command has ended and was read to its end, the terminal is
        released (the editor keeps showing it)."""
        text, dropped = self._unread
        self._unread = ("", 0)
        if not self._released:
            more, lost = await self._poll(wait)
            text, dropped = text + more, dropped + lost
            if self._exit is not None:
                await self._release()
        return Chunk(text, dropped, self._exit)

    async def stop(self) -> None:
        if self._released:
            return
        await settle(self.client.kill_terminal(self.terminal_id), "terminal/kill")
        try:
            self._unread = await self._poll(0)
        except Exception as exc:  # the editor's answer: the terminal is released all the same
            log.warning("terminal/output after terminal/kill failed: %s", exc)
        await self._release()
        self._exit = self._exit or "stopped"

    async def _poll(self, wait: float) -> tuple[str, int]:
        """The terminal's new output, waiting up to `wait` seconds for some (or the end)."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + wait
        while True:
            answer = await self.client.terminal_output(self.terminal_id)
            output = str(answer.get("output") or "")
            text, dropped = new_part(self._seen, output)
            self._note_exit(answer.get("exitStatus"))
            if text or dropped or self._exit is not None or loop.time() >= deadline:
                self._seen = output
                return text, dropped
            await asyncio.sleep(min(POLL_SECONDS, max(deadline - loop.time(), 0)))

    async def _release(self) -> None:
        if await settle(self.client.release_terminal(self.terminal_id), "terminal/release"):
            self._released = True

    def _note_exit(self, status: Any) -> None:
        if not isinstance(status, dict) or self._exit is not None:
            return
        if status.get("exitCode") is not None:
            self._exit = f"exit code {status['exitCode']}"
        else:
            self._exit = f"killed by {status.get('signal') or 'a signal'}"


def new_part(before: str, now: str) -> tuple[str, int]:
    """What `now` (a terminal's whole kept output) adds to `before`, and roughly how many
    characters were lost in between (the editor drops the beginning past its byte limit)."""
    if now.startswith(before):
        return now[len(before) :], 0
    anchor = before[-200:]
    at = now.rfind(anchor) if anchor else -1
    if at != -1:
        return now[at + len(anchor) :], 0
    return now, max(1, len(before) - len(now))


def end_all() -> None:
    """At agent exit: SIGTERM every local background group, SIGKILL what is left soon after."""
    end_groups(_groups, END_GRACE)


atexit.register(end_all)


def _signal_name(number: int) -> str:
    try:
        return signal.Signals(number).name
    except ValueError:
        return f"signal {number}"
