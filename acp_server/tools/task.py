"""The `task` tool: the model hands a self-contained job to a subagent and gets its answer.

A subagent is a child session with its own history and context budget (`session.subagents`
runs it); the parent writes its whole prompt and picks its tools by name, read-only ones by
default. Only the child's final answer, clipped to `ANSWER_CHARS`, comes back as this call's
result: a long exploration no longer eats the parent's context, and the parent never sees the
child's transcript. This module knows nothing of sessions: it reads the arguments into a `Job`
and asks the `Delegate` it was made with.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol

from acp_server.tools.base import Presentation, Tool, ToolContext, ToolOutcome, clip

NAME = "task"
DEFAULT_TOOLS = ("read_file", "grep", "glob", "list_directory")
ANSWER_CHARS = 8_000


@dataclass(frozen=True)
class Job:
    """What the parent asked: a title for the user, the child's prompt, its tools by name."""

    call_id: str  # the parent's tool call
    title: str
    prompt: str
    tools: tuple[str, ...] = DEFAULT_TOOLS


class Delegate(Protocol):
    """Runs a job in a child session; its outcome's text is the child's final answer."""

    async def run(self, job: Job, ctx: ToolContext) -> ToolOutcome: ...


def answer_text(answer: str) -> str:
    """The child's answer as the parent gets it: bounded, saying when it was cut."""
    return clip(answer.strip(), ANSWER_CHARS, "answer") or "(The subagent gave no answer.)"


def task_tool(delegate: Delegate) -> Tool:
    """The `task` tool of one session, run by `delegate`."""

    async def run(arguments: dict[str, Any], ctx: ToolContext) -> ToolOutcome:
        tools = arguments.get("tools")
        job = Job(
            ctx.call_id,
            " ".join(arguments["description"].split()),
            arguments["prompt"],
            tuple(tools) if tools else DEFAULT_TOOLS,
        )
        return await delegate.run(job, ctx)

    def present(arguments: dict[str, Any], ctx: ToolContext) -> Presentation:
        title = " ".join(str(arguments.get("description") or "a job").split())
        return Presentation(f"Subagent: {title}")

    return Tool(
        name=NAME,
        description=(
            "Delegate a self-contained job to a subagent with a fresh context, e.g. 'find every "
            "caller of parse_config and summarise how each uses it'. It sees nothing of this "
            "conversation: write the whole job in `prompt`, with what its answer must contain. "
            "You get only its final answer, so use it for exploration that would otherwise "
            "fill this conversation. By default it may only read and search; name `tools` to "
            "allow others (it still asks the user as you would)."
        ),
        kind="think",
        effect="think",  # the job itself touches nothing; each of the child's calls is gated
        present=present,
        run=run,
    )
