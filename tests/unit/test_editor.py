"""Editor: the ClientApi calls become ACP requests with the right params."""

from __future__ import annotations

from typing import Any

from acp_server.editor import Editor


class RecordingConnection:
    """Stands in for the JSON-RPC connection: records requests, answers terminal/create."""

    def __init__(self) -> None:
        self.requests: list[tuple[str, dict[str, Any]]] = []

    async def request(self, method: str, params: dict[str, Any]) -> Any:
        self.requests.append((method, params))
        return {"terminalId": "term-1"}


def editor(conn: RecordingConnection) -> Editor:
    # Editor is typed with the real Connection; this stand-in has the one method it calls.
    return Editor(conn, "sess-1", {"terminal": True})  # type: ignore[arg-type]


async def test_create_terminal_sends_env() -> None:
    conn = RecordingConnection()
    env = [{"name": "PAGER", "value": "cat"}]
    assert await editor(conn).create_terminal("/bin/sh", ["-c", "ls"], "/w", 100, env) == "term-1"
    assert conn.requests == [
        (
            "terminal/create",
            {
                "sessionId": "sess-1",
                "command": "/bin/sh",
                "args": ["-c", "ls"],
                "cwd": "/w",
                "outputByteLimit": 100,
                "env": env,
            },
        )
    ]


async def test_create_terminal_omits_empty_env() -> None:
    conn = RecordingConnection()
    await editor(conn).create_terminal("/bin/sh", ["-c", "ls"], "/w", 100, [])
    assert "env" not in conn.requests[0][1]
