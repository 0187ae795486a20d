"""The `task` tool: its arguments read into a `Job` (read-only tools by default), the title
shown, and the child's answer bounded as the parent gets it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from acp_server import schemas
from acp_server.editor_api import NoEditor
from acp_server.permissions import Permit
from acp_server.tools.base import ToolContext, ToolOutcome
from acp_server.tools.task import ANSWER_CHARS, DEFAULT_TOOLS, Job, answer_text, task_tool


class Recording:
    def __init__(self) -> None:
        self.jobs: list[Job] = []

    async def run(self, job: Job, ctx: ToolContext) -> ToolOutcome:
        self.jobs.append(job)
        return ToolOutcome("the answer")


async def no_permit(request: Permit) -> None:
    raise AssertionError("the task tool asks nothing itself")


def context() -> ToolContext:
    return ToolContext("call_1", Path("/p"), (Path("/p"),), NoEditor(), lambda _: None, no_permit)


async def test_the_arguments_become_a_job_with_read_only_tools_by_default() -> None:
    delegate = Recording()
    tool = task_tool(delegate)
    args: dict[str, Any] = {"description": " Find\n callers ", "prompt": "Find callers of X."}
    assert schemas.problems("tools/task.json", args) == []
    outcome = await tool.run(args, context())
    assert outcome.text == "the answer"
    assert delegate.jobs == [Job("call_1", "Find callers", "Find callers of X.", DEFAULT_TOOLS)]
    await tool.run({**args, "tools": ["grep", "run_command"]}, context())
    assert delegate.jobs[-1].tools == ("grep", "run_command")
    assert tool.present(args, context()).title == "Subagent: Find callers"
    assert tool.effect == "think"  # the job is not gated; each of the child's calls is


def test_the_schema_refuses_a_job_without_a_prompt_or_with_unknown_fields() -> None:
    assert schemas.problems("tools/task.json", {"description": "x"})
    assert schemas.problems("tools/task.json", {"description": "x", "prompt": "y", "model": "z"})


def test_an_answer_is_bounded_and_an_empty_one_says_so() -> None:
    long = ("line of the answer\n" * 1000).strip()
    clipped = answer_text(long)
    assert len(clipped) < ANSWER_CHARS + 100 and "answer truncated" in clipped
    assert answer_text("  short  ") == "short"
    assert answer_text("") == "(The subagent gave no answer.)"
