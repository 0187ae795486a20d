"""Multi-root workspaces: a client that follows ACP sends `additionalDirectories` only when the
agent advertises `sessionCapabilities.additionalDirectories`; then the extra roots count as
the project (reads there run without asking) and `session/list` reports them."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from tests.support.fake_editor import FakeEditor
from tests.support.raw import Frame, RawServer, stop_reason

Start = Callable[..., Any]


def updates_of(frames: list[Frame]) -> list[dict[str, Any]]:
    return [f["params"]["update"] for f in frames if f.get("method") == "session/update"]


class ConformingClient:
    """Uses an optional session feature only when the agent advertised it."""

    def __init__(self, server: RawServer, editor: FakeEditor) -> None:
        self.server = server
        self.editor = editor
        self.session_caps: dict[str, Any] = {}

    async def initialize(self) -> None:
        self.editor.attach(self.server)
        answer = await self.server.request(
            "initialize", {"protocolVersion": 1, "clientCapabilities": self.editor.capabilities()}
        )
        self.session_caps = answer["result"]["agentCapabilities"].get("sessionCapabilities") or {}

    def roots(self, extra: list[Path]) -> dict[str, Any]:
        if self.session_caps.get("additionalDirectories") is None:
            return {}
        return {"additionalDirectories": [str(p) for p in extra]}

    async def new_session(self, cwd: Path, extra: list[Path]) -> str:
        params = {"cwd": str(cwd), "mcpServers": [], **self.roots(extra)}
        answer = await self.server.request("session/new", params)
        return str(answer["result"]["sessionId"])


async def test_a_conforming_client_gets_its_extra_roots_honoured(
    server_factory: Start, script: Any, tmp_path: Path
) -> None:
    project, library = tmp_path / "app", tmp_path / "lib"
    project.mkdir()
    library.mkdir()
    (library / "util.txt").write_text("shared helper\n", encoding="utf-8")
    rounds = [
        {"tool_calls": [{"name": "read_file", "arguments": {"path": str(library / "util.txt")}}]},
        {"text": "Read it.", "expect": {"contains": [str(library), "shared helper"]}},
    ]
    server: RawServer = await server_factory("--script", str(script(rounds)))
    editor = FakeEditor(fs=False, terminal=False, choose=lambda params: "reject_once")
    client = ConformingClient(server, editor)
    await client.initialize()
    assert client.session_caps["additionalDirectories"] == {}
    session = await client.new_session(project, [library])

    req = await server.call(
        "session/prompt", {"sessionId": session, "prompt": [{"type": "text", "text": "look"}]}
    )
    answer, before = await server.response(req, timeout=30)
    assert stop_reason(answer["result"]) == "end_turn"
    assert editor.permission_requests == []  # inside the project: no question
    finals = [u for u in updates_of(before) if u.get("status") in ("completed", "failed")]
    assert [u["status"] for u in finals] == ["completed"]

    listed = (await server.request("session/list", {}))["result"]["sessions"]
    assert [s.get("additionalDirectories") for s in listed] == [[str(library)]]
