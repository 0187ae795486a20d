"""The real-model tier: acp-server's OpenAI backend against a real local inference server
(llama-cpp-python serving SmolLM2-135M-Instruct). A 135M model is weak, so the assertions are
loose — a tool was called with parseable arguments, the agent answered it, the turn ended,
every frame is schema-valid — and the steps are bounded.

No turn has a fixed time limit: on a busy machine a reply takes minutes instead of seconds. A
turn is waited for while the agent and the model server keep working (tests/support/progress);
each test's own time limit (`@pytest.mark.timeout`) bounds the whole."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.support.fake_editor import FakeEditor
from tests.support.llama_server import CHAT_FORMAT, LlamaServer, llama_server_running
from tests.support.progress import while_working

Start = Callable[..., Any]
PROMPT = (
    "Use the read_file tool to read the file notes.txt, then tell me what it says. "
    "Call the tool now."
)


@pytest.mark.timeout(1800)  # the model server's start (the first test to use it), three turns
async def test_a_real_model_calls_a_tool_and_the_agent_answers(
    server_factory: Start, llama_server: LlamaServer, tmp_path: Path
) -> None:
    project = tmp_path / "project"
    project.mkdir()
    (project / "notes.txt").write_text("The launch code is 1234.\n", encoding="utf-8")
    env = {"OPENAI_BASE_URL": llama_server.base_url, "ACP_SERVER_RETRY_BASE_DELAY": "0.1"}
    server = await server_factory(
        "--model", f"openai:{llama_server.model}", "--max-turn-requests", "3", env=env
    )
    editor = FakeEditor(fs=False, terminal=False, choose=lambda params: "reject_once")
    editor.attach(server)
    await server.request("initialize", {"protocolVersion": 1})
    answer = await server.request("session/new", {"cwd": str(project), "mcpServers": []})
    session = answer["result"]["sessionId"]
    await server.request("session/set_mode", {"sessionId": session, "modeId": "bypass"})
    calls: list[dict[str, Any]] = []
    finals: dict[str, str] = {}
    for attempt in range(3):  # the model may answer in prose instead; ask again, bounded
        req = await server.call(
            "session/prompt",
            {"sessionId": session, "prompt": [{"type": "text", "text": PROMPT}]},
        )
        working = [server.proc.pid, llama_server.pid]
        reply, before = await while_working(
            server.response(req, None), working, what=f"prompt {attempt + 1}"
        )
        assert reply["result"]["stopReason"] in ("end_turn", "max_turn_requests", "max_tokens")
        for frame in before:
            update = frame.get("params", {}).get("update", {})
            if update.get("sessionUpdate") == "tool_call":
                calls.append(update)
            if update.get("status") in ("completed", "failed"):
                finals[update["toolCallId"]] = update["status"]
        if calls:
            break
    texts = [
        f["params"]["update"].get("content")
        for f in server.seen
        if f.get("method") == "session/update"
    ]
    assert calls, f"the model never called a tool in three tries: {texts[-5:]}"
    for update in calls:
        assert isinstance(update["rawInput"], dict)  # parseable arguments
        assert update["toolCallId"] in finals  # the agent answered every call


NOTE = "The sprocket assembly needs a new bearing, a shim and two bolts before Friday. " * 14


@pytest.mark.timeout(3600)  # ~4 min on a quiet 2-core machine; many times that on a busy one
async def test_a_long_session_overflows_a_small_real_window_and_every_turn_completes(
    server_factory: Start, tmp_path: Path
) -> None:
    """llama-cpp-python at n_ctx 4096 (told to the agent: the server does not report it):
    twenty turns of ~350 tokens each fill the window several times over; the agent (compact
    tool profile, replies capped at the reserve) compacts with summaries written by the real
    model, the real server accepts every request, and every turn completes without a failure.
    Plain ChatML: with tools offered, chatml-function-calling ignores max_tokens, and a 135M
    model's tool-call arguments can run to the end of the window (minutes); tool calling is
    the test above."""
    # One thread (N_THREADS), although each compaction has the server read ~4,000 tokens anew
    # (the summary request, then the compacted conversation), which takes one thread ~20 s on a
    # quiet machine: with two, a busy machine stalls llama.cpp's threads at every step (seen:
    # 7 turns in 15 minutes at a load average of 9, 320 CPU seconds spent mostly waiting).
    async with llama_server_running(n_ctx=4096, chat_format=CHAT_FORMAT) as llama:
        env = {
            "OPENAI_BASE_URL": llama.base_url,
            "ACP_SERVER_RETRY_BASE_DELAY": "0.1",
            "ACP_SERVER_CONTEXT_WINDOW": "4096",  # the server does not report it
            "ACP_SERVER_REPLY_RESERVE": "128",  # short replies: a turn takes seconds
        }
        server = await server_factory(
            "--model", f"openai:{llama.model}", "--max-turn-requests", "2", env=env
        )
        # A tool call that needs permission is refused at once: an unanswered request would
        # hold the turn until the test times out.
        FakeEditor(fs=False, terminal=False, choose=lambda params: "reject_once").attach(server)
        await server.request("initialize", {"protocolVersion": 1})
        answer = await server.request("session/new", {"cwd": str(tmp_path), "mcpServers": []})
        session = answer["result"]["sessionId"]
        compacted = 0
        for n in range(20):
            text = f"Note {n}: {NOTE}\nReply with one short sentence, no tools."
            params = {"sessionId": session, "prompt": [{"type": "text", "text": text}]}
            req = await server.call("session/prompt", params)
            reply, before = await while_working(
                server.response(req, None), [server.proc.pid, llama.pid], what=f"turn {n}"
            )
            result = reply["result"]
            assert result["stopReason"] in ("end_turn", "max_tokens", "max_turn_requests"), reply
            failed = result.get("_meta", {}).get("acpServer", {}).get("turnFailed")
            # A 135M model sometimes answers with nothing at all: that turn fails, worded, and
            # adds nothing to the conversation (issue 19). Any other failure is the agent's.
            empty = failed is not None and failed["message"].startswith("The model sent an empty")
            assert failed is None or empty, (n, reply)
            compacted += sum(
                1
                for f in before
                if str(f.get("params", {}).get("update", {}).get("toolCallId", "")).startswith(
                    "compact_"
                )
                and f["params"]["update"]["sessionUpdate"] == "tool_call"
            )
        assert compacted >= 3, "the window was never filled several times over"
