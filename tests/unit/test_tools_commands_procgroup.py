"""run_in_group: exit status, signal, timeout and the kept end of the output, for any argv."""

from __future__ import annotations

import asyncio
import contextlib
import os
import random
import signal
import time
from pathlib import Path

import pytest

from acp_server.tools.commands.procgroup import run_in_group

ENV = {"PATH": os.environ.get("PATH", "/usr/bin:/bin")}


async def test_exit_code_and_output(tmp_path: Path) -> None:
    result = await run_in_group(["/bin/sh", "-c", "pwd; exit 2"], tmp_path, 5, ENV, 1024)
    assert (result.exit_code, result.signal, result.timed_out) == (2, None, False)
    assert result.output == f"{tmp_path}\n"
    assert not result.ok and not result.earlier_cut


async def test_env_is_exactly_the_given_one(tmp_path: Path) -> None:
    result = await run_in_group(["/usr/bin/env"], tmp_path, 5, {"ONLY": "this"}, 1024)
    assert result.ok
    assert result.output == "ONLY=this\n"


async def test_signal_is_named(tmp_path: Path) -> None:
    result = await run_in_group(["/bin/sh", "-c", "kill -TERM $$"], tmp_path, 5, ENV, 1024)
    assert (result.exit_code, result.signal) == (None, "SIGTERM")


async def test_only_the_end_is_kept(tmp_path: Path) -> None:
    result = await run_in_group(["/bin/sh", "-c", "seq 1 1000"], tmp_path, 5, ENV, 100)
    assert result.earlier_cut
    assert len(result.output) <= 100 and result.output.endswith("999\n1000\n")


async def test_timeout_stops_it(tmp_path: Path) -> None:
    started = time.monotonic()
    result = await run_in_group(["/bin/sh", "-c", "sleep 30"], tmp_path, 0.2, ENV, 1024)
    assert time.monotonic() - started < 2
    assert result.timed_out and not result.ok


async def test_missing_program_is_an_oserror(tmp_path: Path) -> None:
    with pytest.raises(OSError):
        await run_in_group([str(tmp_path / "nope")], tmp_path, 5, ENV, 1024)


def _running_with(marker: str) -> list[int]:
    """Pids of live (not zombie) processes whose command line contains `marker`."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            cmdline = Path(f"/proc/{entry}/cmdline").read_bytes()
            stat = Path(f"/proc/{entry}/stat").read_bytes()
        except OSError:
            continue
        state = stat[stat.rfind(b")") + 2 :].split()[0]
        if marker.encode() in cmdline and state not in (b"Z", b"X"):
            found.append(int(entry))
    return found


@pytest.mark.skipif(not Path("/proc/self/cmdline").exists(), reason="scans /proc")
async def test_a_cancel_during_the_spawn_leaves_no_grandchild(tmp_path: Path) -> None:
    """The cancel lands while the command is still being started: asyncio then kills only the
    shell, and `sleep` (its child, in the new process group) used to survive."""
    marker = f"30.{random.randrange(10**8, 10**9)}"  # sleep takes fractional seconds
    command = ["/bin/sh", "-c", f"sleep {marker}; :"]  # `; :` so the shell must fork sleep
    for _ in range(40):
        task = asyncio.ensure_future(run_in_group(command, tmp_path, 30, ENV, 1024))
        for _ in range(random.randrange(10)):  # starting takes a few loop iterations
            await asyncio.sleep(0)
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
    survivors: list[int] = []
    for _ in range(100):  # a SIGKILLed group takes a moment to be gone
        survivors = _running_with(marker)
        if not survivors:
            break
        await asyncio.sleep(0.02)
    for pid in survivors:
        with contextlib.suppress(OSError):
            os.kill(pid, signal.SIGKILL)
    assert survivors == []
