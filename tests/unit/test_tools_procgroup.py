"""run_in_group: exit status, signal, timeout and the kept end of the output, for any argv."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from acp_server.tools.procgroup import run_in_group

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
