"""A thousand turns in one session of the real `acp-server`, in a small window.

The mock LLM (OpenAI dialect) enforces and reports a 4,096-token window, refuses a history with
a tool call left unanswered, and plays a model that remembers: each turn the user gives a word,
every tenth turn the model first reads a file with `read_file`, then answers naming the word;
a request offering no tools is a compaction summary and is answered with a summary. So the
history is compacted many times. Checked: every turn ends `end_turn` with its own answer; no
request the agent sent exceeded the window (none was refused); summaries were asked for; and a
fresh server's `session/load` of the session replays the whole conversation as it was shown,
every one of the thousand prompts and answers in order. The server's memory is reported.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from tests.support.context_session import updates_of
from tests.support.load import ProcessUsage
from tests.support.mock_llm import MockLLM, Response
from tests.support.mock_llm.responders import SUMMARY_TEXT
from tests.support.mock_llm.view import conversation, is_summary
from tests.support.raw import RawServer

Start = Callable[..., Any]
TURNS = 1000
WINDOW = 4096
SPOKEN = ("user_message_chunk", "agent_message_chunk")


def respond(body: dict[str, Any]) -> Response:
    """Turn N: "remember wN" -> (every tenth turn: read notes.txt, then) "noted wN"."""
    if is_summary(body):
        return {"text": SUMMARY_TEXT}
    turns = conversation(body)
    last = turns[-1]
    users = [t for t in turns if t.role == "user"]
    word = users[-1].text.split()[-1]
    if last.role == "user" and word.endswith("0"):
        call = {"id": f"call_{word}", "name": "read_file", "arguments": {"path": "notes.txt"}}
        return {"tool_calls": [call]}
    return {"text": f"noted {word}", "chunk_words": 1}


def spoken(updates: list[dict[str, Any]]) -> list[tuple[str, str]]:
    """The conversation as shown: (kind, text) of the message chunks, consecutive chunks of one
    kind joined."""
    out: list[tuple[str, str]] = []
    for update in updates:
        kind = update["sessionUpdate"]
        if kind not in SPOKEN:
            continue
        text = update["content"]["text"]
        if out and out[-1][0] == kind:
            out[-1] = (kind, out[-1][1] + text)
        else:
            out.append((kind, text))
    return out


async def open_server(server_factory: Start, mock: MockLLM) -> RawServer:
    env = {
        "OPENAI_BASE_URL": f"{mock.url}/v1",
        "OPENAI_API_KEY": "sk-mock",
        "ACP_SERVER_DISCOVER": "0",
    }
    server: RawServer = await server_factory(
        "--model", "openai:mock-model", "--context-window", str(WINDOW), env=env
    )
    await server.request("initialize", {"protocolVersion": 1, "clientCapabilities": {}})
    return server


async def test_a_thousand_turns_in_one_small_session_then_load(
    server_factory: Start, mock_llm: MockLLM, tmp_path: Path, figures: Any
) -> None:
    mock_llm.window = WINDOW
    mock_llm.strict_tools = True
    mock_llm.responder = respond
    (tmp_path / "notes.txt").write_text("notes: nothing to see here\n" * 20, encoding="utf-8")
    server = await open_server(server_factory, mock_llm)
    new = await server.request("session/new", {"cwd": str(tmp_path), "mcpServers": []})
    session = new["result"]["sessionId"]
    live: list[dict[str, Any]] = []
    started = time.perf_counter()
    for n in range(TURNS):
        if n == 50:
            warm = ProcessUsage.of(server.proc.pid)
        params = {"sessionId": session, "prompt": [{"type": "text", "text": f"remember w{n}"}]}
        answer, before = await server.response(await server.call("session/prompt", params), 30)
        assert answer.get("result", {}).get("stopReason") == "end_turn", (n, answer)
        updates = updates_of(before)
        assert spoken(updates)[-1] == ("agent_message_chunk", f"noted w{n}"), (n, updates)
        live += updates
    elapsed = time.perf_counter() - started
    end = ProcessUsage.of(server.proc.pid)
    rss = end.rss_kib
    figures("1,000 turns", f"{elapsed:.1f} s, {len(mock_llm.chat_requests)} model requests")
    figures("after 50 turns", warm.describe())
    figures("after 1,000 turns", end.describe())
    summaries = [r for r in mock_llm.chat_requests if is_summary(r.json)]
    figures("summaries", f"{len(summaries)}; largest request {max(mock_llm.counted)} tokens")
    assert mock_llm.overflows == [] and mock_llm.invalid == []
    # The history is compacted, so what grows is only the record of what was shown (~100 bytes
    # a turn) and allocator slack: 2.5 MiB was measured over these 950 turns. A history that
    # kept every message would still fit, but one that kept each request it sent (up to
    # ~12 KiB of JSON here) or its task and stream would not.
    assert rss - warm.rss_kib < 12 * 1024, f"RSS grew {rss - warm.rss_kib} KiB over 950 turns"
    assert (end.threads, end.fds) == (warm.threads, warm.fds)  # no connection or thread kept
    assert max(mock_llm.counted) <= WINDOW
    assert len(summaries) >= 10, "a thousand turns in 4K must have been compacted many times"
    await server.close_stdin()
    assert await server.wait(timeout=20) == 0
    await check_replay(server_factory, mock_llm, session, tmp_path, live)


async def check_replay(
    server_factory: Start, mock: MockLLM, session: str, cwd: Path, live: list[dict[str, Any]]
) -> None:
    """A fresh server replays the conversation exactly as it was shown live."""
    server = await open_server(server_factory, mock)
    started = time.perf_counter()
    params = {"sessionId": session, "cwd": str(cwd), "mcpServers": []}
    answer, before = await server.response(await server.call("session/load", params), 60)
    assert "result" in answer, answer
    replayed = updates_of(before)
    expected: list[tuple[str, str]] = []
    for n in range(TURNS):  # live, the prompt is not echoed: the replay shows it
        expected += [
            ("user_message_chunk", f"remember w{n}"),
            ("agent_message_chunk", f"noted w{n}"),
        ]
    assert spoken(replayed) == expected
    assert tool_calls(replayed) == tool_calls(live)
    assert len(tool_calls(live)) == TURNS // 10
    assert time.perf_counter() - started < 30


def tool_calls(updates: list[dict[str, Any]]) -> list[tuple[str, str]]:
    """(title, final status) of each tool call the model made (compaction cards left out)."""
    titles: dict[str, str] = {}
    status: dict[str, str] = {}
    for update in updates:
        call = str(update.get("toolCallId", ""))
        if not call or call.startswith("compact_"):
            continue
        if update["sessionUpdate"] == "tool_call":
            titles[call] = update["title"]
        status[call] = update.get("status") or status.get(call, "")
    return [(titles[c], status[c]) for c in titles]
