"""run_command: a shell command line, in an editor terminal when the client offers one, else as a
local subprocess.

Either way the command runs as `/bin/sh -c <command line>`. The model writes POSIX shell, and
the user's own $SHELL (fish, nushell, a zsh with a heavy rc file) would parse it differently or
print banners into the output. A command never outlives its call: on a timeout or a cancel the
editor terminal is killed and released, and a local command runs in a process group of its own
(see `procgroup`) which is stopped as a whole, so `server &` or a pipeline cannot leave
processes behind.

Commands get an allowlisted environment (`confine.command_env`): PATH, HOME, the locale and a
few more, and the names the user lists in the configuration file, never the agent's API keys
or other tokens: `env` would show them to the model. A local command's environment is built
that way; an editor terminal inherits the editor's environment, and ACP's terminal/create can
only set variables, not remove them, so its command line starts with `keep_env.py`, which drops
the rest before the command starts.
"""

from __future__ import annotations

import asyncio
import os
from dataclasses import replace
from pathlib import Path
from typing import Any

from acp_server.confine.command_env import command_environment, terminal_argv
from acp_server.confine.sandbox import Sandbox
from acp_server.editor_api import EditorApi
from acp_server.markdown import fence, inline_code
from acp_server.permissions import Permit
from acp_server.tools.base import (
    Presentation,
    Tool,
    ToolContext,
    ToolFailure,
    ToolOutcome,
    clip_end,
    settle,
    text_content,
)
from acp_server.tools.commands.background import LocalJob, TerminalJob
from acp_server.tools.commands.jobs import Job
from acp_server.tools.commands.procgroup import ProcessResult, run_in_group
from acp_server.updates import tool_call_update

SHELL = "/bin/sh"
DEFAULT_TIMEOUT = 120.0
MAX_TIMEOUT = 1800.0
OUTPUT_BYTE_LIMIT = 64 * 1024  # output kept per command, from the end
MODEL_MAX_CHARS = 16_000  # of that, what the model reads (errors are at the end)
TITLE_MAX = 80
NO_OUTPUT = "(no output)"
# Pagers off, so `git log` or `man` cannot wait for a keypress, locally or in an editor terminal.
NO_PAGER = {"PAGER": "cat", "GIT_PAGER": "cat"}


# --- the tool ---------------------------------------------------------------------------------


def _present(args: dict[str, Any], ctx: ToolContext) -> Presentation:
    command = args.get("command")
    if not isinstance(command, str) or not command.strip():
        return Presentation("Run a command")
    lines = command.strip().splitlines()
    shown = lines[0] + (" …" if len(lines) > 1 else "")
    if len(shown) > TITLE_MAX:
        shown = shown[: TITLE_MAX - 1].rstrip() + "…"
    if args.get("background") is True:
        return Presentation(f"Start {inline_code(shown)} in the background")
    return Presentation(f"Run {inline_code(shown)}")


async def _run_command(args: dict[str, Any], ctx: ToolContext) -> ToolOutcome:
    command: str = args["command"]
    cwd = ctx.resolve(args["cwd"]) if args.get("cwd") else ctx.cwd
    if "\0" in str(cwd):  # no path holds one; the checks below would crash on it
        raise ToolFailure(
            f"Cannot run the command: the directory {str(cwd)!r} contains a NUL byte, which no "
            "path can hold. Give the folder's name without it."
        )
    timeout = _timeout(args.get("timeout_seconds"))
    box = _sandbox(args, ctx)
    reason = str(args.get("reason") or "(no reason given)") if args.get("outside_sandbox") else None
    escalation = box is None and ctx.sandbox.active  # asked to leave a sandbox in force
    await ctx.permit(
        Permit(
            command=command,
            cwd=cwd,
            sandboxed=box is not None,
            reason=reason,
            escalation=escalation,
        )
    )
    if not os.path.isdir(cwd):  # never raises (a name too long is not a directory either)
        problem = "is not a directory" if os.path.lexists(cwd) else "does not exist"
        raise ToolFailure(f"Cannot run the command: the directory {cwd} {problem}.")
    argv = box.argv([SHELL, "-c", command]) if box else [SHELL, "-c", command]
    env = _environment(ctx.sandbox.passed)
    env = box.env(env) if box else env
    if args.get("background"):
        stop_on_cancel = bool(args.get("stop_on_cancel"))
        return await _background(command, argv, env, cwd, stop_on_cancel, ctx)
    if ctx.client.can_terminal:
        outcome = await _in_terminal(argv, cwd, timeout, ctx)
    else:
        outcome = await _local(argv, env, cwd, timeout)
    note = box.note(outcome.text, outcome.ok) if box else None
    if note is None:
        return outcome
    shown = [*(outcome.content or [text_content(outcome.text)]), text_content(note)]
    return replace(outcome, text=f"{outcome.text}\n\n{note}", content=shown)


