"""The context steps in a session, in process with a scripted model: what a compaction keeps,
a fixed part too large for the window, and the one retry after an overflow error."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from acp_server.backends.scripted import ScriptedBackend
from acp_server.context.state import is_state_message
from acp_server.messages import ModelRequest, text_message
from acp_server.session.registry import Sessions
from acp_server.session.session import Session
from acp_server.settings import Settings
from acp_server.updates import Update
from tests.support.fake_editor import FakeEditor, InProcessClient

PLAN = [
    {"content": "Read every notes file", "priority": "high", "status": "in_progress"},
    {"content": "Write the digest to out.txt", "priority": "medium", "status": "pending"},
]
OVERFLOW = (
    '{"error": {"code": 400, "type": "exceed_context_size_error", "n_prompt_tokens": 5000, '
    '"n_ctx": 4096, "message": "the request exceeds the available context size"}}'
)


def session_of(
    tmp_path: Path, backend: ScriptedBackend, window: int
) -> tuple[Session, list[Update]]:
    shown: list[Update] = []
    sessions = Sessions(
        backends=lambda: backend,
        editors=lambda _id: InProcessClient(FakeEditor(fs=False, terminal=False)),
        send_update=lambda _id, update: shown.append(update),
        settings=Settings(context_window=window),
    )
    return sessions.new(tmp_path, (), None), shown


def call(name: str, **arguments: Any) -> dict[str, Any]:
    return {"tool_calls": [{"name": name, "arguments": arguments}]}


def request_text(request: ModelRequest) -> str:
    parts = [m.text for m in request.messages]
    parts += [json.dumps(c.arguments) for m in request.messages for c in m.tool_calls]
    return "\n".join(parts)


async def test_every_compaction_keeps_the_request_the_plan_and_the_files(tmp_path: Path) -> None:
    turns = 8
    for n in range(turns):
        (tmp_path / f"notes{n}.txt").write_text(f"note {n}\n" + "detail " * 250, "utf-8")
    rounds: list[dict[str, Any]] = [call("update_plan", entries=PLAN)]
    for n in range(turns):
        rounds += [call("read_file", path=f"notes{n}.txt"), {"text": f"Noted {n}."}]
        if n == 2:
            rounds.insert(-1, call("write_file", path="out.txt", content="digest so far"))
    backend = ScriptedBackend.from_rounds(rounds)
    session, _ = session_of(tmp_path, backend, 3000)
    session.set_mode("bypass")
    compacted = 0
    for n in range(turns):
        prompt = f"Step {n}: read notes{n}.txt and keep going."
        start = len(backend.requests)
        outcome = await session.prompt(text_message("user", prompt))
        assert outcome.stop == "end_turn", outcome
        for request in backend.requests[start:]:
            if request.purpose != "turn" or not is_state_message(request.messages[0]):
                continue
            compacted += 1
            text = request_text(request)
            assert prompt in text  # the latest user request, verbatim
            assert all(entry["content"] in text for entry in PLAN)  # the current plan
            for earlier in range(n):
                assert f"notes{earlier}.txt" in text  # every file read before
            if n > 2:
                assert "out.txt" in text  # and the one edited
    assert compacted >= 3


async def test_a_prompt_larger_than_the_window_fails_the_turn_and_leaves_history(
    tmp_path: Path,
) -> None:
    backend = ScriptedBackend.from_rounds([{"text": "First answer."}])
    session, _ = session_of(tmp_path, backend, 4096)
    await session.prompt(text_message("user", "hello"))
    before = list(session.history)
    outcome = await session.prompt(text_message("user", "paste " * 20_000))
    assert outcome.stop == "end_turn"
    assert outcome.failure is not None and outcome.failure.reason == "context"
    assert "your message" in outcome.failure.message and "too many" in outcome.failure.message
    assert session.history[: len(before)] == before  # nothing compacted away
    assert len(backend.requests) == 1  # nothing was sent


async def test_an_overflow_error_is_compacted_and_retried_once(tmp_path: Path) -> None:
    rounds = [{"text": "Short answer."}] * 3 + [{"error": OVERFLOW}, {"text": "After the retry."}]
    backend = ScriptedBackend.from_rounds(rounds)
    session, shown = session_of(tmp_path, backend, 32768)
    for n in range(3):
        await session.prompt(text_message("user", f"question {n} " + "context " * 1500))
    outcome = await session.prompt(text_message("user", "and now?"))
    assert outcome.stop == "end_turn" and outcome.failure is None
    assert session.history[-1].text == "After the retry."
    turn_requests = [r for r in backend.requests if r.purpose == "turn"]
    assert len(turn_requests) == 5  # the refused request and its one retry
    assert is_state_message(turn_requests[-1].messages[0])  # compacted before the retry
    assert any(str(u.get("toolCallId", "")).startswith("compact_") for u in shown)


async def test_a_second_overflow_of_the_same_request_fails_the_turn(tmp_path: Path) -> None:
    backend = ScriptedBackend.from_rounds([{"error": OVERFLOW}] * 3)
    session, _ = session_of(tmp_path, backend, 32768)
    outcome = await session.prompt(text_message("user", "hi"))
    assert outcome.failure is not None and outcome.failure.reason == "model"
    assert len([r for r in backend.requests if r.purpose == "turn"]) == 2  # no loop


async def test_a_small_known_window_caps_the_reply_at_the_room_left(tmp_path: Path) -> None:
    """A small local model told nothing rambles until its window is full (minutes on a CPU):
    its reply is capped at the room the prompt leaves (more than the reserve of 1,024 tokens,
    which cut thinking models short); a hosted model with a large or unknown window keeps its
    own default."""
    rounds = [{"text": "Short answer."}] * 3
    small, _ = session_of(tmp_path, backend := ScriptedBackend.from_rounds(rounds), 4096)
    await small.prompt(text_message("user", "hello"))
    cap = backend.requests[-1].max_tokens
    assert cap is not None and 1024 < cap < 4096
    large, _ = session_of(tmp_path, backend := ScriptedBackend.from_rounds(rounds), 65536)
    await large.prompt(text_message("user", "hello"))
    assert backend.requests[-1].max_tokens is None
    unknown, _ = session_of(tmp_path, backend := ScriptedBackend.from_rounds(rounds), 0)
    await unknown.prompt(text_message("user", "hello"))
    assert backend.requests[-1].max_tokens is None
