"""Subagent sessions: the `task` tool's jobs, each run as a child session of the parent.

A child has its own history (the parent's prompt for it, then its own work) and its own
context budget; it runs one turn of the agent loop with the tools the parent chose among its
own (never `task`: depth 1), gated by the parent's permissions, so it can never do more than
the parent may. Its final answer is all the parent gets (`task.answer_text`).

Cancelling the parent cancels the child first (its tool calls are closed, its permission
request withdrawn), then the parent. `session/cancel` on the child's id (`cancel`) ends only
the child: the parent's call then answers that the user cancelled it, and the parent goes on.
A `cancelled` answer to a permission request ends the child the same way when the client
knows the child, and the parent's turn when it does not (the request came as the parent's).

Each child is stored as a session of its own marked with its parent (`PARENT_KEY`), which
`session/list` leaves out, deleting the parent deletes, and loading the parent replays
(`view.replay`). At most `MAX_PARALLEL` children of one parent run at once.
"""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

from acp_server import updates
from acp_server.agent.history import History
from acp_server.backends import Backend
from acp_server.editor_api import EditorApi
from acp_server.messages import text_message
from acp_server.permissions import Permissions
from acp_server.session.subagents import view
from acp_server.session.text import subagent_prompt
from acp_server.session.voice import PlainVoice
from acp_server.settings import Settings
from acp_server.store.transcript import NullRecorder, Recorder
from acp_server.tools.base import CancelledByUser, Tool, ToolContext, ToolOutcome
from acp_server.tools.commands.jobs import Jobs
from acp_server.tools.task import NAME, Job, answer_text

if TYPE_CHECKING:
    from acp_server.agent.loop import StopReason, ToolRunner, Turn
    from acp_server.confine.sandbox import Sandbox
    from acp_server.tools.toolbox import Toolbox

log = logging.getLogger(__name__)

MAX_PARALLEL = 3  # children of one parent running at once
MAX_REQUESTS = 25  # model requests of one child's turn (or the session's limit, if lower)
PARENT_KEY = "parent"  # in a child's stored state: its parent's session id
CANCELLED = (
    "The user cancelled this subagent before it finished, so there is no answer. Go on "
    "without it, or ask the user how to proceed."
)
SendUpdate = Callable[[str, updates.Update], None]
Emit = Callable[[updates.Update], None]


@dataclass
class Parent:
    """What a parent session lends its children."""

    session_id: str
    roots: tuple[Path, ...]  # the first is the working directory
    settings: Settings
    permissions: Permissions
    editor: EditorApi
    send_update: SendUpdate
    recorder: Recorder | NullRecorder
    # The editor under a child's session id (its permission requests carry that id).
    child_editor: Callable[[str], EditorApi] | None = None
    backend: Callable[[], Backend] | None = None  # the children's model (set by `Subagents`)

    @property
    def cwd(self) -> Path:
        return self.roots[0]


