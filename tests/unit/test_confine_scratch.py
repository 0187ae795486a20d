"""The sandbox's private temp dirs: a folder a killed server left behind is removed by the next
sweep, and nothing else is: not a live server's, not another user's, not what a link points
to, not a FIFO or a file named like one. Every test works in its own temp dir (`tmp_path`),
never the system's, and has a stale folder of ours that must go, so that it fails without a
sweep too."""

from __future__ import annotations

import fcntl
import os
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from acp_server.confine import scratch

# A server in miniature: makes its sandbox policy (and so its temp dir) the way a session does,
# in the temp dir TMPDIR names, lets its own sweep finish (so that it is over before the test
# leaves anything stale), says where, and runs until it is killed.
SERVER = """
import sys, threading
from acp_server.confine import sandbox
policy = sandbox.policy_for("read-only", (), None)
for thread in threading.enumerate():
    if thread.name == "scratch-sweep":
        thread.join()
print(policy.tmp, flush=True)
sys.stdin.read()
"""
DAY = 24 * 3600.0
Start = Callable[[int], list["Server"]]


class Server:
    """A child process holding a temp dir made by the product code in `parent`."""

    def __init__(self, parent: Path) -> None:
        env = {**os.environ, "TMPDIR": str(parent)}
        self.proc = subprocess.Popen(
            [sys.executable, "-c", SERVER], stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=env
        )
        assert self.proc.stdout is not None
        self.folder = Path(self.proc.stdout.readline().decode().strip())
        assert self.folder.parent == parent and self.folder.is_dir(), self.folder

    def kill(self) -> None:
        self.proc.kill()
        self.proc.wait()
        for stream in (self.proc.stdin, self.proc.stdout):
            assert stream is not None
            stream.close()


@pytest.fixture
def temp(tmp_path: Path) -> Path:
    """The temp dir of the test's servers and sweeps (the test's data folders are beside it)."""
    folder = tmp_path / "tmp"
    folder.mkdir()
    return folder


@pytest.fixture
def servers(temp: Path) -> Iterator[Start]:
    """Start n servers in `temp`, all before the test kills any (each one's own sweep would
    otherwise remove what the test left stale before the test's sweep could)."""
    running: list[Server] = []

    def start(n: int) -> list[Server]:
        running.extend(Server(temp) for _ in range(n))
        return running[-n:]

    yield start
    for server in running:
        if server.proc.poll() is None:
            server.kill()


def killed(server: Server) -> Path:
    """The folder of a server killed with SIGKILL (no cleanup ran)."""
    server.kill()
    assert server.folder.is_dir() and lock_of(server.folder).is_file()
    return server.folder


def lock_of(folder: Path) -> Path:
    return folder.with_name(folder.name + ".lock")


def aged(path: Path, seconds: float) -> Path:
    then = time.time() - seconds
    os.utime(path, (then, then), follow_symlinks=False)
    return path


def test_a_killed_servers_folder_is_removed_by_the_next_sweep(temp: Path, servers: Start) -> None:
    (server,) = servers(1)
    folder = killed(server)
    (folder / "sub").mkdir()
    (folder / "sub" / "left.txt").write_text("a command's temp file\n", encoding="utf-8")
    assert scratch.sweep(temp) == [folder.name]
    assert not folder.exists() and not lock_of(folder).exists()
    assert list(temp.iterdir()) == []


def test_a_live_servers_folder_is_kept(temp: Path, servers: Start) -> None:
    first, live = servers(2)
    stale = killed(first)
    with open(lock_of(live.folder), "rb") as lock, pytest.raises(BlockingIOError):
        fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)  # its server holds it
    aged(live.folder, 2 * DAY)  # untouched for long is no reason when the lock is held
    assert scratch.sweep(temp) == [stale.name]
    assert live.folder.is_dir() and lock_of(live.folder).is_file()


def test_the_first_folder_a_process_makes_sweeps_the_rest(temp: Path, servers: Start) -> None:
    (server,) = servers(1)
    stale = killed(server)
    mine = scratch.make(str(temp))
    try:
        deadline = time.monotonic() + 10
        while (stale.exists() or lock_of(stale).exists()) and time.monotonic() < deadline:
            time.sleep(0.01)  # the folder goes first, then its lock file
        assert not stale.exists() and not lock_of(stale).exists()
        assert mine.is_dir() and lock_of(mine).is_file()  # its own sweep kept it
    finally:
        scratch.remove(mine)
    assert not mine.exists() and not lock_of(mine).exists()


