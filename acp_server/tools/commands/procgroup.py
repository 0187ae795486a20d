"""A command as a local subprocess in a process group of its own, which is stopped as a whole.

The command gets a new session (so a new process group), no stdin, and stdout and stderr on one
pipe of which only the end is kept. When it exits or runs past its timeout, whatever is left of
its group is stopped (SIGTERM, then SIGKILL), so `server &` or a pipeline cannot leave
processes behind; on a cancel the group is killed and the command reaped before the cancel
propagates.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from acp_server.tools.base import settle

TERM_GRACE = 2.0  # SIGTERM, then SIGKILL after this long
EOF_GRACE = 1.0  # for the output pipe to drain once the command is gone
POLL_SECONDS = 0.02


@dataclass(frozen=True)
class ProcessResult:
    """How a command ended, and the end of what it printed."""

    exit_code: int | None
    signal: str | None  # e.g. "SIGKILL", when a signal ended it
    timed_out: bool
    output: str
    earlier_cut: bool  # the beginning of the output was dropped before we saw it

    @property
    def ok(self) -> bool:
        return self.exit_code == 0 and not self.timed_out


async def run_in_group(
    argv: Sequence[str], cwd: Path, timeout: float, env: Mapping[str, str], output_limit: int
) -> ProcessResult:
    """Run `argv` to its end or for at most `timeout` seconds, keeping the last `output_limit`
    bytes of its output. OSError if it cannot be started."""
    tail = _Tail(output_limit)
    proc, transport = await spawn(argv, cwd, env, tail)
    try:
        timed_out = await _supervise(proc, tail, timeout)
    except BaseException:
        signal_group(proc.pid, signal.SIGKILL)
        await settle(_reap(proc), "reaping the command")
        raise
    finally:
        transport.close()
    code = proc.returncode
    return ProcessResult(
        exit_code=code if code is not None and code >= 0 else None,
        signal=_signal_name(-code) if code is not None and code < 0 else None,
        timed_out=timed_out,
        output=tail.text(),
        earlier_cut=tail.dropped > 0,
    )


class _Tail(asyncio.Protocol):
    """Collects what arrives on the output pipe, keeping only the last `limit` bytes."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.data = bytearray()
        self.dropped = 0
        self.closed: asyncio.Future[None] = asyncio.get_running_loop().create_future()

    def data_received(self, data: bytes) -> None:
        self.data += data
        excess = len(self.data) - self.limit
        if excess > 0:
            del self.data[:excess]
            self.dropped += excess

    def connection_lost(self, exc: Exception | None) -> None:
        if not self.closed.done():
            self.closed.set_result(None)

    def text(self) -> str:
        data = bytes(self.data)
        if self.dropped:  # the cut may have split a UTF-8 sequence: skip its continuation bytes
            skip = 0
            while skip < min(3, len(data)) and data[skip] & 0xC0 == 0x80:
                skip += 1
            data = data[skip:]
        return data.decode("utf-8", errors="replace")


async def spawn(
    argv: Sequence[str], cwd: Path, env: Mapping[str, str], reader: asyncio.Protocol
) -> tuple[asyncio.subprocess.Process, asyncio.ReadTransport]:
    """Start the command in a new session (its own process group), stdout and stderr on one
    pipe that `reader` receives (a `_Tail` here, a background command's buffer elsewhere)."""
    loop = asyncio.get_running_loop()
    read_fd, write_fd = os.pipe()
    pipe = os.fdopen(read_fd, "rb", buffering=0)
    try:
        transport, _ = await loop.connect_read_pipe(lambda: reader, pipe)
    except BaseException:
        pipe.close()
        os.close(write_fd)
        raise
    spawn = asyncio.ensure_future(
        asyncio.create_subprocess_exec(
            *argv,
            cwd=cwd,
            env=dict(env),
            stdin=asyncio.subprocess.DEVNULL,
            stdout=write_fd,
            stderr=write_fd,
            start_new_session=True,
        )
    )
    try:
        # Shielded: a cancel that lands while asyncio is still setting the child up would make
        # asyncio kill only the shell, and the command's own children (in the new group) live on.
        proc = await asyncio.shield(spawn)
    except BaseException:
        await settle(_stop_late_start(spawn), "stopping a command started after a cancel")
        transport.close()
        raise
    finally:
        os.close(write_fd)  # the child holds its copy; EOF comes when every writer is gone
    return proc, transport


