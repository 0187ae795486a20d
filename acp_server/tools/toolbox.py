"""The tools of one session: offered to the model, validated, gated, run, and always answered.

Every call the model makes gets exactly one `ToolOutcome`: an unknown tool, arguments that are
not JSON or break the tool's schema, a refusal, a rejected permission request, an error the
editor answered and a crash are all results the model reads, never exceptions that end the
turn. Only cancellation propagates: `session/cancel`, or a permission request the user
answered "cancelled" (`CancelledByUser`).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterable
from dataclasses import replace
from pathlib import Path
from typing import Any

from acp_server import redaction, schemas, updates
from acp_server.confine.sandbox import Sandbox
from acp_server.context.profile import ToolRoom
from acp_server.editor_api import ClientRequestFailed, EditorApi
from acp_server.errors import ConnectionClosed
from acp_server.markdown import fence, inline_code
from acp_server.messages import ToolCall, ToolSpec
from acp_server.permissions import Permissions, Permit, inside_roots, rule_for
from acp_server.tools.base import (
    CancelledByUser,
    Emit,
    Presentation,
    Tool,
    ToolContext,
    ToolFailure,
    ToolOutcome,
    settle,
)
from acp_server.tools.commands.jobs import Jobs
from acp_server.tools.mcp.tool_search import ToolCatalog

log = logging.getLogger(__name__)
ONCE_ONLY = (
    "This can only be allowed once: a command outside the sandbox is asked about every time, "
    "since commands in the sandbox run without asking and could change what this one runs "
    "(a Makefile, package.json scripts, test configuration)."
)


class Toolbox:
    def __init__(
        self,
        tools: Iterable[Tool],
        *,
        cwd: Path,
        roots: tuple[Path, ...],
        client: EditorApi,
        permissions: Permissions,
        jobs: Jobs | None = None,
        sandbox: Sandbox | None = None,
        catalog: ToolCatalog | None = None,
    ) -> None:
        self.tools = {t.name: t for t in tools}
        self.catalog = catalog  # the MCP tools that may be deferred (`tool_search`)
        if catalog is not None:
            search = catalog.tool()
            self.tools[search.name] = search
        self.cwd = cwd
        self.roots = roots
        self.client = client
        self.permissions = permissions
        self.jobs = jobs if jobs is not None else Jobs()
        self.sandbox = sandbox if sandbox is not None else Sandbox("off", roots)
        self._started: set[str] = set()

    def find(self, name: str) -> Tool | None:
        """The tool by name; small models decorate names (`read_file:`, `` `grep` ``), so a
        name that only differs by surrounding spaces, quotes or a trailing colon still finds it."""
        return self.tools.get(name) or self.tools.get(name.strip().strip("`'\"").rstrip(":."))

    def specs(self, room: ToolRoom | None = None) -> tuple[ToolSpec, ...]:
        """The tools for the next request; in `room`, MCP tools that would crowd the window
        are deferred behind `search_tools` (see `tool_search`)."""
        hidden: set[str] = set()
        if self.catalog is not None:
            hidden = self.catalog.hidden(room) if room is not None else {"search_tools"}
        return tuple(
            ToolSpec(t.name, t.description, t.schema)
            for t in self.tools.values()
            if t.name not in hidden
        )

    def _context(self, call: ToolCall, emit: Emit) -> ToolContext:
        async def permit(request: Permit) -> None:
            await self._permit(call, request, emit)

        return ToolContext(
            call.id,
            self.cwd,
            self.roots,
            self.client,
            emit,
            permit,
            jobs=self.jobs,
            sandbox=self.sandbox,
        )

    def announce(self, call: ToolCall) -> updates.Update:
        tool = self.find(call.name)
        if tool is None:
            unknown = updates.tool_call(
                call.id, call.name, name=call.name, raw_input=call.arguments
            )
            return redaction.hide_keys_in(unknown)
        shown = tool.present(call.arguments, self._context(call, lambda _: None))
        announced = updates.tool_call(
            call.id,
            shown.title,
            name=tool.name,
            kind=tool.kind,
            raw_input=call.arguments,
            locations=shown.locations,
        )
        return redaction.hide_keys_in(announced)

    async def run(self, call: ToolCall, emit: Emit) -> ToolOutcome:
        """Validate, gate and run one call; failures come back as results. The agent's known
        keys are hidden in all it shows and returns (a command may print one), here, once for
        every tool, before the model, the editor or the store sees them."""
        outcome = await self._run(call, lambda update: emit(redaction.hide_keys_in(update)))
        return replace(
            outcome,
            text=redaction.hide_keys(outcome.text),
            content=redaction.hide_keys_in(outcome.content),
            raw_output=redaction.hide_keys_in(outcome.raw_output),
        )

    async def _run(self, call: ToolCall, emit: Emit) -> ToolOutcome:
        tool = self.find(call.name)
        if tool is None:
            known = ", ".join(sorted(self.tools)) or "none"
            return ToolOutcome(f"Unknown tool {call.name!r}. Available tools: {known}.", ok=False)
        call = replace(call, arguments=schemas.without_empty_options(call.arguments, tool.schema))
        problem = self._argument_problem(tool, call)
        if problem:
            return ToolOutcome(problem, ok=False)
        early = self.permissions.decide(tool.effect, Permit(), self.roots)
        if early.verdict == "deny":  # e.g. an edit in Plan mode: refuse before touching anything
            return ToolOutcome(early.reason, ok=False)
        ctx = self._context(call, emit)
        if self.catalog is not None:
            self.catalog.used(tool.name)
        try:
            return await tool.run(call.arguments, ctx)
        except ToolFailure as exc:
            return ToolOutcome(str(exc), ok=False)
        except ClientRequestFailed as exc:  # the editor's answer, not our bug: no traceback
            log.warning("%s: %s", tool.name, exc)
            return ToolOutcome(str(exc), ok=False)
        except CancelledByUser:
            self.jobs.turn_cancelled(asyncio.current_task())  # the turn ends as cancelled
            raise
        except ConnectionClosed:  # stdin ended: the turn still finishes, without the editor
            return ToolOutcome(
                f"{tool.name} stopped: the editor closed the connection, so it can no longer "
                "answer (permission, files or terminals).",
                ok=False,
            )
        except Exception as exc:
            log.exception("tool %s crashed", tool.name)
            return ToolOutcome(f"The {tool.name} tool failed unexpectedly ({exc!r}).", ok=False)
        finally:
            await _release_leftovers(ctx)

    def _argument_problem(self, tool: Tool, call: ToolCall) -> str | None:
        if call.invalid_arguments is not None:
            return (
                f"The arguments for {tool.name} were not a JSON object: "
                f"{call.invalid_arguments[:300]!r}. Call it again with valid JSON arguments."
            )
        if tool.input_schema is not None:
            return None  # checked by the tool itself (an MCP server's schema)
        found = schemas.problems(f"tools/{tool.name}.json", call.arguments)
        if found:
            return f"Invalid arguments for {tool.name}: " + "; ".join(found) + "."
        return None

    async def _permit(self, call: ToolCall, request: Permit, emit: Emit) -> None:
        tool = self.find(call.name)
        assert tool is not None
        effect = request.effect or tool.effect
        decision = self.permissions.decide(effect, request, self.roots)
        if decision.verdict == "deny":
            raise ToolFailure(decision.reason)
        if decision.verdict == "ask":
            await self._ask(call, tool, request)
        if call.id not in self._started:
            self._started.add(call.id)
            emit(updates.tool_call_update(call.id, status="in_progress"))

    async def _ask(self, call: ToolCall, tool: Tool, request: Permit) -> None:
        inside = all(inside_roots(p, self.roots) for p in request.paths) and (
            request.cwd is None or inside_roots(request.cwd, self.roots)
        )
        effect = request.effect or tool.effect
        allow_rule = rule_for(effect, request, True) if inside and effect != "read" else None
        deny_rule = rule_for(effect, request, False)
        options = _options(allow_rule.describe() if allow_rule else None, deny_rule is not None)
        shown = _leading(tool.present(call.arguments, self._context(call, lambda _: None)), request)
        tool_call = updates.tool_call_fields(
            call.id,
            title=shown.title,
            kind=tool.kind,
            status="pending",
            raw_input=call.arguments,
            content=request.preview or [_command_preview(request)],
            locations=shown.locations or None,
        )
        outcome = await self.client.request_permission(redaction.hide_keys_in(tool_call), options)
        if outcome.get("outcome") == "cancelled":
            raise CancelledByUser
        chosen = outcome.get("optionId") if outcome.get("outcome") == "selected" else None
        if chosen == "allow_always" and allow_rule:
            self.permissions.remember(allow_rule)
        elif chosen == "reject_always" and deny_rule:
            self.permissions.remember(deny_rule)
        if chosen not in ("allow_once", "allow_always"):
            raise ToolFailure(
                "The user declined this call, so it did not run. Do not retry it as is; "
                "ask the user how to proceed if it matters."
            )


def _leading(shown: Presentation, request: Permit) -> Presentation:
    """The presentation of a call whose path leads elsewhere (through a link) than it names:
    the title says where, and the locations are the paths that were checked and are used."""
    named = {str(location.get("path")) for location in shown.locations}
    elsewhere = [p for p in request.paths if str(p) not in named]
    if not request.through_link or not elsewhere or not shown.locations:
        return shown
    title = f"{shown.title} (leads to {', '.join(str(p) for p in elsewhere)})"
    first = {**shown.locations[0], "path": str(request.paths[0])}
    return Presentation(title, [first, *({"path": str(p)} for p in request.paths[1:])])


def _options(allow_scope: str | None, can_reject_always: bool) -> list[dict[str, Any]]:
    options = [{"optionId": "allow_once", "name": "Allow once", "kind": "allow_once"}]
    if allow_scope:
        options.append(
            {
                "optionId": "allow_always",
                "name": f"Always allow {allow_scope} in this project",
                "kind": "allow_always",
            }
        )
    options.append({"optionId": "reject_once", "name": "Reject", "kind": "reject_once"})
    if can_reject_always:
        options.append(
            {"optionId": "reject_always", "name": "Always reject", "kind": "reject_always"}
        )
    return options


def _command_preview(request: Permit) -> dict[str, Any]:
    if request.command is not None:
        where = f"\n\nin {inline_code(str(request.cwd))}" if request.cwd else ""
        text = fence(request.command, "sh") + where
        if request.reason is not None:
            text += f"\n\nOutside the sandbox, because: {request.reason}"
        if request.escalation:
            text += f"\n\n{ONCE_ONLY}"
    else:
        text = "\n".join(str(p) for p in request.paths) or "(no details)"
    return updates.text_content(text)


async def _release_leftovers(ctx: ToolContext) -> None:
    """Safety net: a client terminal a tool left behind is released (kill first). Each step is
    bounded, so an editor that never answers cannot hang the cleanup after a cancel."""
    for terminal_id in list(ctx.terminals):
        await settle(ctx.client.kill_terminal(terminal_id), "terminal/kill")
        await settle(ctx.client.release_terminal(terminal_id), "terminal/release")
        ctx.terminals.remove(terminal_id)
