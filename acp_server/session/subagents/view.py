"""How a subagent is shown: to a client that opted in (`clientCapabilities.subagents`) as a
child session of its own, to any other inside the parent's `task` tool call.

Opted in: a `subagent_update` on the parent announces the child before any of its traffic
(title, description, `capabilities.cancel`, state running); the child's updates go out with
the child's session id, its permission requests too (state `requires_action` while one
waits), and it ends `idle` with its stop reason. The parent's tool call points at it with
`{type: "session", sessionId}` content. Otherwise: each of the child's tool calls becomes a
line of progress in the parent's tool call, and its permission requests come as the parent's
(the parent's session id and tool call id).

`replay` gives a stored parent update as the loading client takes it: the announcement is
followed by the child's stored updates under the child's id (opted in), or left out with all
that concerns the child (not opted in).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from acp_server import updates
from acp_server.editor_api import EditorApi

KIND = "subagent_update"
FINAL = ("completed", "failed")


def announcement(child_id: str, title: str, description: str) -> updates.Update:
    """The first `subagent_update`: who the child is, that it can be cancelled, running."""
    return {
        "sessionUpdate": KIND,
        "sessionId": child_id,
        "title": title,
        "description": description,
        "capabilities": {"cancel": {}},
        "state": {"state": "running"},
    }


def state(child_id: str, name: str, stop_reason: str | None = None) -> updates.Update:
    """A later `subagent_update`: the child's state only (the other fields are kept)."""
    snapshot: dict[str, Any] = {"state": name}
    if stop_reason is not None:
        snapshot["stopReason"] = stop_reason
    return {"sessionUpdate": KIND, "sessionId": child_id, "state": snapshot}


def reference(child_id: str) -> dict[str, Any]:
    """Tool-call content pointing at the child (known to the client once announced)."""
    return {"type": "session", "sessionId": child_id}


class Progress:
    """The child's work as lines in the parent's tool call, for a client without the opt-in."""

    def __init__(self, title: str) -> None:
        self.title = title
        self._steps: dict[str, list[str]] = {}  # tool call id -> [title, status]

    def add(self, update: updates.Update) -> bool:
        """Take one child update; True when the lines changed."""
        kind = update.get("sessionUpdate")
        call_id = str(update.get("toolCallId"))
        if kind == "tool_call":
            self._steps[call_id] = [str(update.get("title") or "a tool call"), "running"]
            return True
        step = self._steps.get(call_id)
        if kind != "tool_call_update" or step is None:
            return False
        if "title" in update:
            step[0] = str(update["title"])
        status = update.get("status")
        if status in FINAL or status == "in_progress":
            step[1] = "done" if status == "completed" else str(status).replace("_", " ")
        return True

    def waiting(self, call_id: str) -> None:
        if call_id in self._steps:
            self._steps[call_id][1] = "waiting for your permission"

    def text(self) -> str:
        lines = [f"- {title}: {status}" for title, status in self._steps.values()]
        return "\n".join([f"Subagent: {self.title}", *lines])

    def update(self, call_id: str) -> updates.Update:
        """The parent's tool call showing the lines so far."""
        content = [updates.text_content(self.text())]
        title = f"Subagent: {self.title}"
        return updates.tool_call_update(call_id, status="in_progress", title=title, content=content)


def replay(
    update: updates.Update,
    parent_id: str,
    opted_in: bool,
    child_updates: Callable[[str], list[updates.Update]],
) -> list[tuple[str, updates.Update]] | None:
    """A stored parent update as this client takes it, with whatever it brings along (session
    id, update); None when it has nothing to do with a subagent."""
    kind = update.get("sessionUpdate")
    if kind == KIND:
        if not opted_in:
            return []
        shown = [(parent_id, update)]
        if "title" in update:  # the announcement: the child's traffic follows it
            child = str(update["sessionId"])
            shown += [(child, u) for u in child_updates(child)]
        return shown
    content = update.get("content")
    if opted_in or kind not in ("tool_call", "tool_call_update") or not isinstance(content, list):
        return None
    kept = [c for c in content if not (isinstance(c, dict) and c.get("type") == "session")]
    return None if len(kept) == len(content) else [(parent_id, {**update, "content": kept})]


class ChildEditor:
    """The editor as a child session uses it: the parent's, except that a permission request
    is asked through `ask` and a question (elicitation) through `question`, which say whose
    it is and track the child's state."""

    def __init__(
        self,
        parent: EditorApi,
        ask: Callable[[dict[str, Any], list[dict[str, Any]]], Any],
        question: Callable[[dict[str, Any], str | None], Any],
    ) -> None:
        self._parent = parent
        self._ask = ask
        self._question = question
        self.can_elicit_form = parent.can_elicit_form
        self.can_elicit_url = parent.can_elicit_url
        self.can_read = parent.can_read
        self.can_write = parent.can_write
        self.can_terminal = parent.can_terminal
        self.can_notice = parent.can_notice
        self.can_show_compaction = parent.can_show_compaction
        self.can_plan = parent.can_plan
        self.can_subagents = False  # a child has no children (depth 1)

    async def request_permission(
        self, tool_call: dict[str, Any], options: list[dict[str, Any]]
    ) -> dict[str, Any]:
        answer: dict[str, Any] = await self._ask(tool_call, options)
        return answer

    async def elicit(self, request: dict[str, Any], tool_call_id: str | None) -> dict[str, Any]:
        answer: dict[str, Any] = await self._question(request, tool_call_id)
        return answer

    def elicitation_complete(self, elicitation_id: str) -> None:
        self._parent.elicitation_complete(elicitation_id)

    async def read_text_file(self, path: str, line: int | None, limit: int | None) -> str:
        return await self._parent.read_text_file(path, line, limit)

    async def write_text_file(self, path: str, content: str) -> None:
        await self._parent.write_text_file(path, content)

    async def create_terminal(
        self,
        command: str,
        args: list[str],
        cwd: str,
        output_byte_limit: int,
        env: list[dict[str, str]],
    ) -> str:
        return await self._parent.create_terminal(command, args, cwd, output_byte_limit, env)

    async def terminal_output(self, terminal_id: str) -> dict[str, Any]:
        return await self._parent.terminal_output(terminal_id)

    async def wait_for_terminal_exit(self, terminal_id: str) -> dict[str, Any]:
        return await self._parent.wait_for_terminal_exit(terminal_id)

    async def kill_terminal(self, terminal_id: str) -> None:
        await self._parent.kill_terminal(terminal_id)

    async def release_terminal(self, terminal_id: str) -> None:
        await self._parent.release_terminal(terminal_id)
