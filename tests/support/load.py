"""Helpers of the load tests (tests/e2e/test_load_*.py): what a server process holds, seen from
outside through /proc, and a router that splits one connection's frames by session.

`ProcessUsage.of(pid)` reads the resident memory (VmRSS), threads (/proc/PID/task), open file
descriptors (/proc/PID/fd) and living descendants (every process whose parent chain leads to
PID, and every process still in a process group one of them led) of a process. Linux only, as
the CI machine is.

`Router` reads a `RawServer`'s frames in one task and files them: session/update notifications
under their session id, answers under their request id, so that fifty sessions can be driven
at once on one connection, each waiting only for its own frames.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tests.support.raw import Frame, RawServer

PROC = Path("/proc")


@dataclass(frozen=True)
class ProcessUsage:
    rss_kib: int
    threads: int
    fds: int
    descendants: tuple[int, ...]

    @classmethod
    def of(cls, pid: int) -> ProcessUsage:
        return cls(rss_kib(pid), threads(pid), fds(pid), descendants(pid))

    def describe(self) -> str:
        return (
            f"RSS {self.rss_kib / 1024:.1f} MiB, {self.threads} threads, {self.fds} fds, "
            f"{len(self.descendants)} descendant processes"
        )


def rss_kib(pid: int) -> int:
    """The resident set size of `pid` in KiB (VmRSS of /proc/PID/status)."""
    for line in (PROC / str(pid) / "status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    raise AssertionError(f"/proc/{pid}/status has no VmRSS line")


def threads(pid: int) -> int:
    return len(list((PROC / str(pid) / "task").iterdir()))


def fds(pid: int) -> int:
    return len(list((PROC / str(pid) / "fd").iterdir()))


def _stat(pid: str) -> tuple[int, int] | None:
    """(parent pid, process group) of a process, None when it is gone."""
    try:
        text = (PROC / pid / "stat").read_text()
    except OSError:
        return None
    fields = text[text.rindex(")") + 2 :].split()  # the command name may hold spaces
    if fields[0] == "Z":  # a zombie holds nothing but its exit status
        return None
    return int(fields[1]), int(fields[2])


def alive(pid: int) -> bool:
    """Whether `pid` still runs (a zombie only waits to be reaped)."""
    return _stat(str(pid)) is not None


def started_pids(folder: Path) -> list[int]:
    """The pids commands wrote to `pid-*` files in `folder` (`echo $$ > pid-N`)."""
    texts = (path.read_text().strip() for path in folder.glob("pid-*"))
    return [int(text) for text in texts if text]


def descendants(pid: int) -> tuple[int, ...]:
    """Processes started under `pid` that still run: its descendants, and whatever is left in a
    process group one of them leads (a command run in its own group whose shell exited)."""
    table = {int(p): s for p in os.listdir(PROC) if p.isdigit() and (s := _stat(p)) is not None}
    found: set[int] = set()
    grew = True
    while grew:
        grew = False
        for child, (parent, _group) in table.items():
            if child not in found and (parent == pid or parent in found):
                found.add(child)
                grew = True
    groups = {child for child in found if table[child][1] == child}
    found |= {p for p, (_parent, group) in table.items() if group in groups}
    return tuple(sorted(found))


class Router:
    """Files one connection's frames by session id and by request id."""

    def __init__(self, server: RawServer) -> None:
        self.server = server
        self.updates: dict[str, list[dict[str, Any]]] = defaultdict(list)
        self.answers: dict[Any, Frame] = {}
        self.requests: list[Frame] = []  # the agent's requests to the client, in order
        # Where each frame came in the stream: the updates of each session, and each answer.
        self.update_at: dict[str, list[int]] = defaultdict(list)
        self.answer_at: dict[Any, int] = {}
        self._count = 0
        self._changed = asyncio.Condition()
        self._task = asyncio.create_task(self._run())

    async def _run(self) -> None:
        while True:
            frame = await self.server.frames.get()
            self._count += 1
            if frame.get("method") == "session/update":
                params = frame["params"]
                self.updates[params["sessionId"]].append(params["update"])
                self.update_at[params["sessionId"]].append(self._count)
            elif "method" in frame:
                self.requests.append(frame)
            else:
                self.answers[frame.get("id")] = frame
                self.answer_at[frame.get("id")] = self._count
            async with self._changed:
                self._changed.notify_all()

    async def wait_for(self, check: Any, timeout: float = 30) -> None:
        """Until `check()` is true (checked after every frame)."""
        async with asyncio.timeout(timeout), self._changed:
            await self._changed.wait_for(check)

    async def answer(self, req_id: Any, timeout: float = 30) -> Frame:
        await self.wait_for(lambda: req_id in self.answers, timeout)
        return self.answers[req_id]

    async def request(self, method: str, params: Any, timeout: float = 30) -> Frame:
        return await self.answer(await self.server.call(method, params), timeout)

    async def close(self) -> None:
        self._task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await self._task
