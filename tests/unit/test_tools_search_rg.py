"""Running ripgrep: finding the binary, and never leaving it running once the caller stops or is
cancelled (checked against the real process table)."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from pathlib import Path

import pytest

from acp_server.tools.base import ToolFailure
from acp_server.tools.search.glob import GREP
from acp_server.tools.search.rg import RG_ENV, rg_binary, stream
from tests.support.search_engines import Harness, tree


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def test_the_packaged_rg_is_found_and_the_switch_turns_it_off(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv(RG_ENV, "")
    found = rg_binary()
    assert found is not None
    version = subprocess.run([found, "--version"], capture_output=True, text=True, check=True)
    assert version.stdout.startswith("ripgrep 14.")
    monkeypatch.setenv(RG_ENV, "off")
    assert rg_binary() is None
    monkeypatch.setenv(RG_ENV, "/opt/rg")
    assert rg_binary() == "/opt/rg"


async def test_stopping_early_kills_the_process(tmp_path: Path) -> None:
    taken: list[bytes] = []

    def take(record: bytes) -> bool:
        taken.append(record)
        return len(taken) < 10

    endless = [sys.executable, "-c", "while True: print('y', flush=True)"]
    run = await asyncio.wait_for(stream(endless, tmp_path, take), 10)
    assert run.stopped and len(taken) == 10 and run.code != 0


async def test_cancelling_grep_kills_rg(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A stand-in rg that records its pid and hangs: the cancelled call leaves no process."""
    pidfile = tmp_path / "pid"
    fake = tmp_path / "rg"
    fake.write_text(f"#!/bin/sh\necho $$ > {pidfile}\nexec sleep 60\n")
    fake.chmod(0o755)
    monkeypatch.setenv(RG_ENV, str(fake))
    tree(tmp_path / "project", {"a.txt": "needle\n"})
    task = asyncio.create_task(Harness(tmp_path / "project").run(GREP, pattern="needle"))
    while not pidfile.exists() or not pidfile.read_text().strip():
        await asyncio.sleep(0.01)
    pid = int(pidfile.read_text())
    assert alive(pid)
    task.cancel()
    done, _ = await asyncio.wait([task], timeout=10)  # not the minute the stand-in would take
    assert done and task.cancelled()
    assert not alive(pid)


async def test_an_rg_that_cannot_run_is_a_clear_failure(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(RG_ENV, str(tmp_path / "no-such-rg"))
    with pytest.raises(ToolFailure, match=r"Cannot run ripgrep .*ACP_SERVER_RG.*`off`"):
        await Harness(tmp_path).run(GREP, pattern="x")
