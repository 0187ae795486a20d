"""A turn that failed is told apart from an answer: `_meta.acpServer.turnFailed` on the
PromptResponse (the stop reason stays the normal one, so every client keeps working).

Over real pipes; every frame, `_meta` included, is checked against the ACP schema.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from tests.support.raw import Frame, RawServer, stop_reason

Start = Callable[..., Any]
Script = Callable[[list[dict[str, Any]]], Path]


async def prompt(server: RawServer, cwd: Path, text: str = "go") -> tuple[Frame, list[Frame]]:
    session = await server.handshake(str(cwd))
    params = {"sessionId": session, "prompt": [{"type": "text", "text": text}]}
    return await server.response(await server.call("session/prompt", params), timeout=20)


def shown_text(frames: list[Frame]) -> str:
    return "".join(
        f["params"]["update"]["content"]["text"]
        for f in frames
        if f.get("method") == "session/update"
        and f["params"]["update"]["sessionUpdate"] == "agent_message_chunk"
    )


async def test_a_model_error_marks_the_turn_failed(
    server_factory: Start, script: Script, tmp_path: Path
) -> None:
    server = await server_factory("--script", str(script([{"error": "The model fell over."}])))
    answer, before = await prompt(server, tmp_path)
    assert answer["result"]["stopReason"] == "end_turn"
    failed = answer["result"]["_meta"]["acpServer"]["turnFailed"]
    assert failed == {"reason": "model", "message": "The model fell over."}
    assert "The model fell over." in shown_text(before)  # the editor shows it too


async def test_an_answer_carries_no_failure(
    server_factory: Start, script: Script, tmp_path: Path
) -> None:
    server = await server_factory("--script", str(script([{"text": "Fine."}])))
    answer, _ = await prompt(server, tmp_path)
    assert stop_reason(answer["result"]) == "end_turn"


async def test_a_hosted_model_without_a_key_fails_the_first_prompt_naming_the_key(
    server_factory: Start, tmp_path: Path
) -> None:
    # The default model needs no key (session/new would answer auth_required otherwise, see
    # test_auth_e2e.py); the session switches to one that lacks its key.
    env = {"OPENAI_API_KEY": "", "OPENAI_BASE_URL": "", "ACP_SERVER_RETRY_ATTEMPTS": "3"}
    server = await server_factory(
        "--model", "ollama:any", "--model", "openai:gpt-4.1-mini", env=env
    )
    session = await server.handshake(str(tmp_path))
    choice = {"sessionId": session, "configId": "model", "value": "openai:gpt-4.1-mini"}
    assert "result" in await server.request("session/set_config_option", choice)
    params = {"sessionId": session, "prompt": [{"type": "text", "text": "go"}]}
    answer, before = await server.response(await server.call("session/prompt", params), 20)
    failed = answer["result"]["_meta"]["acpServer"]["turnFailed"]
    assert failed["reason"] == "model"
    assert "OPENAI_API_KEY" in failed["message"] and "OPENAI_API_KEY" in shown_text(before)
    assert "retrying" not in shown_text(before)  # no network attempt at all
