"""The observed window is a hypothesis, never a wedge: over real pipes against the mock LLM.

A prompt count far below what was sent may be a server that cut the prompt, or a prompt cache
counting only the tokens it read anew (Ollama's `prompt_eval_count`). One such count lowers
nothing; a repeated one does, and then a request the lowered window cannot hold is sent anyway
and, coming back complete, raises the window again. No session is left refusing every prompt.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tests.e2e.test_backends_e2e import WINDOW, open_agent
from tests.support.context_session import Start, start_reader, write_files
from tests.support.mock_llm import MockLLM
from tests.support.mock_llm.responders import file_reader

LOW = {"prompt_tokens": 700, "completion_tokens": 5}


def sizes(seen: list[dict[str, Any]]) -> list[int]:
    return [u["size"] for u in seen if u["sessionUpdate"] == "usage_update"]


async def test_one_absurdly_low_prompt_count_leaves_the_session_answering(
    server_factory: Start, mock_llm: MockLLM, tmp_path: Path
) -> None:
    reader = await start_reader(server_factory, mock_llm, tmp_path)
    mock_llm.queue({"text": "First.", "usage": LOW})
    first = await reader.prompt("one")
    assert first.text == "First."
    for n in range(3):
        mock_llm.queue({"text": f"Answer {n}."})
        turn = await reader.prompt(f"question {n}")
        assert (turn.stop, turn.text) == ("end_turn", f"Answer {n}."), turn.text
        assert sizes(turn.seen) == [8192]  # the default window, never the 700 reported once
    assert "read only about" not in "".join(t.text for t in reader.turns)


async def test_a_repeated_low_count_lowers_the_window_and_a_complete_request_raises_it(
    server_factory: Start, mock_llm: MockLLM, tmp_path: Path
) -> None:
    reader = await start_reader(server_factory, mock_llm, tmp_path)
    mock_llm.queue({"text": "First.", "usage": LOW})
    await reader.prompt("one")
    mock_llm.queue({"text": "Second.", "usage": LOW})
    second = await reader.prompt("two")
    assert sizes(second.seen) == [700]  # twice the same cut: believed, and said
    assert "read only about 700" in second.text
    mock_llm.queue({"text": "Third."})
    third = await reader.prompt("Please look at this log: " + "error at line 12; " * 200)
    # A window of 700 tokens cannot hold that prompt: it is sent anyway, not refused ...
    assert (third.stop, third.text) == ("end_turn", "Third."), third.text
    assert sizes(third.seen) == [8192]  # ... read in full, the window is raised again
    mock_llm.queue({"text": "Fourth."})
    assert (await reader.prompt("four")).text == "Fourth."


async def test_ollama_cache_net_counts_never_shrink_the_window(
    server_factory: Start, mock_llm: MockLLM, tmp_path: Path
) -> None:
    """Each request after the first is counted net of the prompt cache: the size of what was
    new (a tool result of ~1,200 tokens is far below 70 % of the prompt)."""
    mock_llm.cache_net = True
    mock_llm.responder = file_reader()
    names = write_files(tmp_path, 4, 4000)
    agent = await open_agent(server_factory, mock_llm, "ollama", tmp_path)
    for n in range(8):
        stop, seen = await agent.prompt(f"Please read {names[n % 4]} and tell me how it begins.")
        said = "".join(
            u["content"]["text"] for u in seen if "content" in u and "text" in u["content"]
        )
        assert stop == "end_turn", (n, said)
        assert f"The file begins with word{n % 4}." in said, (n, said)
        assert set(sizes(seen)) == {WINDOW}, (n, sizes(seen))
        assert "read only about" not in said
