"""The real `acp-server` against the mock model server, for what a provider's prompt cache
needs: a `prompt_cache_key` the same within a session and different between two sessions
(the Responses API), llama.cpp's `cache_prompt` and a slot per session, Anthropic's cache
breakpoints (4 at most, accepted by a strict mock of the API)."""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from acp_server.context.tokens import Estimator
from acp_server.messages import ToolSpec
from tests.support.context_session import ReaderSession, start_reader, write_files
from tests.support.mock_llm import MockLLM

Start = Callable[..., Any]


async def second_session(reader: ReaderSession, cwd: Path) -> ReaderSession:
    """Another session of the same server process."""
    answer = await reader.server.request("session/new", {"cwd": str(cwd), "mcpServers": []})
    return ReaderSession(reader.server, answer["result"]["sessionId"], reader.mock)


async def test_a_prompt_cache_key_per_session_on_the_responses_api(
    server_factory: Start, mock_llm: MockLLM, tmp_path: Path
) -> None:
    mock_llm.strict_dialect = True
    mock_llm.set(model="gpt-5", context_length=65_536)
    names = write_files(tmp_path, 2, 200)
    one = await start_reader(server_factory, mock_llm, tmp_path, model="openai-responses:gpt-5")
    await one.ask(names[0])
    await one.ask(names[1])
    first = {r.json.get("prompt_cache_key") for r in mock_llm.chat_requests}
    two = await second_session(one, tmp_path)
    await two.ask(names[0])
    later = {r.json.get("prompt_cache_key") for r in mock_llm.chat_requests[4:]}
    assert len(mock_llm.chat_requests) == 6 and mock_llm.invalid == []
    assert len(first) == 1 and len(later) == 1  # one key a session, on every request
    (key,), (other,) = first, later
    assert isinstance(key, str) and isinstance(other, str) and key != other
    assert one.session not in key  # a hash of the id, not the id itself


async def test_chat_completions_elsewhere_get_no_key(
    server_factory: Start, mock_llm: MockLLM, tmp_path: Path
) -> None:
    mock_llm.strict_dialect = True  # a server that refuses what it does not know
    names = write_files(tmp_path, 1, 200)
    reader = await start_reader(server_factory, mock_llm, tmp_path, "--context-window", "32768")
    assert (await reader.ask(names[0])).stop == "end_turn"
    assert mock_llm.invalid == []
    assert not any("prompt_cache_key" in r.json for r in mock_llm.chat_requests)
    assert not any("id_slot" in r.json for r in mock_llm.chat_requests)  # not llama.cpp


async def test_llama_cpp_keeps_the_prompt_cache_on_a_slot_of_the_sessions(
    server_factory: Start, mock_llm: MockLLM, tmp_path: Path
) -> None:
    # llama.cpp: /v1/models tells only the trained length, /props the runtime window and slots
    mock_llm.set(context_length=None, n_ctx=32_768, n_ctx_train=131_072, total_slots=4)
    names = write_files(tmp_path, 2, 200)
    reader = await start_reader(server_factory, mock_llm, tmp_path)
    await reader.ask(names[0])
    await reader.ask(names[1])
    other = await second_session(reader, tmp_path)
    await other.ask(names[0])
    sent = [(r.json.get("cache_prompt"), r.json.get("id_slot")) for r in mock_llm.chat_requests]
    assert len(sent) == 6 and all(on is True for on, _ in sent), sent
    slots = [slot for _, slot in sent]
    assert all(isinstance(s, int) and 0 <= s < 4 for s in slots)
    assert len(set(slots[:4])) == 1  # one slot for the whole session


def tools_of(request: Any) -> list[str]:
    return [t["function"]["name"] for t in request.json.get("tools", [])]


async def test_the_first_request_offers_the_tools_of_the_second(
    server_factory: Start, mock_llm: MockLLM, tmp_path: Path
) -> None:
    """gpt-4.1's window from the catalogue, and a configured one: known before request 1, so
    requests 1 and 2 are the same prefix (tools and system prompt)."""
    names = write_files(tmp_path, 1, 200)
    mock_llm.set(model="gpt-4.1")
    for args, model in (((), "openai:gpt-4.1"), (("--context-window", "20000"), "openai:mock")):
        before = len(mock_llm.chat_requests)
        reader = await start_reader(server_factory, mock_llm, tmp_path, *args, model=model)
        assert (await reader.ask(names[0])).stop == "end_turn"
        first, second = mock_llm.chat_requests[before : before + 2]
        assert len(tools_of(first)) >= 10, tools_of(first)  # not the compact profile of 8K
        assert tools_of(first) == tools_of(second)
        assert first.json["tools"] == second.json["tools"]
        assert first.json["messages"][0] == second.json["messages"][0]  # the system prompt


@pytest.mark.skipif(shutil.which("git") is None, reason="git is not installed")
async def test_a_commit_between_prompts_changes_no_byte_before_the_conversations_end(
    server_factory: Start, mock_llm: MockLLM, tmp_path: Path
) -> None:
    env = {**os.environ, "GIT_CONFIG_GLOBAL": os.devnull, "GIT_CONFIG_NOSYSTEM": "1"}

    def git(*args: str) -> None:
        command = ["git", "-c", "user.name=T", "-c", "user.email=t@example.com", *args]
        subprocess.run(command, cwd=tmp_path, check=True, capture_output=True, env=env)

    names = write_files(tmp_path, 2, 200)
    git("init", "-q", "-b", "main")
    git("add", ".")
    git("commit", "-q", "-m", "start")
    reader = await start_reader(server_factory, mock_llm, tmp_path, "--context-window", "65536")
    await reader.ask(names[0])
    (tmp_path / "new.txt").write_text("new\n", encoding="utf-8")
    git("add", ".")
    git("commit", "-q", "-m", "the user's commit")
    (tmp_path / names[1]).write_text("changed after the commit\n", encoding="utf-8")
    await reader.ask(names[1])
    before, after = mock_llm.chat_requests[1].json, mock_llm.chat_requests[2].json
    assert after["tools"] == before["tools"]
    assert after["messages"][: len(before["messages"])] == before["messages"]  # byte for byte
    told = after["messages"][-1]["content"]  # the note after the new prompt
    assert "<agent-note>" in told and f" M {names[1]}" in told, told


async def test_at_4096_tokens_the_fixed_part_takes_a_quarter_at_most(
    server_factory: Start, mock_llm: MockLLM, tmp_path: Path
) -> None:
    names = write_files(tmp_path, 1, 200)
    reader = await start_reader(server_factory, mock_llm, tmp_path, "--context-window", "4096")
    assert (await reader.ask(names[0])).stop == "end_turn"
    est = Estimator()
    for request in mock_llm.chat_requests:
        body = request.json
        specs = [
            ToolSpec(
                t["function"]["name"], t["function"]["description"], t["function"]["parameters"]
            )
            for t in body["tools"]
        ]
        system = body["messages"][0]["content"]
        fixed = est.corrected(est.text(system) + est.tools(specs))
        assert fixed <= 1024, (fixed, [s.name for s in specs])
        assert {"read_file", "edit_file", "run_command"} <= {s.name for s in specs}
