"""The agent loop in process: a scripted model, the real toolbox, an in-memory editor.

Whatever ends a turn (an answer, a refusal, the request limit, a cancel at any await), every
tool call the model made has exactly one result in history and exactly one final status
(`completed` or `failed`) on the editor's side. Each test runs in milliseconds.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from acp_server.agent.history import History
from acp_server.agent.loop import StopReason, Turn, run_turn
from acp_server.agent.turn_text import CANCELLED_RESULT, LIMIT_RESULT
from acp_server.backends.scripted import ScriptedBackend
from acp_server.messages import history_problems, is_note, text_message
from acp_server.permissions import Mode, Permissions, RuleStore
from acp_server.session.voice import PlainVoice
from acp_server.tools.base import Presentation, Tool, ToolContext, ToolOutcome
from acp_server.tools.defaults import default_tools
from acp_server.tools.toolbox import Toolbox
from acp_server.updates import Update
from tests.support.fake_editor import FakeEditor, InProcessClient

PLAN = {"entries": [{"content": "Look around", "status": "in_progress"}]}
FINAL = ("completed", "failed")


@dataclass
class Rig:
    """One turn under test, and what the editor saw of it."""

    turn: Turn
    backend: ScriptedBackend
    editor: FakeEditor
    seen: list[Update]
    cwd: Path

    async def run(self) -> StopReason:
        stop = await run_turn(self.turn)
        self.assert_consistent()
        return stop

    async def cancel_when(self, ready: Callable[[], bool]) -> None:
        """Start the turn, cancel it once `ready()`, and check it ended cancelled."""
        task = asyncio.create_task(run_turn(self.turn))
        async with asyncio.timeout(5):
            while not ready():
                assert not task.done(), "the turn ended before the point to cancel at"
                await asyncio.sleep(0.001)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        self.assert_consistent()

    def assert_consistent(self) -> None:
        """Every call answered in history; every call shown to the editor closed once."""
        assert history_problems(self.turn.history) == []
        for call_id in self.announced():
            finals = [s for s in self.statuses(call_id) if s in FINAL]
            assert len(finals) == 1, f"{call_id}: {self.statuses(call_id)}"
            assert self.statuses(call_id)[-1] in FINAL

    def kinds(self) -> list[str]:
        return [u["sessionUpdate"] for u in self.seen]

    def announced(self) -> list[str]:
        return [u["toolCallId"] for u in self.seen if u["sessionUpdate"] == "tool_call"]

    def statuses(self, call_id: str) -> list[str]:
        return [u["status"] for u in self.seen if u.get("toolCallId") == call_id and "status" in u]

    def last_update(self, call_id: str) -> Update:
        return [u for u in self.seen if u.get("toolCallId") == call_id][-1]

    def results(self) -> dict[str, str]:
        """Tool results in history, by call id."""
        return {m.tool_call_id or "": m.text for m in self.turn.history if m.role == "tool"}

    def texts(self) -> list[str]:
        return [
            u["content"]["text"] for u in self.seen if "content" in u and "text" in u["content"]
        ]


@pytest.fixture
def rig(tmp_path: Path) -> Callable[..., Rig]:
    def make(
        rounds: list[dict[str, Any]],
        *,
        mode: Mode = "bypass",
        editor: FakeEditor | None = None,
        tools: list[Tool] | None = None,
        max_requests: int = 50,
    ) -> Rig:
        editor = editor or FakeEditor(fs=False, terminal=False)
        backend = ScriptedBackend.from_rounds(rounds)
        seen: list[Update] = []
        toolbox = Toolbox(
            default_tools() if tools is None else tools,
            cwd=tmp_path,
            roots=(tmp_path,),
            client=InProcessClient(editor),
            permissions=Permissions(RuleStore(tmp_path, tmp_path / "data"), mode),
        )
        turn = Turn(
            backend=backend,
            history=History([text_message("user", "Please help.")]),
            emit=seen.append,
            voice=PlainVoice(seen.append),
            tools=toolbox,
            max_requests=max_requests,
        )
        return Rig(turn, backend, editor, seen, tmp_path)

    return make


def call(call_id: str, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
    return {"id": call_id, "name": name, "arguments": arguments}


# --- how turns end -----------------------------------------------------------------------------


async def test_a_tool_round_then_an_answer(rig: Callable[..., Rig]) -> None:
    r = rig(
        [
            {
                "thought": "A plan first.",
                "text": "Planning.",
                "tool_calls": [call("c1", "update_plan", PLAN)],
                "chunk_chars": 100,  # each text in one delta
            },
            {"text": "Done."},
        ]
    )
    assert await r.run() == "end_turn"
    assert r.kinds() == [
        "agent_thought_chunk",
        "agent_message_chunk",
        "tool_call",
        "plan",
        "tool_call_update",
        "agent_message_chunk",
    ]
    assert r.statuses("c1") == ["pending", "completed"]
    assert [m.role for m in r.turn.history] == ["user", "assistant", "tool", "assistant"]
    assert r.turn.history[-1].text == "Done."


async def test_a_refusal_ends_the_turn_as_refusal(rig: Callable[..., Rig]) -> None:
    r = rig([{"text": "I can't help with that.", "finish": "content_filter"}, {"text": "unused"}])
    assert await r.run() == "refusal"
    assert "".join(r.texts()) == "I can't help with that."
    assert len(r.backend.requests) == 1


async def test_max_turn_requests_ends_with_a_round_that_says_where_it_stopped(
    rig: Callable[..., Rig],
) -> None:
    rounds: list[dict[str, Any]] = [
        {"tool_calls": [call(f"c{n}", "update_plan", PLAN)]} for n in range(2)
    ]
    rounds.append({"text": "I made the plan twice; next: write the code."})
    r = rig(rounds, max_requests=2)
    assert await r.run() == "max_turn_requests"
    assert len(r.backend.requests) == 3
    last = r.backend.requests[-1]
    assert is_note(last.messages[-1]) and "used all 2 model requests" in last.messages[-1].text
    assert last.system == r.backend.requests[0].system  # told in a note, not in the prefix
    assert not any("used all" in m.text for m in r.backend.requests[1].messages)
    assert r.announced() == ["c0", "c1"]
    said = "".join(r.texts())
    assert said.index("I made the plan twice") < said.index("The turn stopped after 2 model")
    assert r.turn.history[-1].text == "I made the plan twice; next: write the code."


async def test_a_tool_called_in_the_last_round_is_not_run(rig: Callable[..., Rig]) -> None:
    r = rig(
        [{"tool_calls": [call(f"c{n}", "update_plan", PLAN)]} for n in range(5)], max_requests=2
    )
    assert await r.run() == "max_turn_requests"
    assert len(r.backend.requests) == 3
    assert r.announced() == ["c0", "c1"]
    assert r.results() == {"c0": r.results()["c0"], "c1": r.results()["c1"], "c2": LIMIT_RESULT}


# --- tool failures are results the model reads ------------------------------------------------


async def model_was_told(rig: Rig, call_id: str) -> str:
    """Run the turn; the call failed, and the model was told so in the next request."""
    assert await rig.run() == "end_turn"
    assert rig.statuses(call_id)[-1] == "failed"
    told = rig.backend.requests[1].messages[-1]
    assert told.role == "tool" and told.tool_call_id == call_id
    return told.text


async def test_an_unknown_tool_is_answered_with_the_tools_there_are(
    rig: Callable[..., Rig],
) -> None:
    r = rig([{"tool_calls": [call("c1", "fly", {"to": "moon"})]}, {"text": "I cannot fly."}])
    told = await model_was_told(r, "c1")
    assert told.startswith(
        "Unknown tool 'fly'. Available tools: command_output, edit_file, fetch_url"
    )


async def test_invalid_arguments_are_answered_with_what_is_wrong(
    rig: Callable[..., Rig],
) -> None:
    r = rig([{"tool_calls": [call("c1", "read_file", {"file": "a.txt"})]}, {"text": "Oops."}])
    told = await model_was_told(r, "c1")
    assert told.startswith("Invalid arguments for read_file:")
    assert "path" in told


async def test_a_failing_tool_is_answered_with_its_failure(rig: Callable[..., Rig]) -> None:
    r = rig([{"tool_calls": [call("c1", "read_file", {"path": "missing.txt"})]}, {"text": "No."}])
    told = await model_was_told(r, "c1")
    assert told.startswith("File not found:")
    assert r.statuses("c1") == ["pending", "in_progress", "failed"]  # it was allowed to start


async def test_a_crashing_tool_is_answered_and_logged(
    rig: Callable[..., Rig], caplog: pytest.LogCaptureFixture
) -> None:
    async def crash(args: dict[str, Any], ctx: ToolContext) -> ToolOutcome:
        raise RuntimeError("bug in the tool")

    # update_plan's schema validates the arguments; the tool itself is this stand-in.
    crasher = Tool("update_plan", "", "think", "think", lambda a, c: Presentation("Crash"), crash)
    r = rig([{"tool_calls": [call("c1", "update_plan", PLAN)]}, {"text": "Hm."}], tools=[crasher])
    with caplog.at_level(logging.ERROR):
        told = await model_was_told(r, "c1")
    assert "failed unexpectedly" in told and "bug in the tool" in told
    assert "bug in the tool" in caplog.text


# --- cancel at each await ---------------------------------------------------------------------


async def test_cancel_while_waiting_for_the_model(rig: Callable[..., Rig]) -> None:
    r = rig(
        [{"tool_calls": [call("c1", "update_plan", PLAN)]}, {"text": "late", "delay_ms": 60_000}]
    )
    await r.cancel_when(lambda: len(r.backend.requests) == 2)
    assert [m.role for m in r.turn.history] == ["user", "assistant", "tool"]  # nothing half-said
    assert "late" not in r.texts()


async def test_cancel_while_the_reply_streams_keeps_what_was_shown(
    rig: Callable[..., Rig],
) -> None:
    r = rig(
        [
            {
                "text": "one two three",
                "delay_ms": 20,
                "tool_calls": [call("c1", "update_plan", PLAN)],
            }
        ]
    )
    await r.cancel_when(lambda: bool(r.texts()))
    assert r.texts() == ["one "]
    last = r.turn.history[-1]
    assert (last.role, last.text, last.tool_calls) == ("assistant", "one ", ())
    assert r.announced() == []


async def test_cancel_during_a_tool_closes_it_and_answers_every_call(
    rig: Callable[..., Rig],
) -> None:
    editor = FakeEditor(fs=False, terminal=True)
    calls = [call("c1", "run_command", {"command": "sleep 30"}), call("c2", "list_directory", {})]
    r = rig([{"tool_calls": calls}], editor=editor)
    await r.cancel_when(lambda: "in_progress" in r.statuses("c1"))
    assert r.results() == {"c1": CANCELLED_RESULT, "c2": CANCELLED_RESULT}
    assert r.announced() == ["c1"]  # the second call was never started
    assert r.last_update("c1")["content"][0]["content"]["text"] == CANCELLED_RESULT
    assert editor.running() == [] and editor.unreleased() == []


class AwayEditor(FakeEditor):
    """Shows permission requests and never answers them (the user is away)."""

    async def request_permission(self, params: dict[str, Any]) -> dict[str, Any]:
        self.permission_requests.append(params)
        await asyncio.Event().wait()
        raise AssertionError("never answered")


async def test_cancel_during_a_permission_request_runs_nothing(rig: Callable[..., Rig]) -> None:
    editor = AwayEditor(fs=False, terminal=True)
    r = rig(
        [{"tool_calls": [call("c1", "run_command", {"command": "touch ran"})]}],
        mode="ask",
        editor=editor,
    )
    await r.cancel_when(lambda: bool(editor.permission_requests))
    assert r.statuses("c1") == ["pending", "failed"]
    assert r.results() == {"c1": CANCELLED_RESULT}
    assert editor.terminals == {} and not (r.cwd / "ran").exists()
