"""Long tool-heavy sessions that never overflow: the real `acp-server` against the mock LLM.

Each turn asks to read a file; the mock's `file_reader` responder calls `read_file` and then
answers with the file's first word, so every answer shows the turn really worked. The mock
counts tokens more strictly than the agent estimates (characters / 3.2 of the request's JSON).
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

from tests.support.context_session import (
    Turn,
    compactions,
    has_tool_shapes,
    overflowed_only_unknowing,
    start_reader,
    summary_requests,
    turn_requests,
    write_files,
)
from tests.support.mock_llm import MockLLM, Response
from tests.support.mock_llm.responders import file_reader
from tests.support.mock_llm.view import conversation, is_summary, tool_names

Start = Callable[..., Any]
PLAN = [
    {"content": "Read every file in the project", "status": "in_progress"},
    {"content": "Say how each one begins", "status": "pending"},
]
CARD = re.compile(r"about ([\d,]+) → ([\d,]+) tokens \(([^)]*)\)")


def planner() -> Callable[[dict[str, Any]], Response]:
    """`file_reader`, and a prompt that asks for a plan gets an `update_plan` call."""
    reader = file_reader()

    def respond(body: dict[str, Any]) -> Response:
        turns = conversation(body)
        if tool_names(body) and turns[-1].role == "user" and "make a plan" in turns[-1].text:
            return {"tool_calls": [{"name": "update_plan", "arguments": {"entries": PLAN}}]}
        if turns[-1].role == "tool" and "plan" in turns[-1].text.lower():
            return {"text": "Planned."}
        return reader(body)

    return respond


def sizes(turn: Turn) -> list[tuple[int, int, str]]:
    """(before, after, how) of each compaction the turn showed, from its one-line result."""
    found = []
    for update in compactions(turn.seen):
        for block in update.get("content") or []:
            match = CARD.search(block["content"]["text"])
            if match:
                before, after = (int(match[k].replace(",", "")) for k in (1, 2))
                found.append((before, after, match[3]))
    return found


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
        ours = turn.answer["result"].get("_meta", {}).get("acpServer", {})
        assert not {"turnFailed", "notSaved"} & set(ours), turn.answer
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
    assert overflowed_only_unknowing(mock_llm)
    offered = tool_names(turn_requests(mock_llm)[-1].json)
    assert "read_file" in offered and len(offered) < 8  # the compact profile left some out
    # The huge file's result is the newest; older ones may still be there, pruned or whole.
    *_, result = [
        m for m in turn_requests(mock_llm)[-1].json["messages"] if m.get("role") == "tool"
    ]
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
    # It really was cut: the server was sent well over what it said it read (by the mock's own
    # count; how far over moves with the length of the working directory in the prompt).
    assert max(mock_llm.counted[:warned_at]) > 6144 * 1.25
    assert all(tokens <= 6144 for tokens in mock_llm.counted[warned_at:])


async def test_sixty_turns_of_6kb_reads_in_8k_summarize_about_every_third_turn(
    server_factory: Start, mock_llm: MockLLM, tmp_path: Path
) -> None:
    """The window holds little more than one read: most turns prune, a summary runs about
    every third turn, and every request still carries the latest request, the plan and the
    files read so far."""
    mock_llm.report_window = 8192
    mock_llm.strict_tools = True
    mock_llm.responder = planner()
    names = write_files(tmp_path, 6, 6000)
    reader = await start_reader(server_factory, mock_llm, tmp_path)
    assert (await reader.prompt("First make a plan, please.")).stop == "end_turn"
    for n in range(60):
        before = len(mock_llm.chat_requests)
        turn = await reader.ask(names[n % len(names)])
        assert turn.stop == "end_turn", (n, turn.text)
        assert f"The file begins with word{n % len(names)}." in turn.text, (n, turn.text)
        for request in mock_llm.chat_requests[before:]:
            if is_summary(request.json):
                continue  # a summary request
            sent = conversation(request.json)
            text = "\n".join([*(t.text for t in sent), *(str(c) for t in sent for c in t.calls)])
            # The latest request: its own message, or verbatim in the state of a compaction
            # made in this turn's tool round.
            assert f"Please read {names[n % len(names)]} and tell me how it begins." in text
            assert all(entry["content"] in text for entry in PLAN), n
            assert all(name in text for name in names[: min(n, len(names))]), n
    # At most one summary round every third turn (issue 19). At 8,192 tokens the tools are
    # offered in the compact profile (the full one would take over a quarter of the window), so
    # a 6 KB read leaves room for a few turns: ~9 summaries here (benchmarks/compaction.py
    # reports the figure). Main before the compaction change: 60.
    assert len(summary_requests(mock_llm)) <= 20, len(summary_requests(mock_llm))
    assert mock_llm.invalid == []


async def test_a_hundred_short_turns_with_long_paths_never_compact_for_nothing(
    server_factory: Start, mock_llm: MockLLM, tmp_path: Path
) -> None:
    """The default window, prompts and tool arguments naming files deep in long folders: no
    compaction grows the history, and two turns in a row compact only when a summary freed
    room in the first (never the same useless compaction again)."""
    mock_llm.strict_tools = True
    deep = tmp_path / ("a_rather_long_folder_name_for_this_project/" * 4)
    deep.mkdir(parents=True)
    names = [str(deep / n) for n in write_files(deep, 10, 200, prefix="module_")]
    reader = await start_reader(server_factory, mock_llm, tmp_path)
    for n in range(100):
        turn = await reader.ask(names[n % len(names)])
        assert turn.stop == "end_turn", (n, turn.text)
        assert f"The file begins with word{n % len(names)}." in turn.text, (n, turn.text)
    shown = [sizes(t) for t in reader.turns]
    assert any(shown), "100 turns in 8,192 tokens must have compacted"
    assert all(after < before for turn in shown for before, after, _ in turn), shown
    for n, (first, second) in enumerate(itertools.pairwise(shown)):
        freed = any(how == "older messages summarized" for _, _, how in first)
        assert not (first and second) or freed, (n, first, second)
    assert mock_llm.invalid == []