def _sandbox(args: dict[str, Any], ctx: ToolContext) -> Sandbox | None:
    """The sandbox this call runs in; None when it runs as the user (the sandbox is off or
    cannot be kept here, or the model asked to run it outside)."""
    if args.get("outside_sandbox") is True or not ctx.sandbox.active:
        return None
    return ctx.sandbox


def _timeout(value: Any) -> float:
    if isinstance(value, int | float) and not isinstance(value, bool) and value > 0:
        return min(float(value), MAX_TIMEOUT)
    return DEFAULT_TIMEOUT


RUN_COMMAND = Tool(
    name="run_command",
    description=(
        "Run a shell command line with /bin/sh -c and return its exit code and output (stdout "
        "and stderr together; when long, only the end is kept). `cwd` is absolute or relative "
        "to the working directory (default: the working directory). The command gets no input "
        "and no pager, so it must not wait for the user. It is stopped after `timeout_seconds` "
        f"(default {DEFAULT_TIMEOUT:g}, at most {MAX_TIMEOUT:g}); processes it leaves running "
        "are stopped when it ends. For servers, watchers and long jobs set `background`: it "
        "returns at once with an id for command_output and stop_command. Commands may run in a "
        "sandbox (writes only inside the project, no network); when a result says the sandbox "
        "blocked one, ask to run it with `outside_sandbox` and a `reason`."
    ),
    kind="execute",
    effect="execute",
    present=_present,
    run=_run_command,
)


# --- in the background ------------------------------------------------------------------------


async def _background(
    command: str,
    argv: list[str],
    env: dict[str, str],
    cwd: Path,
    stop_on_cancel: bool,
    ctx: ToolContext,
) -> ToolOutcome:
    """Start the command and return at once; it belongs to the session's `Jobs` from now on."""
    await ctx.jobs.refresh()  # commands that ended meanwhile leave room for this one
    try:
        job_id = ctx.jobs.next_id()
    except LookupError as exc:
        raise ToolFailure(str(exc)) from exc
    owner = asyncio.current_task()
    content: list[dict[str, Any]] | None = None
    if ctx.client.can_terminal:
        terminal_id = await _create_terminal(ctx.client, argv, cwd, ctx.sandbox)
        job: Job = TerminalJob(job_id, command, owner, stop_on_cancel, ctx.client, terminal_id)
        ctx.jobs.add(job)  # from here on, session/close and cancels release the terminal
        content = [{"type": "terminal", "terminalId": terminal_id}]
        ctx.emit(tool_call_update(ctx.call_id, status="in_progress", content=content))
    else:
        job = LocalJob(job_id, command, owner, stop_on_cancel, OUTPUT_BYTE_LIMIT)
        try:
            await job.begin(cwd, env, argv)
        except OSError as exc:
            raise ToolFailure(f"Cannot start the command: {exc.strerror or exc}") from exc
        ctx.jobs.add(job)
    text = (
        f"Started in the background as {job_id}. Read its output with "
        f'command_output(id="{job_id}"), stop it with stop_command(id="{job_id}").'
    )
    shown = [*(content or []), text_content(text)]
    return ToolOutcome(text, content=shown, raw_output={"id": job_id, "background": True})


# --- through the editor's terminal ------------------------------------------------------------