async def _stop_late_start(spawn: asyncio.Future[asyncio.subprocess.Process]) -> None:
    """The caller gave up on a spawn (cancelled): once it completes, kill the whole process
    group it started and reap it."""
    try:
        proc = await spawn
    except OSError:
        return  # it never started
    signal_group(proc.pid, signal.SIGKILL)
    await _reap(proc)


async def _supervise(proc: asyncio.subprocess.Process, tail: _Tail, timeout: float) -> bool:
    """Wait for the command, then stop whatever is left of its group. True if it timed out."""
    try:
        await asyncio.wait_for(proc.wait(), timeout)
        timed_out = False
    except TimeoutError:
        timed_out = True
    await stop_group(proc.pid)
    await proc.wait()
    # A process that left the group (setsid) may hold the pipe open: do not wait for it.
    await asyncio.wait({tail.closed}, timeout=EOF_GRACE)
    return timed_out


async def stop_group(pgid: int) -> None:
    """SIGTERM the process group; SIGKILL it if anything survives TERM_GRACE."""
    if not group_alive(pgid):
        return
    signal_group(pgid, signal.SIGTERM)
    if not await _until_gone(pgid, TERM_GRACE):
        signal_group(pgid, signal.SIGKILL)
        await _until_gone(pgid, TERM_GRACE)


async def _reap(proc: asyncio.subprocess.Process) -> None:
    """After a SIGKILL to the group: reap the shell and let the rest of the group die."""
    await proc.wait()
    await _until_gone(proc.pid, TERM_GRACE)


async def _until_gone(pgid: int, seconds: float) -> bool:
    """Wait (at most `seconds`) until no process of the group runs; False if one still does."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + seconds
    while group_alive(pgid):
        if loop.time() >= deadline:
            return False
        await asyncio.sleep(POLL_SECONDS)
    return True


def end_groups(groups: set[int], grace: float) -> None:
    """At agent exit (no event loop to wait on): SIGTERM every group of `groups`, SIGKILL what
    is left after `grace` seconds, and forget them all."""
    ending = list(groups)
    for pgid in ending:
        signal_group(pgid, signal.SIGTERM)
    deadline = time.monotonic() + grace
    while time.monotonic() < deadline and any(group_alive(g) for g in ending):
        time.sleep(0.02)
    for pgid in ending:
        signal_group(pgid, signal.SIGKILL)
        groups.discard(pgid)


def signal_group(pgid: int, sig: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, sig)


def group_alive(pgid: int) -> bool:
    """Whether a process of the group still runs. Zombies do not count: in a container whose
    init never reaps, orphans of the group stay zombies and would make every stop wait out the
    whole grace period."""
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:
        entries = os.listdir("/proc")
    except OSError:
        return True  # no /proc (macOS): trust killpg
    return any(entry.isdigit() and _runs_in_group(entry, pgid) for entry in entries)


def _runs_in_group(pid: str, pgid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            stat = f.read()
    except OSError:
        return False
    # After "pid (comm) ": state, ppid, pgrp, …; comm may contain spaces and parentheses.
    fields = stat[stat.rfind(b")") + 2 :].split()
    return len(fields) > 2 and fields[2] == str(pgid).encode() and fields[0] not in (b"Z", b"X")


def _signal_name(number: int) -> str:
    try:
        return signal.Signals(number).name
    except ValueError:
        return f"signal {number}"
