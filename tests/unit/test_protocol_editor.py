"""Editor: the EditorApi calls become ACP requests with the right params."""

from __future__ import annotations

from typing import Any

import pytest

from acp_server.editor_api import ClientRequestFailed
from acp_server.errors import RemoteError
from acp_server.protocol.editor import Editor


class NoNotices:
    def notify(self, method: str, params: dict[str, Any]) -> None:
        raise AssertionError(f"unexpected notification {method}")


class RecordingConnection(NoNotices):
    """Stands in for the JSON-RPC connection: records requests, answers terminal/create."""

    def __init__(self) -> None:
        self.requests: list[tuple[str, dict[str, Any]]] = []

    async def request(self, method: str, params: dict[str, Any], *, withdraw: bool = False) -> Any:
        self.requests.append((method, params))
        return {"terminalId": "term-1"}


def editor(conn: RecordingConnection) -> Editor:
    return Editor(conn, "sess-1", {"terminal": True})


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


class AnsweringConnection(NoNotices):
    """Answers every request with `answer`, or raises it when it is an exception."""

    def __init__(self, answer: Any) -> None:
        self.answer = answer

    async def request(self, method: str, params: dict[str, Any], *, withdraw: bool = False) -> Any:
        if isinstance(self.answer, Exception):
            raise self.answer
        return self.answer


async def test_an_error_answer_names_the_request_and_keeps_what_the_editor_said() -> None:
    conn = AnsweringConnection(RemoteError(-32000, "Read-only buffer", {"buffer": 7}))
    client = Editor(conn, "sess-1", {"fs": {"writeTextFile": True}})
    with pytest.raises(ClientRequestFailed) as failed:
        await client.write_text_file("/w/a.txt", "x")
    assert str(failed.value) == (
        'The editor could not complete fs/write_text_file for /w/a.txt; it said "Read-only '
        'buffer" (details: {"buffer": 7}).'
    )


@pytest.mark.parametrize("answer", [None, {}, {"outcome": "selected"}, [1]])
async def test_a_permission_answer_without_an_outcome_is_not_taken_as_a_cancel(
    answer: Any,
) -> None:
    client = Editor(AnsweringConnection(answer), "sess-1", {})
    with pytest.raises(ClientRequestFailed, match="could not be understood"):
        await client.request_permission({"toolCallId": "c"}, [])
