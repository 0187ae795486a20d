"""Long tool-heavy sessions that never overflow: the real `acp-server` against the mock LLM.

Each turn asks to read a file; the mock's `file_reader` responder calls `read_file` and then
answers with the file's first word, so every answer shows the turn really worked. The mock
counts tokens more strictly than the agent estimates (characters / 3.2 of the request's JSON).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from tests.support.context_session import (
    compactions,
    has_tool_shapes,
    start_reader,
    summary_requests,
    turn_requests,
    write_files,
)
from tests.support.mock_llm import MockLLM
from tests.support.mock_llm.view import tool_names

Start = Callable[..., Any]


async def test_sixty_turns_in_an_enforced_window_the_agent_was_told_is_larger(
    server_factory: Start, mock_llm: MockLLM, tmp_path: Path
) -> None:
    """8,192 tokens enforced llama.cpp-style and never reported; the agent is configured for
    32,768. The first overflow teaches the window; none is sent after it."""
    mock_llm.window = 8192
    mock_llm.strict_tools = True
    names = write_files(tmp_path, 6, 6000)
    reader = await start_reader(server_factory, mock_llm, tmp_path, "--context-window", "32768")
    for n in range(60):
        turn = await reader.ask(names[n % len(names)])
        assert turn.stop == "end_turn", (n, turn.text)
        assert f"The file begins with word{n % len(names)}." in turn.text, (n, turn.text)
        assert "_meta" not in turn.answer["result"], turn.answer
    assert len(mock_llm.overflows) <= 1
    assert mock_llm.invalid == []  # every history sent passed the strict tool validator
    summaries = summary_requests(mock_llm)
    assert summaries, "a 60-turn session in 8K must have been summarized"
    assert not any(has_tool_shapes(r) for r in summaries)
    assert sum(len(compactions(t.seen)) for t in reader.turns) >= len(summaries)


async def test_sixty_turns_in_a_reported_window_never_exceed_it(
    server_factory: Start, mock_llm: MockLLM, tmp_path: Path
) -> None:
    """The window is only reported (`/v1/models`), never enforced: no request exceeds it."""
    mock_llm.report_window = 8192
    mock_llm.strict_tools = True
    names = write_files(tmp_path, 6, 6000)
    reader = await start_reader(server_factory, mock_llm, tmp_path)
    for n in range(60):
        turn = await reader.ask(names[n % len(names)])
        assert turn.stop == "end_turn", (n, turn.text)
        assert f"word{n % len(names)}" in turn.text
    assert max(mock_llm.counted) <= 8192
    assert mock_llm.invalid == []


async def test_a_small_window_uses_the_compact_profile_and_clips_a_huge_file(
    server_factory: Start, mock_llm: MockLLM, tmp_path: Path
) -> None:
    """4,096 tokens: 30 turns of ~2 KB files, then a 40 KB file whose result is clipped."""
    mock_llm.window = 4096
    mock_llm.report_window = 4096
    mock_llm.strict_tools = True
    names = write_files(tmp_path, 5, 2000)
    (huge,) = write_files(tmp_path, 1, 40_000, prefix="huge")
    reader = await start_reader(server_factory, mock_llm, tmp_path)
    for n in range(30):
        turn = await reader.ask(names[n % len(names)])
        assert turn.stop == "end_turn", (n, turn.text)
        assert f"word{n % len(names)}" in turn.text
    turn = await reader.ask(huge)
    assert turn.stop == "end_turn", turn.text
    assert "The file begins with word0." in turn.text
    assert mock_llm.overflows == []
    offered = tool_names(turn_requests(mock_llm)[-1].json)
    assert "read_file" in offered and len(offered) < 8  # the compact profile left some out
    (result,) = [m for m in turn_requests(mock_llm)[-1].json["messages"] if m.get("role") == "tool"]
    assert "cut here" in result["content"] and "read_file" in result["content"]
    assert len(result["content"]) < 20_000


async def test_a_server_that_cuts_the_prompt_silently_is_caught_once(
    server_factory: Start, mock_llm: MockLLM, tmp_path: Path
) -> None:
    """The mock reports `prompt_tokens` capped at 6,144 while the agent sends far more: one
    warning in the session, and every later request fits 6,144."""
    mock_llm.cap_prompt_tokens = 6144
    names = write_files(tmp_path, 6, 6000)
    reader = await start_reader(server_factory, mock_llm, tmp_path, "--context-window", "32768")
    warned_at = None
    for n in range(12):
        turn = await reader.ask(names[n % len(names)])
        assert turn.stop == "end_turn", (n, turn.text)
        if "dropped the start of the conversation" in turn.text and warned_at is None:
            warned_at = len(mock_llm.counted)
    assert warned_at is not None, "the cut was never noticed"
    warnings = [t for t in reader.turns if "dropped the start of the conversation" in t.text]
    assert len(warnings) == 1
    assert max(mock_llm.counted[:warned_at]) > 6144 / 0.7  # it really was cut, once
    assert all(tokens <= 6144 for tokens in mock_llm.counted[warned_at:])