async def _in_terminal(argv: list[str], cwd: Path, timeout: float, ctx: ToolContext) -> ToolOutcome:
    """Run in a client terminal, shown live in the tool call; always released at the end."""
    client = ctx.client
    terminal_id = await _create_terminal(client, argv, cwd, ctx.sandbox)
    ctx.terminals.append(terminal_id)
    item = {"type": "terminal", "terminalId": terminal_id}
    ctx.emit(tool_call_update(ctx.call_id, status="in_progress", content=[item]))
    try:
        status = await _wait_terminal(client, terminal_id, timeout)
        output = await client.terminal_output(terminal_id)
    except asyncio.CancelledError:
        await settle(client.kill_terminal(terminal_id), "terminal/kill")
        raise
    finally:
        if await settle(client.release_terminal(terminal_id), "terminal/release"):
            ctx.terminals.remove(terminal_id)
    exit_status = status or output.get("exitStatus") or {}
    result = ProcessResult(
        exit_code=exit_status.get("exitCode"),
        signal=exit_status.get("signal"),
        timed_out=status is None,
        output=str(output.get("output") or ""),
        earlier_cut=bool(output.get("truncated")),
    )
    text = f"{_status_line(result, timeout)}\n{_shown_output(result.output, result.earlier_cut)}"
    return ToolOutcome(text, ok=result.ok, content=[item], raw_output=_raw_output(result))


async def _create_terminal(client: EditorApi, argv: list[str], cwd: Path, box: Sandbox) -> str:
    """terminal/create, the command line started through `keep_env.py` (the allowlisted
    environment of the editor's), the pagers off and the sandbox's TMPDIR set. If the call is
    cancelled while the editor creates the terminal, the terminal is still released once its
    id arrives."""
    variables = {**NO_PAGER, **box.env({})}
    env = [{"name": name, "value": value} for name, value in variables.items()]
    argv = terminal_argv(argv, box.passed, variables)
    task = asyncio.ensure_future(
        client.create_terminal(argv[0], argv[1:], str(cwd), OUTPUT_BYTE_LIMIT, env)
    )
    try:
        return await asyncio.shield(task)
    except asyncio.CancelledError:
        await settle(_release_when_created(client, task), "terminal/create and release")
        raise


async def _release_when_created(client: EditorApi, created: asyncio.Future[str]) -> None:
    """A terminal created for a call that was cancelled meanwhile: released once its id
    arrives."""
    await client.release_terminal(await created)


async def _wait_terminal(
    client: EditorApi, terminal_id: str, timeout: float
) -> dict[str, Any] | None:
    """The exit status; None if the command ran past `timeout` (it is then killed)."""
    try:
        return await asyncio.wait_for(client.wait_for_terminal_exit(terminal_id), timeout)
    except TimeoutError:
        await client.kill_terminal(terminal_id)
        return None


# --- as a local subprocess --------------------------------------------------------------------


async def _local(argv: list[str], env: dict[str, str], cwd: Path, timeout: float) -> ToolOutcome:
    """Run in a process group of our own (see procgroup); the output is shown as text."""
    try:
        result = await run_in_group(argv, cwd, timeout, env, OUTPUT_BYTE_LIMIT)
    except OSError as exc:
        raise ToolFailure(f"Cannot start the command: {exc.strerror or exc}") from exc
    shown = _shown_output(result.output, result.earlier_cut)
    status = _status_line(result, timeout)
    return ToolOutcome(
        f"{status}\n{shown}",
        ok=result.ok,
        content=[text_content(f"{status}\n{shown if shown == NO_OUTPUT else fence(shown)}")],
        raw_output=_raw_output(result),
    )


def _environment(passed: tuple[str, ...]) -> dict[str, str]:
    """Ours, allowlisted (and the user's `passed` names), with pagers and terminal features off
    so nothing waits for a keypress."""
    return {**command_environment(os.environ, passed), **NO_PAGER, "TERM": "dumb"}


# --- reporting --------------------------------------------------------------------------------


def _status_line(result: ProcessResult, timeout: float) -> str:
    if result.timed_out:
        return f"Timed out after {timeout:g} s; the command was stopped."
    if result.exit_code is not None:
        return f"Exit code {result.exit_code}"
    if result.signal:
        return f"Killed by signal {result.signal}"
    return "Exit status unknown"


def _shown_output(output: str, earlier_cut: bool) -> str:
    kept = clip_end(output, MODEL_MAX_CHARS)
    earlier_cut = earlier_cut or len(kept) < len(output)
    if not earlier_cut and not kept.strip():
        return NO_OUTPUT
    note = "[… output truncated: the beginning is not shown]\n" if earlier_cut else ""
    return note + kept.rstrip("\n")


def _raw_output(result: ProcessResult) -> dict[str, Any]:
    return {"exitCode": result.exit_code, "signal": result.signal, "timedOut": result.timed_out}
