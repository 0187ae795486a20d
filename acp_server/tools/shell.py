"""run_command: a shell command line, in an editor terminal when the client offers one, else as a
local subprocess.

Either way the command runs as `/bin/sh -c <command line>`. The model writes POSIX shell, and
the user's own $SHELL (fish, nushell, a zsh with a heavy rc file) would parse it differently or
print banners into the output. A command never outlives its call: on a timeout or a cancel the
editor terminal is killed and released, and a local command runs in a process group of its own
which is stopped as a whole, so `server &` or a pipeline cannot leave processes behind.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import signal
from collections.abc import Awaitable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from acp_server.clientapi import ClientApi
from acp_server.tools.base import (
    Permit,
    Presentation,
    Tool,
    ToolContext,
    ToolFailure,
    ToolOutcome,
    text_content,
)
from acp_server.updates import tool_call_update

log = logging.getLogger(__name__)

SHELL = "/bin/sh"
DEFAULT_TIMEOUT = 120.0
MAX_TIMEOUT = 1800.0
OUTPUT_BYTE_LIMIT = 64 * 1024  # output kept per command, from the end
MODEL_MAX_CHARS = 16_000  # of that, what the model reads (errors are at the end)
TITLE_MAX = 80
TERM_GRACE = 2.0  # SIGTERM, then SIGKILL after this long
EOF_GRACE = 1.0  # for the output pipe to drain once the command is gone
CLEANUP_SECONDS = 5.0  # bound on kill / release / reap, also while being cancelled
POLL_SECONDS = 0.02
NO_OUTPUT = "(no output)"

# Cleanup steps still running after their caller gave up waiting; kept so they are not
# garbage-collected mid-flight.
_background: set[asyncio.Future[Any]] = set()


@dataclass(frozen=True)
class _Result:
    exit_code: int | None
    signal: str | None
    timed_out: bool
    output: str
    earlier_cut: bool  # the beginning of the output was dropped before we saw it

    @property
    def ok(self) -> bool:
        return self.exit_code == 0 and not self.timed_out

    def raw(self) -> dict[str, Any]:
        return {"exitCode": self.exit_code, "signal": self.signal, "timedOut": self.timed_out}


# --- the tool ---------------------------------------------------------------------------------


def _present(args: dict[str, Any], ctx: ToolContext) -> Presentation:
    command = args.get("command")
    if not isinstance(command, str) or not command.strip():
        return Presentation("Run a command")
    lines = command.strip().splitlines()
    shown = lines[0] + (" …" if len(lines) > 1 else "")
    if len(shown) > TITLE_MAX:
        shown = shown[: TITLE_MAX - 1].rstrip() + "…"
    return Presentation(f"Run {_inline_code(shown)}")


async def _run_command(args: dict[str, Any], ctx: ToolContext) -> ToolOutcome:
    command: str = args["command"]
    cwd = ctx.resolve(args["cwd"]) if args.get("cwd") else ctx.cwd
    timeout = _timeout(args.get("timeout_seconds"))
    await ctx.permit(Permit(command=command, cwd=cwd))
    if not cwd.is_dir():
        problem = "is not a directory" if cwd.exists() else "does not exist"
        raise ToolFailure(f"Cannot run the command: the directory {cwd} {problem}.")
    if ctx.client.can_terminal:
        return await _in_terminal(command, cwd, timeout, ctx)
    return await _local(command, cwd, timeout)


def _timeout(value: Any) -> float:
    if isinstance(value, int | float) and not isinstance(value, bool) and value > 0:
        return min(float(value), MAX_TIMEOUT)
    return DEFAULT_TIMEOUT


RUN_COMMAND = Tool(
    name="run_command",
    description=(
        "Run a shell command line with /bin/sh -c and return its exit code and output (stdout "
        "and stderr together; when long, only the end is kept). `cwd` is absolute or relative "
        "to the working directory (default: the working directory). The command gets no input "
        "and no pager, so it must not wait for the user. It is stopped after `timeout_seconds` "
        f"(default {DEFAULT_TIMEOUT:g}, at most {MAX_TIMEOUT:g}); processes it leaves running "
        "in the background are stopped when it ends, so do not use it to start servers that "
        "must keep running."
    ),
    kind="execute",
    effect="execute",
    present=_present,
    run=_run_command,
)


# --- through the editor's terminal ------------------------------------------------------------


async def _in_terminal(command: str, cwd: Path, timeout: float, ctx: ToolContext) -> ToolOutcome:
    """Run in a client terminal, shown live in the tool call; always released at the end."""
    client = ctx.client
    terminal_id = await _create_terminal(client, command, cwd)
    ctx.terminals.append(terminal_id)
    item = {"type": "terminal", "terminalId": terminal_id}
    ctx.emit(tool_call_update(ctx.call_id, status="in_progress", content=[item]))
    try:
        status = await _wait_terminal(client, terminal_id, timeout)
        output = await client.terminal_output(terminal_id)
    except asyncio.CancelledError:
        await _settle(client.kill_terminal(terminal_id), "terminal/kill")
        raise
    finally:
        if await _settle(client.release_terminal(terminal_id), "terminal/release"):
            ctx.terminals.remove(terminal_id)
    exit_status = status or output.get("exitStatus") or {}
    result = _Result(
        exit_code=exit_status.get("exitCode"),
        signal=exit_status.get("signal"),
        timed_out=status is None,
        output=str(output.get("output") or ""),
        earlier_cut=bool(output.get("truncated")),
    )
    text = f"{_status_line(result, timeout)}\n{_shown_output(result.output, result.earlier_cut)}"
    return ToolOutcome(text, ok=result.ok, content=[item], raw_output=result.raw())


async def _create_terminal(client: ClientApi, command: str, cwd: Path) -> str:
    """terminal/create. If the call is cancelled while the editor creates the terminal, the
    terminal is still released once its id arrives."""
    task = asyncio.ensure_future(
        client.create_terminal(SHELL, ["-c", command], str(cwd), OUTPUT_BYTE_LIMIT)
    )
    try:
        return await asyncio.shield(task)
    except asyncio.CancelledError:
        if await _settle(task, "terminal/create") and not task.cancelled() and not task.exception():
            await _settle(client.release_terminal(task.result()), "terminal/release")
        raise


async def _wait_terminal(
    client: ClientApi, terminal_id: str, timeout: float
) -> dict[str, Any] | None:
    """The exit status; None if the command ran past `timeout` (it is then killed)."""
    try:
        return await asyncio.wait_for(client.wait_for_terminal_exit(terminal_id), timeout)
    except TimeoutError:
        await client.kill_terminal(terminal_id)
        return None


async def _settle(step: Awaitable[Any], what: str) -> bool:
    """Let a cleanup step finish (within CLEANUP_SECONDS) even while the caller is being
    cancelled: the step itself is never cancelled. A failure is logged, not raised. False if
    the step did not finish in time."""
    task = asyncio.ensure_future(step)
    _background.add(task)
    task.add_done_callback(_background.discard)
    done, _ = await asyncio.wait({task}, timeout=CLEANUP_SECONDS)
    if not done:
        log.warning("%s did not finish within %g s", what, CLEANUP_SECONDS)
        return False
    if not task.cancelled() and task.exception() is not None:
        log.warning("%s failed: %s", what, task.exception())
    return True


# --- as a local subprocess --------------------------------------------------------------------


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


async def _local(command: str, cwd: Path, timeout: float) -> ToolOutcome:
    proc, tail, transport = await _spawn(command, cwd)
    try:
        timed_out = await _supervise(proc, tail, timeout)
    except BaseException:
        _signal_group(proc.pid, signal.SIGKILL)
        await _settle(_reap(proc), "reaping the command")
        raise
    finally:
        transport.close()
    code = proc.returncode
    result = _Result(
        exit_code=code if code is not None and code >= 0 else None,
        signal=_signal_name(-code) if code is not None and code < 0 else None,
        timed_out=timed_out,
        output=tail.text(),
        earlier_cut=tail.dropped > 0,
    )
    shown = _shown_output(result.output, result.earlier_cut)
    status = _status_line(result, timeout)
    return ToolOutcome(
        f"{status}\n{shown}",
        ok=result.ok,
        content=[text_content(f"{status}\n{shown if shown == NO_OUTPUT else _fenced(shown)}")],
        raw_output=result.raw(),
    )


async def _spawn(
    command: str, cwd: Path
) -> tuple[asyncio.subprocess.Process, _Tail, asyncio.ReadTransport]:
    """Start the command in a new session (its own process group), stdout and stderr on one
    pipe that we read into a `_Tail`."""
    loop = asyncio.get_running_loop()
    read_fd, write_fd = os.pipe()
    tail = _Tail(OUTPUT_BYTE_LIMIT)
    pipe = os.fdopen(read_fd, "rb", buffering=0)
    try:
        transport, _ = await loop.connect_read_pipe(lambda: tail, pipe)
    except BaseException:
        pipe.close()
        os.close(write_fd)
        raise
    try:
        proc = await asyncio.create_subprocess_exec(
            SHELL,
            "-c",
            command,
            cwd=cwd,
            env=_environment(),
            stdin=asyncio.subprocess.DEVNULL,
            stdout=write_fd,
            stderr=write_fd,
            start_new_session=True,
        )
    except BaseException as exc:
        transport.close()
        if isinstance(exc, OSError):
            raise ToolFailure(f"Cannot start the command: {exc.strerror or exc}") from exc
        raise
    finally:
        os.close(write_fd)  # the child holds its copy; EOF comes when every writer is gone
    return proc, tail, transport


def _environment() -> dict[str, str]:
    """Ours, with pagers and terminal features off so nothing waits for a keypress."""
    return {**os.environ, "PAGER": "cat", "GIT_PAGER": "cat", "TERM": "dumb"}


async def _supervise(proc: asyncio.subprocess.Process, tail: _Tail, timeout: float) -> bool:
    """Wait for the command, then stop whatever is left of its group. True if it timed out."""
    try:
        await asyncio.wait_for(proc.wait(), timeout)
        timed_out = False
    except TimeoutError:
        timed_out = True
    await _stop_group(proc.pid)
    await proc.wait()
    # A process that left the group (setsid) may hold the pipe open: do not wait for it.
    await asyncio.wait({tail.closed}, timeout=EOF_GRACE)
    return timed_out


async def _stop_group(pgid: int) -> None:
    """SIGTERM the process group; SIGKILL it if anything survives TERM_GRACE."""
    if not _group_alive(pgid):
        return
    _signal_group(pgid, signal.SIGTERM)
    if not await _until_gone(pgid, TERM_GRACE):
        _signal_group(pgid, signal.SIGKILL)
        await _until_gone(pgid, TERM_GRACE)


async def _reap(proc: asyncio.subprocess.Process) -> None:
    """After a SIGKILL to the group: reap the shell and let the rest of the group die."""
    await proc.wait()
    await _until_gone(proc.pid, TERM_GRACE)


async def _until_gone(pgid: int, seconds: float) -> bool:
    """Wait (at most `seconds`) until no process of the group runs; False if one still does."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + seconds
    while _group_alive(pgid):
        if loop.time() >= deadline:
            return False
        await asyncio.sleep(POLL_SECONDS)
    return True


