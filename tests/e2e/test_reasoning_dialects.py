"""Thirty tool-using turns on each wire that carries a model's reasoning between tool rounds:
the real `acp-server` against strict mocks of the OpenAI Responses API (reasoning items that
must come back, each on its own and in order) and of Gemini 3's OpenAI-compatible API (a
thought signature that must come back on the tool call). No request is refused, compaction
summaries go through the same strict dialect and succeed, and the context meter shows the
window the server reports. And a switch to another vendor leaves the reasoning behind."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from tests.e2e.test_model_switching import (
    choose,
    files,
    new_session,
    prompt,
    start,
    text,
    tool_turn,
)
from tests.support.context_session import (
    ReaderSession,
    compactions,
    start_reader,
    summary_requests,
    turn_requests,
    write_files,
)
from tests.support.mock_llm import MockLLM
from tests.support.strict_gemini import signature_of

Start = Callable[..., Any]
WINDOW = 16_384
TURNS = 30


async def thirty_turns(reader: ReaderSession, names: list[str]) -> None:
    """Thirty turns, then more until a summary was asked for: in 16K most compactions only
    prune, and how many turns until a summary depends on the sizes (the working directory is
    in the system prompt)."""
    for n in range(TURNS):
        turn = await reader.ask(names[n % len(names)])
        assert turn.stop == "end_turn", (n, turn.text)
        assert f"The file begins with word{n % len(names)}." in turn.text, (n, turn.text)
    await reader.read_until(names, lambda: bool(summary_requests(reader.mock)), limit=60)


def check_session(reader: ReaderSession, mock: MockLLM) -> None:
    """No refusal, summaries that succeeded, and the reported window on every meter update."""
    assert mock.invalid == []
    summaries = summary_requests(mock)
    assert summaries, "no summary was asked for"
    finals = [c for t in reader.turns for c in compactions(t.seen)]
    assert finals and all(c.get("status") == "completed" for c in finals)
    assert not any("older messages removed" in str(c) for c in finals)
    sizes = {
        u["size"] for t in reader.turns for u in t.seen if u["sessionUpdate"] == "usage_update"
    }
    assert sizes == {WINDOW}


async def test_thirty_turns_on_the_responses_api_keep_the_reasoning(
    server_factory: Start, mock_llm: MockLLM, tmp_path: Path
) -> None:
    mock_llm.strict_dialect = True
    mock_llm.set(model="gpt-5", context_length=WINDOW)
    names = write_files(tmp_path, 6, 6000)
    reader = await start_reader(server_factory, mock_llm, tmp_path, model="openai-responses:gpt-5")
    await thirty_turns(reader, names)
    check_session(reader, mock_llm)
    assert {r.path for r in mock_llm.chat_requests} == {"/v1/responses"}
    # The summary rounds reasoned too (the mock issued their items): the same dialect.
    assert all(r.json.get("include") for r in summary_requests(mock_llm))
    # Every round after a tool call carried the reasoning items issued before that call.
    rounds = [
        r.json["input"]
        for r in turn_requests(mock_llm)
        if r.json["input"][-1]["type"] == "function_call_output"
    ]
    assert len(rounds) >= TURNS
    for items in rounds:
        kinds = [item.get("type") for item in items]
        assert kinds[-4:] == ["reasoning", "reasoning", "function_call", "function_call_output"]


async def test_thirty_turns_on_gemini_3_keep_the_thought_signatures(
    server_factory: Start, mock_llm: MockLLM, tmp_path: Path
) -> None:
    mock_llm.strict_dialect = True
    mock_llm.set(model="gemini-3-pro-preview", context_length=WINDOW)
    names = write_files(tmp_path, 6, 6000)
    reader = await start_reader(
        server_factory, mock_llm, tmp_path, model="openai:gemini-3-pro-preview"
    )
    await thirty_turns(reader, names)
    check_session(reader, mock_llm)
    rounds = [
        r.json["messages"]
        for r in turn_requests(mock_llm)
        if r.json["messages"][-1]["role"] == "tool"
    ]
    assert len(rounds) >= TURNS
    for messages in rounds:
        call = messages[-2]["tool_calls"][0]
        assert mock_llm.signatures[signature_of(call)] == "gemini-3-pro-preview"


async def test_a_responses_models_reasoning_goes_to_no_other_model(
    server_factory: Start, mock_llm: MockLLM, tmp_path: Path
) -> None:
    """gpt-5 on the Responses API, then Claude, then Ollama, then gpt-5 again: each switch
    drops the reasoning items (another vendor would refuse or misread them), none turns into
    text, and every strict endpoint accepts every request."""
    mock_llm.strict_dialect = True
    files(tmp_path, "a.py", "b.py", "c.py", "d.py")
    models = ("openai-responses:gpt-5", "anthropic:claude-sonnet-4-5", "ollama:model-c")
    server = await start(server_factory, mock_llm, models)
    session, _ = await new_session(server, tmp_path)
    mock_llm.queue(*tool_turn("a.py", thought="SECRET-REASONING about a."))
    assert (await prompt(server, session, text("Read a.py.")))[0] == "end_turn"
    resent = mock_llm.chat_requests[1].json["input"]
    assert [i["type"] for i in resent[1:3]] == ["reasoning", "reasoning"]
    for value, path in (
        ("anthropic:claude-sonnet-4-5", "b.py"),
        ("ollama:model-c", "c.py"),
        ("openai-responses:gpt-5", "d.py"),
    ):
        await choose(server, session, "model", value)
        mock_llm.queue(*tool_turn(path))
        before = len(mock_llm.chat_requests)
        assert (await prompt(server, session, text(f"Now read {path}.")))[0] == "end_turn"
        first = str(mock_llm.chat_requests[before].json)
        assert "gAAAA" not in first and "SECRET-REASONING" not in first, value
    assert mock_llm.invalid == []
    assert [r.path for r in mock_llm.chat_requests][::2] == [
        "/v1/responses",
        "/v1/messages",
        "/api/chat",
        "/v1/responses",
    ]
