"""At `--max-turn-requests`, over real pipes against the mock LLM: one last round in which the
model may only say where it stopped (shown, stored), then the user is told why the turn ended,
and the stop reason is `max_turn_requests`. A tool the model still calls then is not run."""

from __future__ import annotations

from pathlib import Path

from tests.e2e.test_cut_off_replies import stored
from tests.support.context_session import Start, start_reader
from tests.support.mock_llm import MockLLM
from tests.support.mock_llm.view import conversation


def read(name: str) -> dict[str, object]:
    return {"tool_calls": [{"name": "read_file", "arguments": {"path": name}}]}


async def test_the_last_round_says_where_the_model_stopped(
    server_factory: Start, mock_llm: MockLLM, tmp_path: Path, private_data_dir: Path
) -> None:
    for name in ("a.txt", "b.txt", "c.txt"):
        (tmp_path / name).write_text(f"{name} text\n", encoding="utf-8")
    reader = await start_reader(server_factory, mock_llm, tmp_path, "--max-turn-requests", "2")
    last = "I read a.txt and b.txt; c.txt is still to do."
    mock_llm.queue(read("a.txt"), read("b.txt"), {"text": last})
    turn = await reader.prompt("Read a.txt, b.txt and c.txt.")
    assert turn.stop == "max_turn_requests"
    assert len(mock_llm.chat_requests) == 3
    final = mock_llm.chat_requests[-1].json
    said = conversation(final)
    assert "used all 2 model requests" in said[-1].text  # a note after the last tool result
    assert said[0].text == conversation(mock_llm.chat_requests[0].json)[0].text  # the system
    assert "tools" in final  # still offered: strict endpoints want them beside tool calls
    assert turn.text.index(last) < turn.text.index("The turn stopped after 2 model requests")
    history = await stored(reader, private_data_dir)
    assert history[-1].role == "assistant" and history[-1].text == last


async def test_a_tool_called_in_the_last_round_is_not_run(
    server_factory: Start, mock_llm: MockLLM, tmp_path: Path, private_data_dir: Path
) -> None:
    reader = await start_reader(server_factory, mock_llm, tmp_path, "--max-turn-requests", "1")
    write = {"name": "write_file", "arguments": {"path": "out.txt", "content": "x"}}
    mock_llm.queue(read("missing.txt"), {"text": "One more write.", "tool_calls": [write]})
    turn = await reader.prompt("Go.")
    assert turn.stop == "max_turn_requests"
    assert not (tmp_path / "out.txt").exists()
    history = await stored(reader, private_data_dir)
    assert history[-1].role == "tool"
    assert history[-1].text.startswith("Not run: the turn had reached its limit")
