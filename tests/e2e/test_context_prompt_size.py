"""Large prompts over the wire: what the user sees, what the model is sent, what is stored.

A prompt at 85-100 % of the budget is the user's own words: it is sent as written (never
wrapped in an "earlier messages were removed" note), and only older exchanges are compacted.
A prompt too large for the window is refused with a message saying why; it stays in what the
user sees (the replay shows it) but not in the history sent to the model, so the next turn
costs nothing extra.

Sizes are measured, not assumed: the first turn's request, as the mock counted it, gives the
fixed part (system prompt and tools, which name the working directory), and the agent has by
then learned how the server counts; the large prompt is sized from that.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path
from typing import Any

from acp_server.store.database import Store
from acp_server.store.transcript import Restored, restore
from tests.support.context_session import (
    ReaderSession,
    compactions,
    start_reader,
    summary_requests,
    turn_requests,
    updates_of,
    write_files,
)
from tests.support.mock_llm import MockLLM
from tests.support.mock_llm.view import CHARS_PER_TOKEN, conversation

Start = Callable[..., Any]
WINDOW = 8192
BUDGET = WINDOW - WINDOW // 4  # what a request may use: a quarter is kept for the reply
REMOVED_NOTE = "Earlier messages were removed"
NEAR = 0.9  # of the budget, as the server counts: the agent's estimate stays within 85-100 %


async def started(server_factory: Start, mock: MockLLM, cwd: Path) -> tuple[ReaderSession, int]:
    """A session whose first turn measured the fixed part (in the mock's tokens)."""
    mock.report_window = WINDOW
    reader = await start_reader(server_factory, mock, cwd)
    turn = await reader.prompt("Hello.")
    assert turn.stop == "end_turn", turn.text
    return reader, mock.counted[-1]


def prompt_of(share: float, fixed: int) -> str:
    """A prompt that brings the request to `share` of the budget as the mock counts (the
    agent's estimate follows the server's counts, from a little below)."""
    tokens = int(BUDGET * share) - fixed
    return "Please review this paste: " + "paste line " * int(tokens * CHARS_PER_TOKEN / 11)


def stored(data_dir: Path, session: str) -> Restored:
    """The session as the store keeps it (read the way `session/load` reads it)."""
    store = Store(data_dir / "sessions.sqlite3")
    try:
        return restore(store.events(session), store.blob)
    finally:
        store.close()


def last_user(request: Any) -> str:
    return [t.text for t in conversation(request.json) if t.role == "user"][-1]


def sent_anywhere(mock: MockLLM, text: str) -> bool:
    return any(text in t.text for r in mock.chat_requests for t in conversation(r.json))


async def test_a_near_budget_prompt_is_sent_as_written(
    server_factory: Start, mock_llm: MockLLM, tmp_path: Path, private_data_dir: Path
) -> None:
    reader, fixed = await started(server_factory, mock_llm, tmp_path)
    assert (await reader.prompt("/clear")).stop == "end_turn"  # the prompt alone, then
    big = prompt_of(NEAR, fixed)
    turn = await reader.prompt(big)
    assert turn.stop == "end_turn", turn.text
    assert BUDGET * 0.85 < mock_llm.counted[-1] <= BUDGET  # near the budget indeed
    assert compactions(turn.seen) == []  # nothing older to compact: nothing shown
    assert last_user(mock_llm.chat_requests[-1]) == big
    assert not sent_anywhere(mock_llm, REMOVED_NOTE)
    await reader.server.stop()
    (*_, stored_prompt, answer) = stored(private_data_dir, reader.session).history
    assert (stored_prompt.role, stored_prompt.text) == ("user", big)  # stored as written
    assert answer.role == "assistant"


async def test_a_near_budget_prompt_after_a_conversation_compacts_only_the_older_part(
    server_factory: Start, mock_llm: MockLLM, tmp_path: Path
) -> None:
    names = write_files(tmp_path, 3, 2000)
    reader, fixed = await started(server_factory, mock_llm, tmp_path)
    for name in names:
        assert (await reader.ask(name)).stop == "end_turn"
    big = prompt_of(NEAR, fixed)
    turn = await reader.prompt(big)
    assert turn.stop == "end_turn", turn.text
    assert [c["status"] for c in compactions(turn.seen)] == ["completed"]
    request = turn_requests(mock_llm)[-1]
    assert last_user(request) == big  # its own message, after the compacted older part
    assert sum(big in t.text for t in conversation(request.json)) == 1
    # The older part was condensed (pruned or summarized, whichever frees the room: the fixed
    # part decides), never truncated with the removal note.
    assert not sent_anywhere(mock_llm, REMOVED_NOTE)


async def test_a_refused_prompt_is_shown_but_never_sent_again(
    server_factory: Start, mock_llm: MockLLM, tmp_path: Path, private_data_dir: Path
) -> None:
    reader, fixed = await started(server_factory, mock_llm, tmp_path)
    requests = len(mock_llm.chat_requests)
    huge = prompt_of(1.5, fixed)
    turn = await reader.prompt(huge)
    assert turn.stop == "end_turn"
    assert "cannot fit the model's context window" in turn.text
    assert "your message" in turn.text  # it says which part is too large
    assert len(mock_llm.chat_requests) == requests  # nothing was sent
    # The next prompt costs one request: no summary round for the refused one.
    assert (await reader.prompt("Shorter, then: hello.")).stop == "end_turn"
    assert len(mock_llm.chat_requests) == requests + 1 and summary_requests(mock_llm) == []
    assert not sent_anywhere(mock_llm, huge)
    # Stored as the user saw it: the replay shows the prompt and the refusal; the model's
    # history leaves it out, after a load too.
    await reader.server.stop()
    assert huge not in [m.text for m in stored(private_data_dir, reader.session).history]
    again = await start_reader(server_factory, mock_llm, tmp_path)
    load = {"sessionId": reader.session, "cwd": str(tmp_path), "mcpServers": []}
    req = await again.server.call("session/load", load)
    answer, before = await again.server.response(req, timeout=20)
    assert "result" in answer, answer
    replay = updates_of(before)
    shown = [u["content"]["text"] for u in replay if u["sessionUpdate"] == "user_message_chunk"]
    assert huge in shown
    said = "".join(
        u["content"]["text"] for u in replay if u["sessionUpdate"] == "agent_message_chunk"
    )
    assert "cannot fit the model's context window" in said
    again.session = reader.session
    await asyncio.sleep(0.05)
    assert (await again.prompt("And again: hello.")).stop == "end_turn"
    assert not sent_anywhere(mock_llm, huge)