def _signal_group(pgid: int, sig: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, sig)


def _group_alive(pgid: int) -> bool:
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


# --- reporting --------------------------------------------------------------------------------


def _status_line(result: _Result, timeout: float) -> str:
    if result.timed_out:
        return f"Timed out after {timeout:g} s; the command was stopped."
    if result.exit_code is not None:
        return f"Exit code {result.exit_code}"
    if result.signal:
        return f"Killed by signal {result.signal}"
    return "Exit status unknown"


def _shown_output(output: str, earlier_cut: bool) -> str:
    kept = _keep_end(output, MODEL_MAX_CHARS)
    earlier_cut = earlier_cut or len(kept) < len(output)
    if not earlier_cut and not kept.strip():
        return NO_OUTPUT
    note = "[… output truncated: the beginning is not shown]\n" if earlier_cut else ""
    return note + kept.rstrip("\n")


def _keep_end(text: str, limit: int) -> str:
    """The last `limit` characters of `text`, starting on a line boundary when one is near."""
    if len(text) <= limit:
        return text
    start = len(text) - limit
    newline = text.find("\n", start, start + limit // 2)
    return text[newline + 1 :] if newline != -1 else text[start:]


def _fenced(text: str) -> str:
    fence = "```"
    while fence in text:
        fence += "`"
    return f"{fence}\n{text}\n{fence}"


def _inline_code(text: str) -> str:
    ticks = "`"
    while ticks in text:
        ticks += "`"
    pad = " " if text.startswith("`") or text.endswith("`") else ""
    return f"{ticks}{pad}{text}{pad}{ticks}"
