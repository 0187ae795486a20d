"""An in-test editor: answers fs/*, terminal/* and permission requests like a real client.

Terminals really run their command (in a new process group) so that cancellation tests can
check that nothing is left running; every created terminal must be released.

Over real pipes it answers a `RawServer`'s requests; in process, `InProcessPeer` is the agent's
connection (requests to the editor, session/update notifications kept), and `InProcessClient`
is a session's or a turn's `EditorApi`.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from acp_server.errors import RemoteError
from tests.support.raw import RawServer

Chooser = Callable[[dict[str, Any]], str | None]  # permission params -> optionId (None: cancel)
# elicitation/create params -> the answer ({"action": ..., "content"?: ...}); may wait
Answerer = Callable[[dict[str, Any]], Awaitable[dict[str, Any]]]


class FakeEditor:
    def __init__(
        self,
        *,
        fs: bool = True,
        terminal: bool = True,
        choose: Chooser | None = None,
        answer: Answerer | None = None,
        url: bool = False,
    ):
        self.fs = fs
        self.terminal = terminal
        self.answer = answer  # with it, the editor advertises `elicitation.form`
        self.url = url  # advertise `elicitation.url` too
        self.elicitations: list[dict[str, Any]] = []
        self.completed: list[str] = []  # elicitation/complete notifications seen
        self.choose: Chooser = choose or (lambda params: "allow_once")
        self.permission_requests: list[dict[str, Any]] = []
        self.reads: list[str] = []
        self.writes: list[tuple[str, str]] = []
        self.terminals: dict[str, asyncio.subprocess.Process] = {}
        self.outputs: dict[str, bytearray] = {}
        self.released: set[str] = set()
        self._pumps: list[asyncio.Task[None]] = []
        self._count = 0

    def capabilities(self) -> dict[str, Any]:
        caps: dict[str, Any] = {
            "fs": {"readTextFile": self.fs, "writeTextFile": self.fs},
            "terminal": self.terminal,
        }
        if self.answer is not None:
            caps["elicitation"] = {"form": {}, **({"url": {}} if self.url else {})}
        return caps

    def attach(self, server: RawServer | InProcessPeer) -> None:
        server.handlers.update(
            {
                "session/request_permission": self.request_permission,
                "fs/read_text_file": self.read_text_file,
                "fs/write_text_file": self.write_text_file,
                "terminal/create": self.create_terminal,
                "terminal/output": self.terminal_output,
                "terminal/wait_for_exit": self.wait_for_exit,
                "terminal/kill": self.kill,
                "terminal/release": self.release,
                "elicitation/create": self.elicit,
            }
        )

    async def elicit(self, params: dict[str, Any]) -> dict[str, Any]:
        self.elicitations.append(params)
        if self.answer is None:
            raise RemoteError(-32602, "this editor advertised no elicitation")
        return await self.answer(params)

    async def request_permission(self, params: dict[str, Any]) -> dict[str, Any]:
        self.permission_requests.append(params)
        choice = self.choose(params)
        if choice is None:
            return {"outcome": {"outcome": "cancelled"}}
        return {"outcome": {"outcome": "selected", "optionId": choice}}

    async def read_text_file(self, params: dict[str, Any]) -> dict[str, Any]:
        self.reads.append(params["path"])
        lines = Path(params["path"]).read_text(encoding="utf-8").splitlines(keepends=True)
        start = (params.get("line") or 1) - 1
        limit = params.get("limit") or len(lines)
        return {"content": "".join(lines[start : start + limit])}

    async def write_text_file(self, params: dict[str, Any]) -> dict[str, Any]:
        self.writes.append((params["path"], params["content"]))
        Path(params["path"]).write_text(params["content"], encoding="utf-8")
        return {}

    async def create_terminal(self, params: dict[str, Any]) -> dict[str, Any]:
        self._count += 1
        terminal_id = f"term_{self._count}"
        env = {**os.environ, **{v["name"]: v["value"] for v in params.get("env", [])}}
        proc = await asyncio.create_subprocess_exec(
            params["command"],
            *params.get("args", []),
            cwd=params.get("cwd"),
            env=env,
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.STDOUT,
            start_new_session=True,
        )
        self.terminals[terminal_id] = proc
        self.outputs[terminal_id] = bytearray()
        self._pumps.append(asyncio.create_task(self._pump(terminal_id, proc)))
        return {"terminalId": terminal_id}

    async def _pump(self, terminal_id: str, proc: asyncio.subprocess.Process) -> None:
        assert proc.stdout is not None
        while chunk := await proc.stdout.read(65536):
            self.outputs[terminal_id] += chunk

    def _status(self, terminal_id: str) -> dict[str, Any] | None:
        code = self.terminals[terminal_id].returncode
        if code is None:
            return None
        if code < 0:
            return {"exitCode": None, "signal": signal.Signals(-code).name}
        return {"exitCode": code, "signal": None}

    async def terminal_output(self, params: dict[str, Any]) -> dict[str, Any]:
        terminal_id = params["terminalId"]
        result: dict[str, Any] = {
            "output": self.outputs[terminal_id].decode("utf-8", "replace"),
            "truncated": False,
        }
        status = self._status(terminal_id)
        if status is not None:
            result["exitStatus"] = status
        return result

    async def wait_for_exit(self, params: dict[str, Any]) -> dict[str, Any]:
        proc = self.terminals[params["terminalId"]]
        await proc.wait()
        return self._status(params["terminalId"]) or {}

    async def kill(self, params: dict[str, Any]) -> dict[str, Any]:
        proc = self.terminals[params["terminalId"]]
        if proc.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            await proc.wait()
        return {}

    async def release(self, params: dict[str, Any]) -> dict[str, Any]:
        await self.kill(params)
        self.released.add(params["terminalId"])
        return {}

    def unreleased(self) -> list[str]:
        return sorted(set(self.terminals) - self.released)

    def running(self) -> list[str]:
        return sorted(t for t, p in self.terminals.items() if p.returncode is None)

    async def close(self) -> None:
        for terminal_id in self.running():
            await self.kill({"terminalId": terminal_id})
        for pump in self._pumps:
            pump.cancel()


class InProcessClient:
    """A FakeEditor as the `EditorApi` of an in-process session or turn: the same answers as
    over the wire, without one (unit tests of the loop and the tools)."""

    can_notice = False
    can_show_compaction = False
    can_plan = False
    can_subagents = False

    def __init__(self, editor: FakeEditor) -> None:
        self.editor = editor

    @property
    def can_read(self) -> bool:
        return self.editor.fs

    @property
    def can_write(self) -> bool:
        return self.editor.fs

    @property
    def can_terminal(self) -> bool:
        return self.editor.terminal

    @property
    def can_elicit_form(self) -> bool:
        return self.editor.answer is not None

    @property
    def can_elicit_url(self) -> bool:
        return self.editor.answer is not None and self.editor.url

    async def elicit(self, request: dict[str, Any], tool_call_id: str | None) -> dict[str, Any]:
        params = {"sessionId": "in-process", **request}
        if tool_call_id is not None:
            params["toolCallId"] = tool_call_id
        return await self.editor.elicit(params)

    def elicitation_complete(self, elicitation_id: str) -> None:
        self.editor.completed.append(elicitation_id)

    async def request_permission(
        self, tool_call: dict[str, Any], options: list[dict[str, Any]]
    ) -> dict[str, Any]:
        params = {"sessionId": "in-process", "toolCall": tool_call, "options": options}
        answer = await self.editor.request_permission(params)
        outcome: dict[str, Any] = answer["outcome"]
        return outcome

    async def read_text_file(self, path: str, line: int | None, limit: int | None) -> str:
        answer = await self.editor.read_text_file({"path": path, "line": line, "limit": limit})
        return str(answer["content"])

    async def write_text_file(self, path: str, content: str) -> None:
        await self.editor.write_text_file({"path": path, "content": content})

    async def create_terminal(
        self,
        command: str,
        args: list[str],
        cwd: str,
        output_byte_limit: int,
        env: list[dict[str, str]],
    ) -> str:
        params = {"command": command, "args": args, "cwd": cwd, "env": env}
        answer = await self.editor.create_terminal(params)
        return str(answer["terminalId"])

    async def terminal_output(self, terminal_id: str) -> dict[str, Any]:
        return await self.editor.terminal_output({"terminalId": terminal_id})

    async def wait_for_terminal_exit(self, terminal_id: str) -> dict[str, Any]:
        return await self.editor.wait_for_exit({"terminalId": terminal_id})

    async def kill_terminal(self, terminal_id: str) -> None:
        await self.editor.kill({"terminalId": terminal_id})

    async def release_terminal(self, terminal_id: str) -> None:
        await self.editor.release({"terminalId": terminal_id})


class InProcessPeer:
    """The connection of an in-process `AcpAgent`: the agent's requests are answered by the
    attached editor's handlers, its notifications are kept in order."""

    def __init__(self, editor: FakeEditor | None = None) -> None:
        self.handlers: dict[str, Callable[[Any], Awaitable[Any]]] = {}
        self.notifications: list[tuple[str, dict[str, Any]]] = []
        if editor is not None:
            editor.attach(self)

    def notify(self, method: str, params: dict[str, Any]) -> None:
        self.notifications.append((method, params))

    async def request(self, method: str, params: dict[str, Any], *, withdraw: bool = False) -> Any:
        handler = self.handlers.get(method)
        if handler is None:
            raise RemoteError(-32601, f"Method not found: {method}")
        return await handler(params)

    async def drain(self) -> None:
        return None

    def after_reply(self, callback: Callable[[], None]) -> None:
        """In process the answer is the handler's return: the callback runs right after it."""
        asyncio.get_running_loop().call_soon(callback)

    def updates(self, session_id: str | None = None) -> list[dict[str, Any]]:
        """The session/update payloads sent so far (of one session, or of all)."""
        return [
            params["update"]
            for method, params in self.notifications
            if method == "session/update" and session_id in (None, params["sessionId"])
        ]