class Subagents:
    """The children of one parent session: `model` gives the backend they use (asked at each
    job), `tools` the parent's toolbox (its tools, and the sandbox its commands run in)."""

    def __init__(
        self, parent: Parent, model: Callable[[], Backend], tools: Callable[[], ToolRunner]
    ) -> None:
        parent.backend = model
        self._parent = parent
        self._toolbox = tools
        self._running: dict[str, asyncio.Task[tuple[StopReason, str]]] = {}
        self._slots = asyncio.Semaphore(MAX_PARALLEL)

    def lend_editors(self, editors: Callable[[str], EditorApi]) -> None:
        """The editor of any session id: a child's permission requests go under its own."""
        self._parent.child_editor = editors

    def replayed(self, update: updates.Update) -> list[tuple[str, updates.Update]] | None:
        """A stored update of the parent as its editor is shown it on load, when it concerns
        a child (`view.replay`); None when it does not."""
        editor = self._parent.editor
        return view.replay(update, self._parent.session_id, editor.can_subagents, self._stored)

    def _stored(self, child_id: str) -> list[updates.Update]:
        """A child's stored updates, as this editor takes them."""
        recorder = self._parent.recorder
        if not isinstance(recorder, Recorder):
            return []
        from acp_server.store import transcript

        restored = transcript.restore(recorder.store.events(child_id), recorder.store.blob)
        return [updates.plan_view(u, self._parent.editor.can_plan) for u in restored.replay]

    @property
    def opted_in(self) -> bool:
        return self._parent.editor.can_subagents

    async def run(self, job: Job, ctx: ToolContext) -> ToolOutcome:
        """Run `job` in a new child; its answer, or why there is none."""
        toolbox = cast("Toolbox", self._toolbox())
        tools = self._tools(toolbox.tools, job.tools)
        if isinstance(tools, str):
            return ToolOutcome(tools, ok=False)
        async with self._slots:
            child = Child(self._parent, job, ctx.emit, self.opted_in)
            work = child.run(tools, toolbox.sandbox)
            task = asyncio.create_task(work, name=f"subagent-{child.id}")
            self._running[child.id] = task
            try:
                await asyncio.wait({task})  # not `await task`: a child's own cancel is not ours
            except asyncio.CancelledError:
                task.cancel()
                await asyncio.wait({task})
                raise
            finally:
                del self._running[child.id]
        if task.cancelled():
            return child.outcome(CANCELLED, ok=False)
        stop, answer = task.result()  # CancelledByUser (no opt-in) ends the parent's turn
        return child.outcome(CANCELLED if stop == "cancelled" else answer, ok=stop != "cancelled")

    @property
    def running(self) -> list[str]:
        """The ids of the children running now."""
        return list(self._running)

    def cancel(self, child_id: str) -> bool:
        """`session/cancel` on a child: end its work only. False: not a running child here."""
        task = self._running.get(child_id)
        if task is None:
            return False
        task.cancel()
        return True

    def close(self) -> None:
        """The parent goes: its children end."""
        for task in self._running.values():
            task.cancel()

    @staticmethod
    def _tools(parents: Mapping[str, Tool], names: tuple[str, ...]) -> list[Tool] | str:
        """The parent's tools of these names (never `task`); the problem when one is not."""
        offered = {n: t for n, t in parents.items() if n != NAME}
        unknown = [n for n in names if n not in offered]
        if unknown:
            return (
                f"No subagent was started: {', '.join(map(repr, unknown))} "
                f"{'is not a tool' if len(unknown) == 1 else 'are not tools'} it can be given. "
                f"It can use: {', '.join(offered)}."
            )
        return [offered[n] for n in names]


