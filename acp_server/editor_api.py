"""What the agent may ask of the editor (the ACP client), as a seam the session, the loop and
the tools depend on: `EditorApi`, and `NoEditor`, the editor that offers nothing.

`editor.Editor` implements it over the JSON-RPC connection for one session; tests implement it
in memory. The capability flags say which optional methods the editor advertised (ACP forbids
calling the others). Every method raises `ClientRequestFailed` when the editor answers with an
error.
"""

from __future__ import annotations

import json
from typing import Any, Protocol

MESSAGE_CHARS = 300  # of the editor's error message, in what the model and the user read
DATA_CHARS = 500  # of its `error.data`, as JSON


class ClientRequestFailed(Exception):
    """The editor answered one of our requests (fs/*, terminal/*, a permission request) with
    an error, or with something unusable. `str()` says so in words, with what the editor said
    (message and data, capped); the toolbox turns it into the tool call's failure."""

    def __init__(
        self, method: str, message: str | None, data: Any = None, about: str | None = None
    ) -> None:
        self.method = method
        self.message = message  # the editor's error message; None: the answer was unusable
        self.data = data
        self.about = about  # what the request was about, e.g. the file path
        super().__init__(self.describe())

    def describe(self) -> str:
        text = f"The editor could not complete {self.method}"
        text += f" for {self.about}" if self.about else ""
        if self.message is None:
            text += "; its answer could not be understood"
        else:
            text += "; it said " + json.dumps(_cap(self.message, MESSAGE_CHARS), ensure_ascii=False)
        if self.data is not None:
            details = json.dumps(self.data, ensure_ascii=False, default=str)
            text += f" (details: {_cap(details, DATA_CHARS)})"
        return text + "."


def _cap(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


class EditorApi(Protocol):
    @property
    def can_read(self) -> bool: ...

    @property
    def can_write(self) -> bool: ...

    @property
    def can_terminal(self) -> bool: ...

    @property
    def can_notice(self) -> bool:
        """The client shows `notice` updates (`session.notices` capability)."""
        ...

    @property
    def can_show_compaction(self) -> bool:
        """The client shows `compaction_update`s (`session.compaction` capability)."""
        ...

    @property
    def can_plan(self) -> bool:
        """The client takes plan operations (`plan_update`, `plan_removed`: the `plan`
        capability) instead of the legacy `plan` update."""
        ...

    @property
    def can_subagents(self) -> bool:
        """The client shows subagents as sessions of their own (`subagents` capability)."""
        ...

    @property
    def can_elicit_form(self) -> bool:
        """The client asks the user with forms (`elicitation.form` capability)."""
        ...

    @property
    def can_elicit_url(self) -> bool:
        """The client sends the user to a page (`elicitation.url` capability)."""
        ...

    async def elicit(self, request: dict[str, Any], tool_call_id: str | None) -> dict[str, Any]:
        """`elicitation/create` for this session (and the tool call, when given): `request`
        holds `mode`, `message` and the mode's fields. Returns the answer, {"action":
        "accept" | "decline" | "cancel", "content"?: {...}}. Only called in a mode the client
        advertised; a cancel of the caller withdraws the question."""
        ...

    def elicitation_complete(self, elicitation_id: str) -> None:
        """`elicitation/complete`: the page a URL elicitation opened has done its work."""
        ...

    async def request_permission(
        self, tool_call: dict[str, Any], options: list[dict[str, Any]]
    ) -> dict[str, Any]:
        """Returns the `outcome` object: {"outcome": "selected", "optionId": …}, or
        {"outcome": "cancelled"} when the user cancelled the turn."""
        ...

    async def read_text_file(self, path: str, line: int | None, limit: int | None) -> str: ...

    async def write_text_file(self, path: str, content: str) -> None: ...

    async def create_terminal(
        self,
        command: str,
        args: list[str],
        cwd: str,
        output_byte_limit: int,
        env: list[dict[str, str]],
    ) -> str:
        """`env` holds ACP EnvVariable objects ({"name", "value"}) set for the command."""
        ...

    async def terminal_output(self, terminal_id: str) -> dict[str, Any]: ...

    async def wait_for_terminal_exit(self, terminal_id: str) -> dict[str, Any]: ...

    async def kill_terminal(self, terminal_id: str) -> None: ...

    async def release_terminal(self, terminal_id: str) -> None: ...


class NoEditor:
    """An editor that offers nothing and refuses every permission request."""

    can_read = False
    can_write = False
    can_terminal = False
    can_notice = False
    can_show_compaction = False
    can_plan = False
    can_subagents = False
    can_elicit_form = False
    can_elicit_url = False

    async def elicit(self, request: dict[str, Any], tool_call_id: str | None) -> dict[str, Any]:
        return {"action": "decline"}

    def elicitation_complete(self, elicitation_id: str) -> None:
        return None

    async def request_permission(
        self, tool_call: dict[str, Any], options: list[dict[str, Any]]
    ) -> dict[str, Any]:
        return {"outcome": "selected", "optionId": "reject_once"}

    async def read_text_file(self, path: str, line: int | None, limit: int | None) -> str:
        raise NotImplementedError

    async def write_text_file(self, path: str, content: str) -> None:
        raise NotImplementedError

    async def create_terminal(
        self,
        command: str,
        args: list[str],
        cwd: str,
        output_byte_limit: int,
        env: list[dict[str, str]],
    ) -> str:
        raise NotImplementedError

    async def terminal_output(self, terminal_id: str) -> dict[str, Any]:
        raise NotImplementedError

    async def wait_for_terminal_exit(self, terminal_id: str) -> dict[str, Any]:
        raise NotImplementedError

    async def kill_terminal(self, terminal_id: str) -> None:
        raise NotImplementedError

    async def release_terminal(self, terminal_id: str) -> None:
        raise NotImplementedError
