"""command_output and stop_command: the model's handles on its background commands.

`run_command` with `background: true` starts one and answers with its id (see `shell`);
`command_output` reads what it printed since the last read (bounded, saying how much was
dropped) or, without an id, lists every background command of the session; `stop_command`
ends one. Neither asks for permission: they only touch commands the user already allowed.
"""

from __future__ import annotations

from typing import Any

from acp_server.markdown import inline_code
from acp_server.tools.base import (
    Presentation,
    Tool,
    ToolContext,
    ToolFailure,
    ToolOutcome,
    clip_end,
)
from acp_server.tools.commands.jobs import Chunk, Job, Jobs, UnknownJob

MODEL_MAX_CHARS = 16_000  # of one read, what the model sees (the newest part)
MAX_WAIT = 30.0


def _job(jobs: Jobs, args: dict[str, Any]) -> Job:
    try:
        return jobs.get(str(args.get("id") or ""))
    except UnknownJob as exc:
        raise ToolFailure(str(exc)) from exc


def _state(job: Job) -> str:
    status = job.status()
    return "running" if status is None else f"ended ({status})"


def render(job: Job, chunk: Chunk) -> str:
    """The status line and the new output, clipped to its newest part."""
    kept = clip_end(chunk.text, MODEL_MAX_CHARS)
    dropped = chunk.dropped + len(chunk.text) - len(kept)
    lines = [f"{job.id} {inline_code(job.command)}: {_state(job)}"]
    if dropped:
        lines.append(f"[… about {dropped} characters of output were dropped before this]")
    lines.append(kept.rstrip("\n") if kept.strip() else "(no new output)")
    return "\n".join(lines)


def listing(jobs: Jobs) -> str:
    found = jobs.all()
    if not found:
        return "No background commands in this session."
    return "Background commands:\n" + "\n".join(
        f"- {j.id} {inline_code(j.command)}: {_state(j)}" for j in found
    )


def _present_output(args: dict[str, Any], ctx: ToolContext) -> Presentation:
    job_id = args.get("id")
    return Presentation(f"Output of {job_id}" if job_id else "List background commands")


async def _command_output(args: dict[str, Any], ctx: ToolContext) -> ToolOutcome:
    if not args.get("id"):
        await ctx.jobs.refresh()
        return ToolOutcome(listing(ctx.jobs))
    job = _job(ctx.jobs, args)
    wait = min(float(args.get("wait_seconds") or 0), MAX_WAIT)
    chunk = await job.read(wait)
    return ToolOutcome(render(job, chunk), raw_output={"id": job.id, "exit": chunk.exit})


def _present_stop(args: dict[str, Any], ctx: ToolContext) -> Presentation:
    return Presentation(f"Stop {args.get('id') or 'a background command'}")


async def _stop_command(args: dict[str, Any], ctx: ToolContext) -> ToolOutcome:
    job = _job(ctx.jobs, args)
    await job.stop()
    chunk = await job.read(0)
    return ToolOutcome("Stopped. " + render(job, chunk), raw_output={"id": job.id})


COMMAND_OUTPUT = Tool(
    name="command_output",
    description=(
        "Read what a background command (run_command with `background`) printed since the "
        "last read, and whether it still runs; `wait_seconds` waits for new output first. "
        "Without `id`: list the background commands."
    ),
    kind="read",
    effect="read",
    present=_present_output,
    run=_command_output,
)

STOP_COMMAND = Tool(
    name="stop_command",
    description="Stop a background command (and every process it started) by its id.",
    kind="execute",
    effect="read",
    present=_present_stop,
    run=_stop_command,
)
