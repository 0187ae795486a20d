"""The real-model tier: acp-server's OpenAI backend against a real local inference server
(llama-cpp-python serving SmolLM2-135M-Instruct). A 135M model is weak, so the assertions are
loose — a tool was called with parseable arguments, the agent answered it, the turn ended,
every frame is schema-valid — and the steps are bounded."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from tests.support.fake_editor import FakeEditor
from tests.support.llama_server import LlamaServer

Start = Callable[..., Any]
PROMPT = (
    "Use the read_file tool to read the file notes.txt, then tell me what it says. "
    "Call the tool now."
)


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
    for _attempt in range(3):  # the model may answer in prose instead; ask again, bounded
        req = await server.call(
            "session/prompt",
            {"sessionId": session, "prompt": [{"type": "text", "text": PROMPT}]},
        )
        reply, before = await server.response(req, timeout=120)
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
