"""Background commands as local process groups: bounded output read in pieces, and stopped as a
whole; and what is new in an editor terminal's output."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

from acp_server.tools.commands.background import LocalJob, TerminalJob, new_part
from acp_server.tools.commands.procgroup import group_alive
from tests.support.fake_editor import FakeEditor, InProcessClient


async def start(command: str, tmp_path: Path, limit: int = 64 * 1024) -> LocalJob:
    job = LocalJob("bg_1", command, None, False, limit)
    await job.begin(tmp_path, dict(os.environ))
    return job


async def test_output_is_read_in_pieces_and_the_end_is_reported(tmp_path: Path) -> None:
    job = await start("echo one; sleep 0.5; echo two", tmp_path)
    first = await job.read(5)
    assert first.text == "one\n" and first.exit is None
    second = await job.read(5)
    assert second.text == "two\n"
    for _ in range(50):
        if job.status():
            break
        await asyncio.sleep(0.05)
    assert job.status() == "exit code 0"
    assert (await job.read(0)).text == ""


async def test_output_is_bounded_and_the_drop_is_counted(tmp_path: Path) -> None:
    job = await start("head -c 10000 /dev/zero | tr '\\0' x; sleep 5", tmp_path, limit=1000)
    await asyncio.sleep(0.5)
    chunk = await job.read(0)
    assert len(chunk.text) == 1000 and chunk.dropped == 9000
    await job.stop()


async def test_stop_ends_the_whole_group(tmp_path: Path) -> None:
    job = await start("sleep 60 & sleep 60; wait", tmp_path)
    assert job._proc is not None
    pgid = job._proc.pid
    assert group_alive(pgid)
    await job.stop()
    assert not group_alive(pgid)
    assert job.status() is not None and "SIGTERM" in str(job.status())


def test_new_part_of_a_terminal_output() -> None:
    assert new_part("", "a\n") == ("a\n", 0)
    assert new_part("a\n", "a\nb\n") == ("b\n", 0)
    # The editor dropped the beginning: the end of what was seen anchors the new part.
    before = "x" * 300 + "y" * 300 + "seen-end\n"
    assert new_part(before, before[250:] + "new\n") == ("new\n", 0)
    text, lost = new_part("old output nowhere to be found", "fresh\n")
    assert text == "fresh\n" and lost > 0


async def terminal_job(command: str) -> tuple[TerminalJob, FakeEditor]:
    editor = FakeEditor()
    client = InProcessClient(editor)
    terminal_id = await client.create_terminal("/bin/sh", ["-c", command], "/", 65536, [])
    return TerminalJob("bg_1", command, None, False, client, terminal_id), editor


async def test_a_terminal_that_ended_is_released_once_read_to_its_end() -> None:
    job, editor = await terminal_job("echo one; sleep 0.3; echo two")
    first = await job.read(5)
    assert first.text == "one\n" and first.exit is None
    assert editor.unreleased() == ["term_1"]
    await asyncio.sleep(0.6)
    last = await job.read(5)
    assert last.text == "two\n" and last.exit == "exit code 0"
    assert editor.unreleased() == []  # the editor keeps showing it; the id is freed
    await editor.close()


async def test_stopping_a_terminal_keeps_its_last_output_for_the_next_read() -> None:
    job, editor = await terminal_job("echo started; sleep 60")
    await asyncio.sleep(0.3)
    await job.stop()
    assert editor.running() == [] and editor.unreleased() == []
    chunk = await job.read(0)
    assert chunk.text == "started\n" and chunk.exit == "killed by SIGKILL"
    await editor.close()
