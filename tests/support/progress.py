"""Waiting for work that takes as long as the machine makes it: wait while it progresses.

A real model on a busy machine is slow, not hung: a reply that takes 10 s on a quiet 2-core
machine took over 60 s while other jobs kept both cores busy, and a test with a fixed limit cut
the model server off mid-reply. So a test that waits on a real model waits for as long as the
processes doing the work (the agent, the model server, and everything they started) keep using
CPU, and fails only once they have been idle for `QUIET` seconds: a deadlock, a lost answer, a
process waiting on something that will never come. A process that spins for ever is ended by the
test's own time limit (pytest-timeout, `@pytest.mark.timeout`).

CPU time is read from /proc (Linux); elsewhere every process counts as working, and the test's
time limit is the only bound.
"""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import time
from collections.abc import Awaitable, Iterable, Sequence
from pathlib import Path
from typing import TypeVar

import pytest

T = TypeVar("T")
# Seconds with no CPU work before the processes count as hung; generous, since a process that
# is runnable but not running (the machine busy) does no work either.
QUIET = 120.0
# CPU seconds that count as work: more than an idle process's wake-ups over that time.
WORK = 0.1
PROC = Path("/proc")
TICKS = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


def _stat_rows() -> dict[int, tuple[int, float]]:
    """pid -> (parent pid, CPU seconds used) of every process we can read."""
    rows: dict[int, tuple[int, float]] = {}
    for entry in PROC.iterdir():
        if not entry.name.isdigit():
            continue
        try:
            text = (entry / "stat").read_text()
        except OSError:  # gone meanwhile
            continue
        fields = text[text.rindex(")") + 2 :].split()  # after "pid (name) "
        rows[int(entry.name)] = (int(fields[1]), (int(fields[11]) + int(fields[12])) / TICKS)
    return rows


def cpu_seconds(roots: Iterable[int]) -> float:
    """CPU time used so far by `roots` and every live process below them."""
    rows = _stat_rows()
    children: dict[int, list[int]] = {}
    for pid, (parent, _) in rows.items():
        children.setdefault(parent, []).append(pid)
    total, stack, seen = 0.0, [p for p in roots if p in rows], set[int]()
    while stack:
        pid = stack.pop()
        if pid in seen:
            continue
        seen.add(pid)
        total += rows[pid][1]
        stack += children.get(pid, [])
    return total


class Watch:
    """How long the processes under `roots` have done no work."""

    def __init__(self, roots: Sequence[int]) -> None:
        self.roots = list(roots)
        self.measured = PROC.is_dir()
        self.work = self._cpu()
        self.since = time.monotonic()

    def _cpu(self) -> float:
        return cpu_seconds(self.roots) if self.measured else 0.0

    def idle(self) -> float:
        """Seconds since the processes last did `WORK` CPU seconds (0 where it cannot tell)."""
        now = time.monotonic()
        work = self._cpu()
        # A child that exits takes its CPU time with it: any change of the total is activity.
        if not self.measured or abs(work - self.work) >= WORK:
            self.work, self.since = work, now
        return now - self.since

    def hung(self, what: str, quiet: float) -> str:
        return (
            f"{what}: no answer, and the processes doing the work ({self.roots} and their "
            f"children) did nothing for {quiet:.0f} s, so they are stuck rather than slow"
        )


async def while_working(
    work: Awaitable[T], roots: Sequence[int], *, what: str, quiet: float = QUIET
) -> T:
    """The result of `work`, waited for as long as the processes under `roots` keep working;
    the test fails (and `work` is cancelled) once they have been idle for `quiet` seconds."""
    task = asyncio.ensure_future(work)
    watch = Watch(roots)
    try:
        while True:
            done, _ = await asyncio.wait({task}, timeout=1.0)
            if done:
                return task.result()
            if watch.idle() > quiet:
                pytest.fail(watch.hung(what, quiet), pytrace=False)
    finally:
        task.cancel()


def run_while_working(
    argv: Sequence[str], *, what: str, quiet: float = QUIET, **popen: object
) -> subprocess.CompletedProcess[str]:
    """`subprocess.run(argv, capture_output=True, text=True, **popen)`, waited for as long as
    the command and its children keep working; killed (with the test failing) once they have
    been idle for `quiet` seconds."""
    with subprocess.Popen(
        list(argv),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,  # its own group, so what it started is killed with it
        **popen,  # type: ignore[call-overload]
    ) as proc:
        watch = Watch([proc.pid])
        while True:
            try:
                out, err = proc.communicate(timeout=1.0)
                break
            except subprocess.TimeoutExpired:
                if watch.idle() > quiet:
                    os.killpg(proc.pid, signal.SIGKILL)
                    out, err = proc.communicate(timeout=30)
                    pytest.fail(f"{watch.hung(what, quiet)}; stderr:\n{err[-3000:]}")
    return subprocess.CompletedProcess(list(argv), proc.returncode, out, err)