class Child:
    """One child session: made, announced, run once, and ended."""

    def __init__(self, parent: Parent, job: Job, emit: Emit, opted_in: bool) -> None:
        self.id = f"sess_{uuid.uuid4().hex}"
        self._parent = parent
        self._job = job
        self._parent_emit = emit
        self._opted_in = opted_in
        self._progress = view.Progress(job.title)
        self._live = True
        self._recorder = self._stored()
        self.history = History((), self._recorder)
        self._tell_parent(view.announcement(self.id, job.title, _describe(job.prompt)))
        if opted_in:
            content = [view.reference(self.id)]
            emit(updates.tool_call_update(job.call_id, status="in_progress", content=content))
        else:
            emit(self._progress.update(job.call_id))

    def _stored(self) -> Recorder | NullRecorder:
        """The child's row (marked with its parent) and recorder; none without a store."""
        recorder = self._parent.recorder
        if not isinstance(recorder, Recorder):
            return NullRecorder()
        from acp_server.store.database import SessionRow

        now, parent = time.time(), self._parent
        dirs = [str(d) for d in parent.roots[1:]]
        state = {PARENT_KEY: parent.session_id}
        recorder.store.create(SessionRow(self.id, str(parent.cwd), dirs, None, now, now, state))
        return Recorder(recorder.store, self.id)

    def _tell_parent(self, update: updates.Update) -> None:
        """A `subagent_update`: shown on the parent when the client takes them, kept always
        (a client that loads the parent later may take them)."""
        if self._opted_in:
            self._parent_emit(update)
        else:
            self._parent.recorder.shown(update)

    def emit(self, update: updates.Update) -> None:
        """One of the child's updates: kept, and shown as the client takes it."""
        if not self._live:
            return
        self._recorder.shown(update)
        if self._opted_in:
            shown = updates.plan_view(update, self._parent.editor.can_plan)
            self._parent.send_update(self.id, shown)
        elif self._progress.add(update):
            self._parent_emit(self._progress.update(self._job.call_id))

    async def run(self, tools: list[Tool], sandbox: Sandbox) -> tuple[StopReason, str]:
        """The child's one turn; (stop reason, final answer)."""
        from acp_server.agent.loop import run_turn

        stop: StopReason = "cancelled"
        jobs = Jobs()  # its background commands end with it
        turn = self._turn(tools, jobs, sandbox)
        try:
            stop = await run_turn(turn)
        except CancelledByUser:
            if not self._opted_in:
                raise  # the request came as the parent's: the parent's turn is cancelled
        except Exception:
            log.exception("subagent %s of %s failed", self.id, self._parent.session_id)
            stop = "end_turn"
            return stop, "The subagent failed inside the agent; the agent's log has the details."
        finally:
            self._live = False
            await jobs.close()
            self._recorder.turn_ended(stop)
            self._tell_parent(view.state(self.id, "idle", stop))
        return stop, self._answer(stop)

    def _turn(self, tools: list[Tool], jobs: Jobs, sandbox: Sandbox) -> Turn:
        from acp_server.agent.loop import Turn
        from acp_server.agent.turn_context import SessionContext, TurnContext
        from acp_server.tools.toolbox import Toolbox

        parent = self._parent
        assert parent.backend is not None  # set by Subagents
        backend = parent.backend()
        prompt = text_message("user", self._job.prompt, message_id=f"msg_{uuid.uuid4().hex}")
        self.history.append(prompt)
        self.emit(updates.message_chunk("user_message_chunk", self._job.prompt, prompt.message_id))
        context = SessionContext.made(parent.settings, None)
        context.look_up(backend)
        editor = view.ChildEditor(parent.editor, self._ask, self._question)
        return Turn(
            backend=backend,
            history=self.history,
            emit=self.emit,
            voice=PlainVoice(self.emit),  # its notices: messages of the child
            tools=Toolbox(
                tools,
                cwd=parent.cwd,
                roots=parent.roots,
                client=editor,
                permissions=parent.permissions,
                jobs=jobs,
                sandbox=sandbox,  # the parent's: its commands are as confined
            ),
            max_requests=min(parent.settings.max_turn_requests, MAX_REQUESTS),
            system=subagent_prompt(parent.cwd, parent.roots[1:]),
            context=TurnContext(context, backend, self.emit),
        )

    async def _ask(
        self, tool_call: dict[str, Any], options: list[dict[str, Any]]
    ) -> dict[str, Any]:
        """A permission request of the child: under the child's id (its state says it waits)
        for a client that knows it, else as the parent's own tool call."""
        parent = self._parent
        if not self._opted_in:
            self._progress.waiting(str(tool_call.get("toolCallId")))
            self._parent_emit(self._progress.update(self._job.call_id))
            asked = {**tool_call, "toolCallId": self._job.call_id}
            return await parent.editor.request_permission(asked, options)
        editor = parent.child_editor(self.id) if parent.child_editor else parent.editor
        self._tell_parent(view.state(self.id, "requires_action"))
        answer = await editor.request_permission(tool_call, options)
        if answer.get("outcome") != "cancelled":  # else it ends, and says so (idle)
            self._tell_parent(view.state(self.id, "running"))
        return answer

    async def _question(self, request: dict[str, Any], call_id: str | None) -> dict[str, Any]:
        """A question of the child (ask_user, an MCP server's): like its permission requests,
        under the child's id for a client that knows it, else as the parent's tool call."""
        parent = self._parent
        if not self._opted_in:
            return await parent.editor.elicit(request, self._job.call_id)
        editor = parent.child_editor(self.id) if parent.child_editor else parent.editor
        self._tell_parent(view.state(self.id, "requires_action"))
        answer = await editor.elicit(request, call_id)  # a cancel ends the child (idle)
        self._tell_parent(view.state(self.id, "running"))
        return answer

    def _answer(self, stop: StopReason) -> str:
        """The child's last words, and why it stopped when it did not finish."""
        said = next(
            (m.text for m in reversed(self.history) if m.role == "assistant" and m.text), ""
        )
        if stop == "max_turn_requests":
            said += "\n\n(The subagent reached its limit of model requests before it finished.)"
        elif stop == "max_tokens":
            said += "\n\n(The subagent's reply was cut off: it ran out of output tokens.)"
        return answer_text(said)

    def outcome(self, text: str, *, ok: bool) -> ToolOutcome:
        """The parent's result: the answer, shown with the child (opted in) or its progress."""
        if self._opted_in:
            content = [view.reference(self.id), updates.text_content(text)]
        else:
            content = [updates.text_content(self._progress.text() + "\n\n" + text)]
        return ToolOutcome(text, ok=ok, content=content)


def _describe(prompt: str) -> str:
    """The child's description for the client: the start of its prompt."""
    text = " ".join(prompt.split())
    return text if len(text) <= 200 else text[:199] + "…"
