"""read_file on a picture, through the real console script against the strict mock LLM: the image
reaches a vision model's request (Anthropic: inside the tool result; OpenAI chat, whose tool
messages are text only: in a user message right after the results), becomes a note for a
text-only model, and is shown in the tool call."""

from __future__ import annotations

import base64
from pathlib import Path
from typing import Any

from tests.e2e.test_backends_e2e import Start
from tests.e2e.test_model_switching import (
    PIXEL,
    new_session,
    prompt,
    start,
    strict,
    text,
)
from tests.support.mock_llm import MockLLM

__all__ = ["strict"]  # the strict mock LLM fixture, shared with the model-switching tests

READ = {"tool_calls": [{"id": "toolu_pic", "name": "read_file", "arguments": {"path": "dot.png"}}]}


def picture(cwd: Path) -> None:
    (cwd / "dot.png").write_bytes(base64.b64decode(PIXEL))


def tool_call_content(updates: list[dict[str, Any]]) -> list[dict[str, Any]]:
    done = [
        u
        for u in updates
        if u["sessionUpdate"] == "tool_call_update" and u.get("status") == "completed"
    ]
    return list(done[-1]["content"])


async def test_claude_gets_the_image_inside_the_tool_result(
    server_factory: Start, strict: MockLLM, tmp_path: Path
) -> None:
    picture(tmp_path)
    server = await start(server_factory, strict, ("anthropic:claude-b",))
    session, _ = await new_session(server, tmp_path)
    strict.queue(READ, {"text": "A dot."})
    stop, updates = await prompt(server, session, text("What is in dot.png?"))
    assert stop == "end_turn" and strict.invalid == []

    results = [
        block
        for message in strict.chat_requests[-1].json["messages"]
        if isinstance(message["content"], list)
        for block in message["content"]
        if block["type"] == "tool_result"
    ]
    (result,) = results
    image = next(b for b in result["content"] if b["type"] == "image")
    assert image["source"] == {"type": "base64", "media_type": "image/png", "data": PIXEL}
    shown = tool_call_content(updates)[0]["content"]
    assert (shown["type"], shown["mimeType"], shown["data"]) == ("image", "image/png", PIXEL)


async def test_openai_gets_the_image_in_a_user_message_after_the_results(
    server_factory: Start, strict: MockLLM, tmp_path: Path
) -> None:
    picture(tmp_path)
    server = await start(server_factory, strict, ("openai:sees",))
    session, _ = await new_session(server, tmp_path)
    strict.queue(READ, {"text": "A dot."})
    stop, _ = await prompt(server, session, text("What is in dot.png?"))
    assert stop == "end_turn" and strict.invalid == []

    messages = strict.chat_requests[-1].json["messages"]
    roles = [m["role"] for m in messages]
    at = roles.index("tool")
    assert roles[at + 1] == "user"
    assert "attached below" in messages[at]["content"]
    urls = [p["image_url"]["url"] for p in messages[at + 1]["content"] if p["type"] == "image_url"]
    assert urls == [f"data:image/png;base64,{PIXEL}"]


async def test_a_text_only_model_gets_a_note(
    server_factory: Start, strict: MockLLM, tmp_path: Path
) -> None:
    picture(tmp_path)
    config = tmp_path / "config.toml"
    config.write_text('[[models]]\nprovider = "openai"\nid = "blind"\nimages = false\n')
    server = await start(server_factory, strict, (), ACP_SERVER_CONFIG=str(config))
    session, _ = await new_session(server, tmp_path)
    strict.queue(READ, {"text": "I cannot see it."})
    stop, _ = await prompt(server, session, text("What is in dot.png?"))
    assert stop == "end_turn" and strict.invalid == []

    request = str(strict.chat_requests[-1].json)
    assert "image_url" not in request and PIXEL not in request
    assert "an image (image/png) was here; the current model cannot see images" in request
