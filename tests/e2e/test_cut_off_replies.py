"""Replies the model did not finish, over real pipes against the mock LLM: what the user is told,
what the turn answers, and what the store keeps (read back from the store itself, and what the
next request sends the model).

- text cut off by the output limit: said (a notice, or a line for editors without notices), the
  stop reason stays `max_tokens`, the partial reply is stored marked as cut;
- a tool call cut off: never run, answered as cut off by the output limit (not as cancelled);
- an empty reply: a worded failure, and no empty assistant message is stored;
- a summary cut off: a failed summary (the older messages are dropped behind a note instead).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from acp_server.agent.turn_text import CANCELLED_RESULT, CUT_OFF_MARK, CUT_OFF_RESULT
from acp_server.messages import Message
from acp_server.store import transcript
from acp_server.store.database import Store
from tests.e2e.test_backends_e2e import message_text, open_agent, tool_results
from tests.support.context_session import (
    ReaderSession,
    Start,
    compactions,
    said,
    start_reader,
    summary_requests,
    updates_of,
)
from tests.support.mock_llm import MockLLM
from tests.support.mock_llm.view import conversation

NOTICES: dict[str, Any] = {"session": {"notices": {}}}


async def stored(reader: ReaderSession, data_dir: Path) -> list[Message]:
    """The session's model history as the store holds it."""
    await reader.server.request("session/list", {})  # waits for the store's writes
    store = Store(data_dir / "sessions.sqlite3")
    try:
        return transcript.restore(store.events(reader.session), store.blob).history
    finally:
        store.close()


def notices(seen: list[dict[str, Any]]) -> list[str]:
    return [u["title"] for u in seen if u["sessionUpdate"] == "notice"]


async def test_cut_off_text_is_said_stored_marked_and_ends_max_tokens(
    server_factory: Start, mock_llm: MockLLM, tmp_path: Path, private_data_dir: Path
) -> None:
    reader = await start_reader(server_factory, mock_llm, tmp_path)
    mock_llm.queue({"text": "The plan has three steps: first", "finish": "length"})
    turn = await reader.prompt("Explain the plan.")
    assert turn.stop == "max_tokens"
    assert turn.text.startswith("The plan has three steps: first")
    assert "The reply was cut off" in turn.text  # an editor without notices: a line
    assert "the limit is the model server's own" in turn.text  # no max_tokens was sent
    history = await stored(reader, private_data_dir)
    assert [m.role for m in history] == ["user", "assistant"]
    assert history[-1].text == "The plan has three steps: first" + CUT_OFF_MARK

    mock_llm.queue({"text": "Second and third."})
    await reader.prompt("continue")
    sent = conversation(mock_llm.chat_requests[-1].json)
    assert any(m.role == "assistant" and m.text.endswith(CUT_OFF_MARK.strip()) for m in sent)

    await reader.server.stop()  # a fresh server replays what the user saw, the line included
    again = await start_reader(server_factory, mock_llm, tmp_path)
    load = {"sessionId": reader.session, "cwd": str(tmp_path), "mcpServers": []}
    answer, before = await again.server.response(await again.server.call("session/load", load))
    assert "result" in answer, answer
    replayed = said(updates_of(before))
    assert replayed.startswith("The plan has three steps: first")
    assert "The reply was cut off" in replayed and CUT_OFF_MARK.strip() not in replayed


async def test_cut_off_text_is_a_notice_for_an_editor_that_shows_notices(
    server_factory: Start, mock_llm: MockLLM, tmp_path: Path
) -> None:
    reader = await start_reader(
        server_factory, mock_llm, tmp_path, "--context-window", "8192", capabilities=NOTICES
    )
    mock_llm.queue({"text": "Partial answer", "finish": "length"})
    turn = await reader.prompt("Explain.")
    assert turn.stop == "max_tokens"
    assert turn.text == "Partial answer"
    (notice,) = notices(turn.seen)
    assert notice.startswith("The reply was cut off")
    # A known small window: the agent capped the reply (at the room the prompt leaves, at least
    # the reserve), and says which limit that was and how to raise it.
    limit = mock_llm.chat_requests[-1].json["max_tokens"]
    assert 2048 <= limit < 8192
    assert f"raise the limit of {limit:,} tokens (ACP_SERVER_REPLY_RESERVE" in notice


