"""The session's background commands: ids, the running limit, cancel and close."""

from __future__ import annotations

import asyncio

import pytest

from acp_server.tools.commands import jobs as jobs_module
from acp_server.tools.commands.jobs import Chunk, Job, Jobs, UnknownJob


class FakeJob(Job):
    def __init__(self, job_id: str, owner: object = None, stop_on_cancel: bool = False) -> None:
        super().__init__(job_id, "cmd", owner, stop_on_cancel)
        self.stopped = False

    def status(self) -> str | None:
        return "stopped" if self.stopped else None

    async def read(self, wait: float) -> Chunk:
        return Chunk("", 0, self.status())

    async def stop(self) -> None:
        self.stopped = True


def test_ids_and_the_running_limit(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(jobs_module, "MAX_RUNNING", 2)
    jobs = Jobs()
    for _ in range(2):
        jobs.add(FakeJob(jobs.next_id()))
    with pytest.raises(LookupError, match="already running"):
        jobs.next_id()
    assert [j.id for j in jobs.all()] == ["bg_1", "bg_2"]
    with pytest.raises(UnknownJob, match="bg_1, bg_2"):
        jobs.get("bg_9")


async def test_a_cancel_stops_only_what_asked_for_it_in_that_turn() -> None:
    turn, other = object(), object()
    jobs = Jobs()
    asked, kept, elsewhere = (
        FakeJob("bg_1", turn, True),
        FakeJob("bg_2", turn),
        FakeJob("bg_3", other, True),
    )
    for job in (asked, kept, elsewhere):
        jobs.add(job)
    jobs.turn_cancelled(turn)
    await asyncio.sleep(0)  # the stops run as tasks: the cancel itself must not wait
    assert asked.stopped and not kept.stopped and not elsewhere.stopped


async def test_close_stops_everything() -> None:
    jobs = Jobs()
    both = [FakeJob("bg_1"), FakeJob("bg_2")]
    for job in both:
        jobs.add(job)
    await jobs.close()
    assert all(j.stopped for j in both)
