"""The editor as one session sees it: `EditorApi` over the JSON-RPC connection.

Optional methods are only called when the client advertised them in `initialize` (ACP forbids
the rest); the tools check the `can_*` flags first. An error the editor answers becomes a
`ClientRequestFailed` here, the one place that knows which request it answered.
"""

from __future__ import annotations

from typing import Any, Protocol

from acp_server.editor_api import ClientRequestFailed
from acp_server.errors import RemoteError
from acp_server.wire.jsonrpc import Params


class Requester(Protocol):
    """What the editor needs of the connection (`jsonrpc.Connection`): our own requests."""

    async def request(self, method: str, params: Params, *, withdraw: bool = False) -> Any: ...

    def notify(self, method: str, params: Params) -> None: ...


class Editor:
    def __init__(self, conn: Requester, session_id: str, capabilities: dict[str, Any]) -> None:
        self._conn = conn
        self._session_id = session_id
        fs: dict[str, Any] = capabilities.get("fs") or {}
        if not isinstance(fs, dict):
            fs = {}
        self._read = fs.get("readTextFile") is True
        self._write = fs.get("writeTextFile") is True
        self._terminal = capabilities.get("terminal") is True
        session_caps = capabilities.get("session")
        session_caps = session_caps if isinstance(session_caps, dict) else {}
        self._notice = isinstance(session_caps.get("notices"), dict)
        self._compaction = isinstance(session_caps.get("compaction"), dict)
        self._plan = isinstance(capabilities.get("plan"), dict)
        self._subagents = isinstance(capabilities.get("subagents"), dict)
        elicitation = capabilities.get("elicitation")
        elicitation = elicitation if isinstance(elicitation, dict) else {}
        self._form = isinstance(elicitation.get("form"), dict)
        self._url = isinstance(elicitation.get("url"), dict)

    @property
    def can_read(self) -> bool:
        return self._read

    @property
    def can_write(self) -> bool:
        return self._write

    @property
    def can_terminal(self) -> bool:
        return self._terminal

    @property
    def can_notice(self) -> bool:
        return self._notice

    @property
    def can_show_compaction(self) -> bool:
        return self._compaction

    @property
    def can_plan(self) -> bool:
        return self._plan

    @property
    def can_subagents(self) -> bool:
        return self._subagents

    @property
    def can_elicit_form(self) -> bool:
        return self._form

    @property
    def can_elicit_url(self) -> bool:
        return self._url

    async def elicit(self, request: dict[str, Any], tool_call_id: str | None) -> dict[str, Any]:
        method = "elicitation/create"
        body = {"sessionId": self._session_id, **request}
        if tool_call_id is not None:
            body["toolCallId"] = tool_call_id
        try:
            result = await self._conn.request(method, body, withdraw=True)
        except RemoteError as exc:
            raise ClientRequestFailed(method, exc.message, exc.data) from exc
        if not isinstance(result, dict) or not isinstance(result.get("action"), str):
            raise ClientRequestFailed(method, None, result)
        return result

    def elicitation_complete(self, elicitation_id: str) -> None:
        self._conn.notify("elicitation/complete", {"elicitationId": elicitation_id})

    async def _call(self, method: str, **params: Any) -> Any:
        body = {"sessionId": self._session_id, **{k: v for k, v in params.items() if v is not None}}
        try:
            return await self._conn.request(method, body)
        except RemoteError as exc:
            raise ClientRequestFailed(method, exc.message, exc.data, params.get("path")) from exc

    async def request_permission(
        self, tool_call: dict[str, Any], options: list[dict[str, Any]]
    ) -> dict[str, Any]:
        method = "session/request_permission"
        result = await self._call(method, toolCall=tool_call, options=options)
        outcome = result.get("outcome") if isinstance(result, dict) else None
        if not isinstance(outcome, dict):
            raise ClientRequestFailed(method, None, result)
        return outcome

    async def read_text_file(self, path: str, line: int | None, limit: int | None) -> str:
        result = await self._call("fs/read_text_file", path=path, line=line, limit=limit)
        content = result.get("content") if isinstance(result, dict) else None
        return content if isinstance(content, str) else ""

    async def write_text_file(self, path: str, content: str) -> None:
        await self._call("fs/write_text_file", path=path, content=content)

    async def create_terminal(
        self,
        command: str,
        args: list[str],
        cwd: str,
        output_byte_limit: int,
        env: list[dict[str, str]],
    ) -> str:
        result = await self._call(
            "terminal/create",
            command=command,
            args=args,
            cwd=cwd,
            outputByteLimit=output_byte_limit,
            env=env or None,  # the schema's array is not nullable: omitted when empty
        )
        return str(result["terminalId"])

    async def terminal_output(self, terminal_id: str) -> dict[str, Any]:
        result = await self._call("terminal/output", terminalId=terminal_id)
        return result if isinstance(result, dict) else {}

    async def wait_for_terminal_exit(self, terminal_id: str) -> dict[str, Any]:
        result = await self._call("terminal/wait_for_exit", terminalId=terminal_id)
        return result if isinstance(result, dict) else {}

    async def kill_terminal(self, terminal_id: str) -> None:
        await self._call("terminal/kill", terminalId=terminal_id)

    async def release_terminal(self, terminal_id: str) -> None:
        await self._call("terminal/release", terminalId=terminal_id)
