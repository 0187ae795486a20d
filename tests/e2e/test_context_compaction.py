"""Compaction over the wire: a summary that fails falls back to truncation, a summary that is
too long never loops, a cancel during the summary leaves a working session, the compaction is
shown (card or `compaction_update`), and `session/load` continues from the compacted history
while its replay shows the conversation as the user saw it."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.support.context_session import (
    ReaderSession,
    compactions,
    overflowed_only_unknowing,
    start_reader,
    summary_requests,
    turn_requests,
    updates_of,
    write_files,
)
from tests.support.mock_llm import MockLLM, Response
from tests.support.mock_llm.responders import file_reader
from tests.support.mock_llm.view import conversation, is_summary

Start = Callable[..., Any]
SUMMARY_HEADING = "[Earlier conversation, compacted"


def summaries_answer(answer: Response) -> Callable[[dict[str, Any]], Response]:
    """`file_reader`, but every summary request gets `answer`."""
    reader = file_reader()

    def respond(body: dict[str, Any]) -> Response:
        return dict(answer) if is_summary(body) else reader(body)

    return respond


async def small_window(
    server_factory: Start, mock: MockLLM, cwd: Path, **kw: Any
) -> tuple[ReaderSession, list[str]]:
    mock.window = 4096
    mock.report_window = 4096
    mock.strict_tools = True
    names = write_files(cwd, 4, 2000)
    return await start_reader(server_factory, mock, cwd, **kw), names


def lines(turn_seen: list[dict[str, Any]]) -> list[str]:
    """The one-line results of a turn's compaction cards."""
    return [u["content"][0]["content"]["text"] for u in compactions(turn_seen) if u.get("content")]


PRUNED = "older tool outputs removed"


def summarized_or_cut(reader: ReaderSession) -> list[str]:
    """The result lines of the compactions that went past pruning (a summary was tried)."""
    return [line for t in reader.turns for line in lines(t.seen) if PRUNED not in line]


@pytest.mark.parametrize(
    "failure",
    [{"fault": "status", "status": 500}, {"text": ""}],
    ids=["500", "empty"],
)
async def test_a_failing_summary_falls_back_to_truncation(
    server_factory: Start, mock_llm: MockLLM, tmp_path: Path, failure: Response
) -> None:
    mock_llm.responder = summaries_answer(failure)
    reader, names = await small_window(server_factory, mock_llm, tmp_path)
    # Three compactions past pruning: two failed summaries, then one that does not ask.
    await reader.read_until(names, lambda: len(summarized_or_cut(reader)) >= 3)
    assert all("older messages removed" in line for line in summarized_or_cut(reader))
    # After two failed summaries in a row the session stops asking for one.
    assert len(summary_requests(mock_llm)) <= 2 * (2 if "fault" in failure else 1)
    assert overflowed_only_unknowing(mock_llm) and mock_llm.invalid == []


async def test_a_summary_longer_than_what_it_replaced_never_loops(
    server_factory: Start, mock_llm: MockLLM, tmp_path: Path
) -> None:
    mock_llm.responder = summaries_answer({"text": "The conversation went on. " * 600})
    reader, names = await small_window(server_factory, mock_llm, tmp_path)
    await reader.read_until(names, lambda: len(summarized_or_cut(reader)) >= 3)
    for turn in reader.turns:  # at most one compaction before each model request, no loop
        assert len(compactions(turn.seen)) <= 2, turn.seen
    total = sum(len(compactions(t.seen)) for t in reader.turns)
    assert 0 < total <= len(turn_requests(mock_llm))
    assert all("older messages removed" in line for line in summarized_or_cut(reader))
    assert len(summary_requests(mock_llm)) == 2  # then the session goes straight to truncation


