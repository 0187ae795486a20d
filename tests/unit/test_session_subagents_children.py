"""Subagents in process: the tools a child may get, a job run to its answer with a history of
its own, and at most `MAX_PARALLEL` children of one parent at once."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

from acp_server.backends import Backend
from acp_server.backends.scripted import ScriptedBackend
from acp_server.editor_api import NoEditor
from acp_server.messages import Event, Finish, ModelRequest, TextDelta
from acp_server.permissions import Permissions, Permit, RuleStore
from acp_server.session.subagents.children import MAX_PARALLEL, Parent, Subagents
from acp_server.settings import Settings
from acp_server.store.transcript import NullRecorder
from acp_server.tools.base import ToolContext, ToolOutcome
from acp_server.tools.defaults import default_tools
from acp_server.tools.task import Job, task_tool
from acp_server.tools.toolbox import Toolbox


class Refusing:
    async def run(self, job: Job, ctx: ToolContext) -> ToolOutcome:
        raise AssertionError("a child never gets the task tool")


def parent(tmp_path: Path, backend: Backend, shown: list[Any]) -> Subagents:
    permissions = Permissions(RuleStore(tmp_path, tmp_path / "data"), "ask")
    tools = [*default_tools(), task_tool(Refusing())]  # task: the parent's own, never a child's
    lent = Parent(
        "sess_parent",
        (tmp_path,),
        Settings(),
        permissions,
        NoEditor(),
        lambda session_id, update: shown.append((session_id, update)),
        NullRecorder(),
    )
    toolbox = Toolbox(
        tools, cwd=tmp_path, roots=(tmp_path,), client=NoEditor(), permissions=permissions
    )
    return Subagents(lent, lambda: backend, lambda: toolbox)


async def no_permit(request: Permit) -> None: ...


def ctx(tmp_path: Path, emitted: list[Any], call_id: str = "call_task") -> ToolContext:
    return ToolContext(call_id, tmp_path, (tmp_path,), NoEditor(), emitted.append, no_permit)


async def test_a_child_gets_only_tools_the_parent_has_and_never_task(tmp_path: Path) -> None:
    subagents = parent(tmp_path, ScriptedBackend.from_rounds([]), [])
    for names in (("read_file", "task"), ("teleport",)):
        outcome = await subagents.run(Job("c", "t", "p", names), ctx(tmp_path, []))
        assert not outcome.ok and "No subagent was started" in outcome.text
        assert "read_file" in outcome.text and "'task'" not in outcome.text.split("use:")[1]


async def test_a_job_runs_in_a_history_of_its_own_and_answers(tmp_path: Path) -> None:
    (tmp_path / "notes.txt").write_text("alpha\n", encoding="utf-8")
    read = {"tool_calls": [{"name": "read_file", "arguments": {"path": "notes.txt"}}]}
    backend = ScriptedBackend.from_rounds([read, {"text": "It begins with alpha."}])
    shown: list[Any] = []
    emitted: list[Any] = []
    subagents = parent(tmp_path, backend, shown)
    outcome = await subagents.run(
        Job("call_task", "Read", "Read notes.txt."), ctx(tmp_path, emitted)
    )
    assert outcome.ok and outcome.text == "It begins with alpha."
    first, second = backend.requests
    assert [m.role for m in first.messages] == ["user"]
    assert first.system.startswith("You are a subagent")
    assert {t.name for t in first.tools} == {"read_file", "grep", "glob", "list_directory"}
    assert "alpha" in second.messages[-1].text
    assert shown == []  # without the opt-in nothing goes out under another session id
    assert {u["toolCallId"] for u in emitted} == {"call_task"}  # progress in the parent's call
    assert "Read notes.txt: done" in outcome.content[0]["content"]["text"]  # type: ignore[index]


class Gate:
    """A backend whose rounds wait until released, counting how many wait at once."""

    label = "gate"

    def __init__(self) -> None:
        self.open = asyncio.Event()
        self.waiting = 0
        self.most = 0

    async def context_window(self) -> int | None:
        return None

    async def stream(self, request: ModelRequest) -> AsyncIterator[Event]:
        self.waiting += 1
        self.most = max(self.most, self.waiting)
        await self.open.wait()
        self.waiting -= 1
        yield TextDelta("done")
        yield Finish("stop")


async def test_at_most_max_parallel_children_run_at_once(tmp_path: Path) -> None:
    gate = Gate()
    subagents = parent(tmp_path, gate, [])
    jobs = [
        asyncio.create_task(subagents.run(Job(f"c{n}", "t", "p"), ctx(tmp_path, [], f"c{n}")))
        for n in range(MAX_PARALLEL + 2)
    ]
    for _ in range(50):
        await asyncio.sleep(0)
    assert gate.waiting == MAX_PARALLEL
    gate.open.set()
    outcomes = await asyncio.gather(*jobs)
    assert gate.most == MAX_PARALLEL and all(o.text == "done" for o in outcomes)


async def test_cancel_ends_only_the_named_child(tmp_path: Path) -> None:
    gate = Gate()
    subagents = parent(tmp_path, gate, [])
    emitted: list[Any] = []
    job = asyncio.create_task(subagents.run(Job("c", "t", "p"), ctx(tmp_path, emitted)))
    for _ in range(20):
        await asyncio.sleep(0)
    assert not subagents.cancel("sess_unknown")
    (child_id,) = subagents.running
    assert subagents.cancel(child_id)
    outcome = await job
    assert not outcome.ok and "cancelled this subagent" in outcome.text