async def test_a_cut_off_tool_call_is_not_run_and_answered_as_cut_off(
    server_factory: Start, mock_llm: MockLLM, tmp_path: Path, private_data_dir: Path
) -> None:
    reader = await start_reader(server_factory, mock_llm, tmp_path)
    cut = '{"path": "notes.txt", "content": "line one\\nline'  # the JSON never closes
    call = {"id": "call_w1", "name": "write_file", "arguments": cut}
    mock_llm.queue({"text": "Writing it.", "tool_calls": [call], "finish": "length"})
    turn = await reader.prompt("Write notes.txt.")
    assert turn.stop == "max_tokens"
    assert not (tmp_path / "notes.txt").exists()
    assert not [u for u in turn.seen if u["sessionUpdate"] == "tool_call"]  # never started
    assert "call to write_file was cut off by its output token limit" in turn.text
    history = await stored(reader, private_data_dir)
    assert [m.role for m in history] == ["user", "assistant", "tool"]
    assert history[-1].tool_call_id == "call_w1"
    assert history[-1].text == CUT_OFF_RESULT
    assert CANCELLED_RESULT not in [m.text for m in history]


async def test_an_empty_reply_is_a_worded_failure_and_stores_no_empty_message(
    server_factory: Start, mock_llm: MockLLM, tmp_path: Path, private_data_dir: Path
) -> None:
    reader = await start_reader(server_factory, mock_llm, tmp_path)
    mock_llm.queue({"text": ""})
    turn = await reader.prompt("Hello?")
    assert turn.stop == "end_turn"
    failed = turn.answer["result"]["_meta"]["acpServer"]["turnFailed"]
    assert failed["reason"] == "model"
    assert failed["message"].startswith("The model sent an empty reply")
    assert "The model sent an empty reply" in turn.text
    history = await stored(reader, private_data_dir)
    assert [m.role for m in history] == ["user"]  # no empty assistant message


async def test_a_cut_off_summary_counts_as_a_failed_summary(
    server_factory: Start, mock_llm: MockLLM, tmp_path: Path, private_data_dir: Path
) -> None:
    reader = await start_reader(server_factory, mock_llm, tmp_path)
    for n in range(3):
        mock_llm.queue({"text": f"Answer {n}."})
        await reader.prompt(f"Question {n}.")
    half = "## Goal\nThe user asked three questions and the"
    mock_llm.queue({"text": half, "finish": "length"})
    turn = await reader.prompt("/compact")
    assert len(summary_requests(mock_llm)) == 1
    (card,) = compactions(turn.seen)
    line = card["content"][0]["content"]["text"]
    # The half summary is not used: the fallback removes older messages, or there is nothing
    # it needs to remove (the recent exchanges all fit), never "summarized".
    assert "summarized" not in line
    assert "older messages removed" in line or "Nothing to compact" in line, line
    history = await stored(reader, private_data_dir)
    assert not any(half in m.text for m in history)


@pytest.mark.parametrize("dialect", ["openai", "anthropic", "ollama"])
async def test_every_dialect_answers_a_cut_off_call_as_cut_off(
    server_factory: Start, mock_llm: MockLLM, tmp_path: Path, dialect: str
) -> None:
    agent = await open_agent(server_factory, mock_llm, dialect, tmp_path)
    call = {"id": "call_w1", "name": "write_file", "arguments": '{"path": "n.txt", "content": "a'}
    mock_llm.queue({"text": "Writing.", "tool_calls": [call], "finish": "length"})
    stop, seen = await agent.prompt("Write n.txt.")
    assert stop == "max_tokens"
    assert not (tmp_path / "n.txt").exists()
    assert "was cut off by its output token limit" in message_text(seen)
    mock_llm.queue({"text": "Again, in parts."})
    await agent.prompt("continue")
    results = tool_results(dialect, mock_llm.chat_requests[-1])
    assert list(results.values()) == [CUT_OFF_RESULT]