def test_a_folder_from_before_lock_files_goes_once_a_day_old(temp: Path) -> None:
    old = temp / "acp-sandbox-old1234"
    old.mkdir()
    (old / "f").write_text("x", encoding="utf-8")
    aged(old, 2 * DAY)
    recent = temp / "acp-sandbox-new1234"
    recent.mkdir()
    assert scratch.sweep(temp) == [old.name]
    assert recent.is_dir()


@pytest.mark.skipif(os.geteuid() != 0, reason="giving a folder to another user needs root")
def test_another_users_folder_is_kept(temp: Path, servers: Start) -> None:
    first, second, third = servers(3)
    stale = killed(first)
    theirs = killed(second)  # a server of theirs, killed: its lock is free
    os.chown(theirs, 4321, 4321)
    os.chown(lock_of(theirs), 4321, 4321)
    legacy = temp / "acp-sandbox-theirs1"
    legacy.mkdir()
    os.chown(aged(legacy, 2 * DAY), 4321, 4321)
    mixed = killed(third)  # our folder, but a lock file of theirs beside it
    os.chown(lock_of(mixed), 4321, 4321)
    assert scratch.sweep(temp) == [stale.name]
    for kept in (theirs, lock_of(theirs), legacy, mixed, lock_of(mixed)):
        assert kept.exists(), kept


def test_a_link_named_like_a_folder_is_not_followed(temp: Path, servers: Start) -> None:
    first, second = servers(2)
    stale = killed(first)
    outside = temp / "outside"
    outside.mkdir()
    (outside / "precious.txt").write_text("keep me\n", encoding="utf-8")
    link = temp / "acp-sandbox-link1"
    link.symlink_to(outside)
    lock_of(link).touch()  # a free lock beside it: only the link itself may stop the sweep
    aged(link, 2 * DAY)
    old_link = temp / "acp-sandbox-link2"  # and one that would pass for an old folder
    old_link.symlink_to(outside)
    aged(old_link, 2 * DAY)
    decoy = killed(second)  # a real folder whose lock file is a link elsewhere
    target = temp / "lock-target"
    target.touch()
    lock_of(decoy).unlink()
    lock_of(decoy).symlink_to(target)
    assert scratch.sweep(temp) == [stale.name]
    assert (outside / "precious.txt").read_text(encoding="utf-8") == "keep me\n"
    assert link.is_symlink() and old_link.is_symlink() and target.is_file() and decoy.is_dir()


@pytest.mark.timeout(20)
def test_fifos_and_files_named_like_ours_are_left_alone(temp: Path, servers: Start) -> None:
    first, second = servers(2)
    stale = killed(first)
    fifo = temp / "acp-sandbox-fifo1"
    os.mkfifo(fifo)
    plain = temp / "acp-sandbox-file1"
    plain.write_text("not a folder\n", encoding="utf-8")
    for path in (fifo, plain):
        aged(path, 2 * DAY)
    blocked = killed(second)  # a folder whose "lock file" is a FIFO: opening it
    lock_of(blocked).unlink()  # for reading would wait for ever for a writer
    os.mkfifo(lock_of(blocked))
    aged(blocked, 2 * DAY)
    assert scratch.sweep(temp) == [stale.name]
    assert fifo.exists() and plain.read_text(encoding="utf-8") == "not a folder\n"
    assert blocked.is_dir() and lock_of(blocked).exists()


def test_a_lock_file_left_alone_is_removed(temp: Path, servers: Start) -> None:
    """A server killed between removing its folder and its lock file."""
    (server,) = servers(1)
    folder = killed(server)
    folder.rmdir()
    assert scratch.sweep(temp) == []
    assert list(temp.iterdir()) == []


def test_a_sweep_stops_at_its_limit(temp: Path) -> None:
    for n in range(5):
        (temp / f"acp-sandbox-{n}").mkdir()
        aged(temp / f"acp-sandbox-{n}", 2 * DAY)
    assert len(scratch.sweep(temp, limit=2)) == 2
    assert len(list(temp.iterdir())) == 3
    assert len(scratch.sweep(temp)) == 3
