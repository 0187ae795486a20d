"""Slash commands over the wire: announced right AFTER the session/new, load and resume
responses (JetBrains hangs when a notification comes first), handled by the agent and never
sent to the model; an unknown `/word` goes to the model as text."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from tests.support.context_session import (
    ReaderSession,
    start_reader,
    summary_requests,
    turn_requests,
    updates_of,
    write_files,
)
from tests.support.mock_llm import MockLLM
from tests.support.mock_llm.view import conversation
from tests.support.raw import Frame, is_commands_update

Start = Callable[..., Any]


def announced_after(seen: list[Frame], req_id: int) -> list[str]:
    """The commands announced after the answer to `req_id`; fails if one came before it."""
    answer = next(i for i, f in enumerate(seen) if "method" not in f and f.get("id") == req_id)
    before = [f for f in seen[:answer] if is_commands_update(f)]
    assert before == [], "available_commands_update came before the response"
    after = [f for f in seen[answer + 1 :] if is_commands_update(f)]
    assert after, "no available_commands_update after the response"
    commands = after[0]["params"]["update"]["availableCommands"]
    return [c["name"] for c in commands]


async def test_commands_are_announced_after_new_load_and_resume(
    server_factory: Start, mock_llm: MockLLM, tmp_path: Path
) -> None:
    reader = await start_reader(server_factory, mock_llm, tmp_path)
    server = reader.server
    (new_id,) = [f["id"] for f in server.seen if f.get("result", {}).get("sessionId")]
    assert announced_after(server.seen, new_id) == ["compact", "clear", "help", "model", "mode"]
    await reader.prompt("hello")
    for method in ("session/load", "session/resume"):
        params = {"sessionId": reader.session, "cwd": str(tmp_path), "mcpServers": []}
        count = len(server.seen)
        answer = await server.request(method, params)
        assert "result" in answer, answer
        assert announced_after(server.seen[count:], answer["id"]) == [
            "compact",
            "clear",
            "help",
            "model",
            "mode",
        ]


async def test_help_is_answered_by_the_agent(
    server_factory: Start, mock_llm: MockLLM, tmp_path: Path
) -> None:
    reader = await start_reader(server_factory, mock_llm, tmp_path)
    turn = await reader.prompt("/help")
    assert turn.stop == "end_turn"
    assert "/compact" in turn.text and "/clear" in turn.text and "/help" in turn.text
    assert mock_llm.chat_requests == []


async def test_mode_and_model_are_commands_too(
    server_factory: Start, mock_llm: MockLLM, tmp_path: Path
) -> None:
    reader = await start_reader(server_factory, mock_llm, tmp_path)
    listing = await reader.prompt("/mode")
    assert listing.stop == "end_turn" and "accept_edits" in listing.text
    switched = await reader.prompt("/mode plan")
    assert switched.stop == "end_turn"
    modes = [
        u["currentModeId"] for u in switched.seen if u["sessionUpdate"] == "current_mode_update"
    ]
    assert modes == ["plan"]
    models = await reader.prompt("/model")
    assert models.stop == "end_turn" and models.text
    assert mock_llm.chat_requests == []  # none of them reached the model


async def test_an_unknown_slash_word_goes_to_the_model(
    server_factory: Start, mock_llm: MockLLM, tmp_path: Path
) -> None:
    reader = await start_reader(server_factory, mock_llm, tmp_path)
    turn = await reader.prompt("/frobnicate the widget")
    assert turn.stop == "end_turn"
    (request,) = mock_llm.chat_requests
    assert conversation(request.json)[-1].text == "/frobnicate the widget"


async def talked(server_factory: Start, mock: MockLLM, cwd: Path) -> ReaderSession:
    """A session with three answered turns, in a window they fit without compaction."""
    names = write_files(cwd, 3, 1500)
    reader = await start_reader(server_factory, mock, cwd, "--context-window", "65536")
    for name in names:
        assert (await reader.ask(name)).stop == "end_turn"
    assert summary_requests(mock) == []
    return reader


async def test_compact_with_a_focus_summarizes_now(
    server_factory: Start, mock_llm: MockLLM, tmp_path: Path
) -> None:
    reader = await talked(server_factory, mock_llm, tmp_path)
    turn = await reader.prompt("/compact the parser work")
    assert turn.stop == "end_turn"
    assert "Compacted the conversation" in turn.text
    (summary,) = summary_requests(mock_llm)
    assert "focus on: the parser work" in conversation(summary.json)[-1].text
    await reader.ask("file0.txt")
    sent = conversation(turn_requests(mock_llm)[-2].json)
    assert sent[1].text.startswith("[Earlier conversation, compacted")
    assert all("/compact" not in t.text for t in sent)  # the command never reaches the model


async def test_clear_starts_a_fresh_context_and_the_transcript_keeps_the_rest(
    server_factory: Start, mock_llm: MockLLM, tmp_path: Path
) -> None:
    reader = await talked(server_factory, mock_llm, tmp_path)
    turn = await reader.prompt("/clear")
    assert turn.stop == "end_turn" and "fresh context" in turn.text
    await reader.prompt("what now?")
    sent = conversation(mock_llm.chat_requests[-1].json)
    assert [t.role for t in sent] == ["system", "user"]
    assert sent[1].text == "what now?"
    params = {"sessionId": reader.session, "cwd": str(tmp_path), "mcpServers": []}
    req = await reader.server.call("session/load", params)
    _, before = await reader.server.response(req)
    shown = [
        u["content"]["text"]
        for u in updates_of(before)
        if u["sessionUpdate"] == "user_message_chunk"
    ]
    assert len(shown) == 5 and shown[3:] == ["/clear", "what now?"]
