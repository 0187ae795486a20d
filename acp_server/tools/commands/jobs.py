"""The background commands of one session: what is running, under which id, and ending them.

A background command (`run_command` with `background: true`) outlives the tool call that
started it, so it belongs to the session, not the call. This registry gives each one a short id
(`bg_1`, `bg_2`, …) the model uses to read and stop it, lists them all, and ends them: on
`session/close`, on a cancel of the turn that started one that asked for it (`stop_on_cancel`),
and at agent exit: on SIGTERM, `close_everywhere` stops every session's commands while the
editor can still answer (its terminals need terminal/kill and terminal/release), and
`background.end_all` ends the local groups whatever happens. How a command runs (a local
process group or an editor terminal) is `background`'s business; this module knows only `Job`.
"""

from __future__ import annotations

import asyncio
import logging
import weakref
from dataclasses import dataclass

log = logging.getLogger(__name__)

MAX_RUNNING = 8  # background commands running at once in one session
MAX_KEPT = 32  # finished ones still listed (the oldest are forgotten)


@dataclass(frozen=True)
class Chunk:
    """What a background command printed since the last read."""

    text: str
    dropped: int  # characters of new output that were not kept (the buffer is bounded)
    exit: str | None  # how it ended ("exit code 0", "killed by SIGTERM"); None: still running


class Job:
    """One background command. `background` provides the kinds (local, editor terminal)."""

    def __init__(self, job_id: str, command: str, owner: object, stop_on_cancel: bool) -> None:
        self.id = job_id
        self.command = command
        self.owner = owner  # the turn that started it
        self.stop_on_cancel = stop_on_cancel

    def status(self) -> str | None:
        """How it ended; None while it runs."""
        raise NotImplementedError

    async def read(self, wait: float) -> Chunk:
        """The output since the last read, after waiting up to `wait` seconds for some."""
        raise NotImplementedError

    async def stop(self) -> None:
        """End it (its whole process group, or its terminal) and free what it holds."""
        raise NotImplementedError

    async def refresh(self) -> None:
        """Bring `status` up to date where it is only learned by asking (an editor terminal)."""


class UnknownJob(LookupError):
    """No background command has that id; the message lists the ones there are."""


class Jobs:
    def __init__(self) -> None:
        self._jobs: dict[str, Job] = {}
        self._count = 0
        self._stopping: set[asyncio.Task[None]] = set()
        _everywhere.add(self)

    def next_id(self) -> str:
        """The id for the next command, once there is room for one more (else LookupError)."""
        running = [j for j in self._jobs.values() if j.status() is None]
        if len(running) >= MAX_RUNNING:
            raise LookupError(
                f"{len(running)} background commands are already running (at most "
                f"{MAX_RUNNING}); stop one with stop_command first."
            )
        self._count += 1
        return f"bg_{self._count}"

    def add(self, job: Job) -> None:
        self._jobs[job.id] = job
        finished = [j.id for j in self._jobs.values() if j.status() is not None]
        for old in finished[: max(0, len(finished) - MAX_KEPT)]:
            del self._jobs[old]

    def get(self, job_id: str) -> Job:
        job = self._jobs.get(job_id.strip())
        if job is None:
            known = ", ".join(self._jobs) or "none"
            raise UnknownJob(f"No background command {job_id!r}; the ones there are: {known}.")
        return job

    def all(self) -> list[Job]:
        return list(self._jobs.values())

    async def refresh(self) -> None:
        """Learn which of the running commands have ended meanwhile."""
        await asyncio.gather(*(j.refresh() for j in self._jobs.values() if j.status() is None))

    def turn_cancelled(self, turn: object) -> None:
        """The turn was cancelled: stop the commands it started with `stop_on_cancel`."""
        for job in self._jobs.values():
            if job.owner is turn and job.stop_on_cancel and job.status() is None:
                task = asyncio.ensure_future(job.stop())
                self._stopping.add(task)
                task.add_done_callback(self._stopping.discard)

    async def close(self) -> None:
        """Stop every command still running (the session goes)."""
        running = [j for j in self._jobs.values() if j.status() is None]
        if running:
            log.info("stopping %d background command(s)", len(running))
        results = await asyncio.gather(*(j.stop() for j in running), return_exceptions=True)
        for job, result in zip(running, results, strict=True):
            if isinstance(result, BaseException):
                log.warning("stopping background command %s failed: %s", job.id, result)
        await asyncio.gather(*self._stopping, return_exceptions=True)


_everywhere: weakref.WeakSet[Jobs] = weakref.WeakSet()  # every session's, for the exit


async def close_everywhere(seconds: float) -> None:
    """Stop the background commands of every session, within `seconds` (the agent is going)."""
    registries = list(_everywhere)
    if registries:
        await asyncio.wait([asyncio.ensure_future(j.close()) for j in registries], timeout=seconds)
