"""A turn's system prompt set by `instruct`, kept as it is when a tool call brings in a nested
instructions file: the file is told in a note appended before the next request (the user told
of it then)."""

from __future__ import annotations

import json
from pathlib import Path

from acp_server.agent.history import History
from acp_server.agent.loop import NoTools, Turn
from acp_server.backends.scripted import ScriptedBackend
from acp_server.messages import ToolCall
from acp_server.session.voice import Voice
from acp_server.updates import Update
from acp_server.workspace.workspace import Workspace, instruct


async def test_a_nested_file_is_told_in_a_note_after_the_call(tmp_path: Path) -> None:
    (tmp_path / ".git").mkdir()
    (tmp_path / "AGENTS.md").write_text("ROOT", encoding="utf-8")
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "AGENTS.md").write_text("SUB", encoding="utf-8")
    script = tmp_path / "script.json"
    script.write_text(json.dumps([]), encoding="utf-8")
    seen: list[Update] = []
    said: list[str] = []

    def told(update: Update) -> None:
        """What the turn's voice says: a notice as its text in `said`."""
        if update["sessionUpdate"] == "notice":
            said.append(update["title"])
        else:
            seen.append(update)

    turn = Turn(
        backend=ScriptedBackend(script),
        history=History(),
        emit=seen.append,
        voice=Voice(told, notices=True),
        system="BASE",
    )
    workspace = Workspace(tmp_path, (), None)
    await instruct(turn, NoTools, workspace, "\n\nMCP NOTE", None)
    assert turn.system.startswith("BASE\n\n# Project instructions")
    assert "ROOT" in turn.system and "SUB" not in turn.system
    assert turn.system.endswith("MCP NOTE")
    assert turn.notes == []
    system = turn.system
    await turn.tools.run(ToolCall("c1", "read_file", {"path": "sub/x.txt"}), seen.append)
    assert turn.system == system  # byte for byte: a provider's cache still serves it
    assert len(turn.notes) == 1 and "SUB" in turn.notes[0] and "ROOT" not in turn.notes[0]
    assert "sub/AGENTS.md" in turn.notes[0]
    assert said == [
        "Project instructions read: AGENTS.md.",
        "Project instructions also read: sub/AGENTS.md.",
    ]
    workspace.close()
