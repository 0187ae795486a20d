"""How a failed turn is reported upwards: agent.Turn.failure → Session → the prompt response."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

from acp_server import updates
from acp_server.agent.history import History
from acp_server.agent.loop import Turn, TurnFailure, run_turn
from acp_server.backends.scripted import ScriptedBackend
from acp_server.editor_api import NoEditor
from acp_server.messages import Event, ModelRequest, StreamError, TextDelta, text_message
from acp_server.permissions import Permissions, RuleStore
from acp_server.protocol.handlers import prompt_response
from acp_server.session.session import PromptOutcome, Session
from acp_server.session.text import INTERNAL_FAILURE
from acp_server.session.voice import PlainVoice
from acp_server.settings import Settings
from acp_server.store.transcript import NullRecorder


class Fails:
    """A backend whose stream ends with an error after some text."""

    label = "fails"

    async def context_window(self) -> int | None:
        return None

    async def stream(self, request: ModelRequest) -> AsyncIterator[Event]:
        yield TextDelta("Partly")
        yield StreamError("The server hung up.")


class Crashes:
    """A backend with a bug: the loop gets an exception, not an event."""

    label = "crashes"

    async def context_window(self) -> int | None:
        return None

    async def stream(self, request: ModelRequest) -> AsyncIterator[Event]:
        raise RuntimeError("a bug")
        yield TextDelta("never")  # pragma: no cover - makes this an async generator


async def test_run_turn_records_a_backend_error_as_the_turns_failure() -> None:
    seen: list[updates.Update] = []
    history = History([text_message("user", "hi")])
    turn = Turn(Fails(), history, seen.append, PlainVoice(seen.append))
    assert await run_turn(turn) == "end_turn"
    assert turn.failure == TurnFailure("model", "The server hung up.")


async def test_a_normal_turn_has_no_failure(tmp_path: Path) -> None:
    script = tmp_path / "s.json"
    script.write_text('[{"text": "Hello."}]', encoding="utf-8")
    ignore = lambda u: None  # noqa: E731
    turn = Turn(
        ScriptedBackend(script), History([text_message("user", "hi")]), ignore, PlainVoice(ignore)
    )
    assert await run_turn(turn) == "end_turn"
    assert turn.failure is None


async def test_session_passes_model_and_internal_failures_up(tmp_path: Path) -> None:
    seen: list[updates.Update] = []
    for backend, expected in (
        (Fails(), TurnFailure("model", "The server hung up.")),
        (Crashes(), TurnFailure("internal", INTERNAL_FAILURE)),
    ):
        session = Session(
            "s",
            cwd=tmp_path,
            backend=backend,
            editor=NoEditor(),
            recorder=NullRecorder(),
            permissions=Permissions(RuleStore(tmp_path, tmp_path / "data")),
            settings=Settings(),
            send_update=lambda _id, u: seen.append(u),
        )
        outcome = await session.prompt(text_message("user", "hi"))
        assert outcome == PromptOutcome("end_turn", expected)


def test_the_prompt_response_carries_the_failure_in_meta() -> None:
    assert prompt_response(PromptOutcome("end_turn")) == {"stopReason": "end_turn"}
    failed = prompt_response(PromptOutcome("end_turn", TurnFailure("internal", "Oops.")))
    assert failed == {
        "stopReason": "end_turn",
        "_meta": {"acpServer": {"turnFailed": {"reason": "internal", "message": "Oops."}}},
    }
