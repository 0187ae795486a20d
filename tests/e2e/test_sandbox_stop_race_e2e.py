"""A sandboxed command stopped while its sandbox is still being set up leaves nothing running.

A stop (the turn cancelled, a timeout, a background command stopped) goes to the command's
process group. bubblewrap forks the sandbox's init, which forks the command; when bubblewrap
ran in a session of its own (`--new-session`), the stop reached bubblewrap alone, and one sent
in its first ~20 ms, before the child had asked to die with its parent, left the sandbox
running (most of 20 tries at 5 ms). Here each mechanism is stopped 40 times at 0-20 ms after
the start, by the two ways commands are ended (SIGTERM then SIGKILL to the group, and the
cancel's SIGKILL), the command also starting a `setsid` child that leaves the group; after
each, no process of it may remain.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import time
import uuid
from pathlib import Path

import pytest

from acp_server.confine.sandbox import Mechanism, Sandbox
from acp_server.tools.commands.procgroup import run_in_group
from tests.unit.test_confine_sandbox import available

TRIES = 40
DELAYS = (0.0, 0.005, 0.01, 0.02)


def running_with(marker: str) -> list[int]:
    """Processes (not zombies) whose command line holds `marker`."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/cmdline", "rb") as f:
                cmdline = f.read()
            with open(f"/proc/{entry}/stat", "rb") as f:
                stat = f.read()
        except OSError:
            continue
        if marker.encode() in cmdline and stat[stat.rfind(b")") + 2 :][:1] not in (b"Z", b"X"):
            found.append(int(entry))
    return found


async def left_after_a_stop(box: Sandbox, root: Path, delay: float, cancel: bool) -> list[int]:
    """Start a looping command (and a setsid child of it) in `box`; `delay` seconds later
    cancel it or let its timeout stop it; the processes of it still running just after."""
    marker = f"stop-race-{uuid.uuid4().hex}"
    loop = f"while :; do sleep 0.1; done; : {marker}"
    line = f"setsid /bin/sh -c '{loop}' & {loop}"
    argv = box.argv(["/bin/sh", "-c", line])
    env = box.env({"PATH": os.environ.get("PATH", os.defpath)})
    started = time.monotonic()
    task = asyncio.ensure_future(run_in_group(argv, root, 60 if cancel else delay, env, 4096))
    if cancel:
        await asyncio.sleep(delay)
        task.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await asyncio.wait_for(task, 30)
    assert time.monotonic() - started < 30
    await asyncio.sleep(0.05)  # a process the kernel is still tearing down
    left = running_with(marker)
    for pid in left:  # do not leave them to the next test
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
    return left


@pytest.mark.timeout(600)
@pytest.mark.parametrize("cancel", [True, False], ids=["cancel", "timeout"])
@pytest.mark.parametrize("how", ["bubblewrap", "landlock"])
async def test_a_command_stopped_while_its_sandbox_starts_leaves_nothing_running(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, how: Mechanism, cancel: bool
) -> None:
    if not available(how):
        pytest.skip(f"{how} is not available on this machine")
    monkeypatch.setenv("ACP_SERVER_SANDBOX_WITH", how)
    box = Sandbox("workspace-write", (tmp_path,))
    try:
        survivors = [
            (delay, left)
            for i in range(TRIES)
            for delay in [DELAYS[i % len(DELAYS)]]
            if (left := await left_after_a_stop(box, tmp_path, delay, cancel))
        ]
    finally:
        box.close()
    assert survivors == [], f"{len(survivors)} of {TRIES} stops left processes running"