async def test_a_cancel_during_the_summary_leaves_a_working_session(
    server_factory: Start, mock_llm: MockLLM, tmp_path: Path
) -> None:
    asked = asyncio.Event()  # a summary request reached the model server
    reader_turns = file_reader()

    def respond(body: dict[str, Any]) -> Response:
        if not is_summary(body):
            return reader_turns(body)
        asked.set()
        return {"fault": "slow_first_byte", "seconds": 10, "text": "late"}

    mock_llm.responder = respond
    reader, names = await small_window(server_factory, mock_llm, tmp_path)
    server = reader.server
    for n in range(24):  # until a turn waits for a summary, however many turns that takes
        params = {"sessionId": reader.session, "prompt": [{"type": "text", "text": names[n % 4]}]}
        req = await server.call("session/prompt", params)
        answered = asyncio.ensure_future(server.response(req, timeout=30))
        waiting = asyncio.ensure_future(asked.wait())
        await asyncio.wait({answered, waiting}, return_when=asyncio.FIRST_COMPLETED)
        if asked.is_set():
            break
        waiting.cancel()
        assert answered.result()[0]["result"]["stopReason"] == "end_turn"
    assert asked.is_set(), "no summary was ever requested"
    await server.notify("session/cancel", {"sessionId": reader.session})
    answer, before = await answered
    assert answer["result"]["stopReason"] == "cancelled"
    *_, card = compactions(updates_of(before))  # a prune may have completed earlier
    assert card["status"] == "failed"
    mock_llm.responder = summaries_answer({"text": "Summary: files were read."})
    for n in range(3):
        turn = await reader.ask(names[n % 4])
        assert turn.stop == "end_turn", turn.text
        assert f"word{n % 4}" in turn.text
    assert mock_llm.invalid == []


async def test_compaction_updates_for_a_client_that_shows_them(
    server_factory: Start, mock_llm: MockLLM, tmp_path: Path
) -> None:
    caps: dict[str, Any] = {"session": {"compaction": {}}}
    reader, names = await small_window(server_factory, mock_llm, tmp_path, capabilities=caps)
    await reader.read_until(names, lambda: bool(summary_requests(mock_llm)))
    seen = [u for t in reader.turns for u in t.seen]
    assert any(u["sessionUpdate"] == "compaction_update" for u in seen)
    assert not any(str(u.get("toolCallId", "")).startswith("compact_") for u in seen)  # no card
    first = next(u for u in seen if u["sessionUpdate"] == "compaction_update")
    assert first["status"] == "in_progress"
    chunks = [u for u in seen if u["sessionUpdate"] == "compaction_summary_chunk"]
    assert chunks and all(c["compactionId"] for c in chunks)
    assert "Summary" in "".join(c["content"]["text"] for c in chunks)


async def test_load_continues_from_the_summary_and_replays_what_was_seen(
    server_factory: Start, mock_llm: MockLLM, tmp_path: Path
) -> None:
    reader, names = await small_window(server_factory, mock_llm, tmp_path)
    await reader.read_until(names, lambda: bool(summary_requests(mock_llm)))
    await reader.read_until(names, lambda: len(reader.turns) >= 5)
    prompts = [
        f"Please read {names[n % 4]} and tell me how it begins." for n in range(len(reader.turns))
    ]
    await reader.server.stop()
    again = await start_reader(server_factory, mock_llm, tmp_path)
    load = {"sessionId": reader.session, "cwd": str(tmp_path), "mcpServers": []}
    req = await again.server.call("session/load", load)
    answer, before = await again.server.response(req, timeout=20)
    assert "result" in answer, answer
    replay = updates_of(before)
    shown = [u["content"]["text"] for u in replay if u["sessionUpdate"] == "user_message_chunk"]
    assert shown == prompts  # the conversation as the user saw it, every prompt
    assert any(str(u.get("toolCallId", "")).startswith("compact_") for u in replay)
    again.session = reader.session
    await asyncio.sleep(0.05)
    turn = await again.ask(names[0])
    assert turn.stop == "end_turn"
    sent = conversation(turn_requests(mock_llm)[-2].json)
    assert sent[0].role == "system" and sent[1].role == "user"
    assert sent[1].text.startswith(SUMMARY_HEADING)  # the model continues from the summary
