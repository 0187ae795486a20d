"""Images: sent to models that read them, a note for those that do not (configured, from Ollama's
capabilities, or learned from the server refusing them), never dropped silently."""

from __future__ import annotations

import json
from typing import Any

import pytest

from acp_server.backends._http import RetryPolicy, error_from_response
from acp_server.backends.anthropic.backend import AnthropicBackend
from acp_server.backends.images import TOOL_IMAGES_INTRO, refuses_images
from acp_server.backends.ollama.backend import OllamaBackend
from acp_server.backends.openai import wire as _openai_wire
from acp_server.backends.openai.backend import OpenAIBackend
from acp_server.messages import (
    Event,
    ImagePart,
    Message,
    ModelRequest,
    StreamError,
    TextPart,
    ToolCall,
)
from tests.support.mock_llm import MockLLM
from tests.support.strict_dialects import openai_problems

FAST = RetryPolicy(attempts=3, base_delay=0.001, max_delay=0.002)
PNG = "iVBORw0KGgo="
LOOK = ModelRequest(
    (Message("user", (TextPart("what is this?"), ImagePart(PNG, "image/png"))),),
)
NOTE = "[an image (image/png) was here; the current model cannot see images]"

REFUSALS = [
    (400, "Invalid content type. image_url is only supported by certain models."),
    (
        500,
        "image input is not supported - hint: if this is unexpected, you may need to provide "
        "the mmproj",
    ),
    (500, "image input is not supported by this server"),
    (
        500,
        "Failed to create new sequence: failed to process inputs: this model is missing data "
        "required for image input",
    ),
    (400, "this model does not support image input"),
    (400, "Model does not support images. Please use a model that does."),
    (400, "Qwen2ForCausalLM is not a multimodal model"),
    (404, "No endpoints found that support image input"),
]


@pytest.mark.parametrize(("status", "message"), REFUSALS)
def test_each_servers_wording_of_an_image_refusal_is_recognized(status: int, message: str) -> None:
    body = json.dumps({"error": {"message": message, "type": "invalid_request_error"}})
    failure = error_from_response(status, {}, body)
    assert failure.images_refused and not failure.transient
    assert "cannot read images" in failure.message and message in failure.message


@pytest.mark.parametrize(
    "message",
    ["Could not process image", "prompt is too long", "Unsupported image format: image/bmp"],
)
def test_other_errors_are_no_image_refusal(message: str) -> None:
    assert not refuses_images(message)


async def collect(
    backend: OpenAIBackend | OllamaBackend | AnthropicBackend, request: ModelRequest
) -> list[Event]:
    return [event async for event in backend.stream(request)]


def sent_images(body: Any) -> int:
    text = json.dumps(body)
    return text.count(PNG)


@pytest.mark.parametrize(("status", "message"), [REFUSALS[0], REFUSALS[1]])
async def test_a_refusal_is_learned_once_and_the_next_request_carries_a_note(
    mock_llm: MockLLM, status: int, message: str
) -> None:
    backend = OpenAIBackend(mock_llm.url + "/v1", "text-only", retry=FAST)
    mock_llm.queue({"fault": "status", "status": status, "message": message}, {"text": "A note."})
    first = await collect(backend, LOOK)
    assert [type(e) for e in first] == [StreamError]  # final at once, even as HTTP 500
    assert isinstance(first[0], StreamError) and first[0].images_refused
    assert backend.images is False
    await collect(backend, LOOK)
    await backend.aclose()
    refused, noted = mock_llm.chat_requests
    assert sent_images(refused.json) == 1 and sent_images(noted.json) == 0
    assert noted.json["messages"][-1]["content"] == "what is this?" + NOTE


async def test_ollama_sends_images_only_to_a_model_with_vision(mock_llm: MockLLM) -> None:
    mock_llm.set(capabilities=["completion", "vision"])
    seeing = OllamaBackend(mock_llm.url, "gemma3", retry=FAST)
    await collect(seeing, LOOK)
    assert seeing.images is True
    mock_llm.set(capabilities=["completion", "tools"])
    blind = OllamaBackend(mock_llm.url, "qwen3:8b", retry=FAST)
    await collect(blind, LOOK)
    assert blind.images is False
    looked, noted = mock_llm.chat_requests
    assert looked.json["messages"][-1]["images"] == [PNG]
    assert "images" not in noted.json["messages"][-1]
    assert noted.json["messages"][-1]["content"] == "what is this?" + NOTE
    await seeing.aclose()
    await blind.aclose()


async def test_a_configured_text_only_anthropic_model_gets_a_note(mock_llm: MockLLM) -> None:
    backend = AnthropicBackend(mock_llm.url, "claude-x", "sk-ant-test", images=False, retry=FAST)
    await collect(backend, LOOK)
    await backend.aclose()
    [chat] = mock_llm.chat_requests
    blocks = chat.json["messages"][0]["content"]
    assert blocks == [
        {"type": "text", "text": "what is this?"},
        {"type": "text", "text": NOTE, "cache_control": {"type": "ephemeral"}},
    ]


def test_openai_tool_result_images_follow_the_results_in_a_user_message() -> None:
    calls = (ToolCall("call_1", "screenshot", {}), ToolCall("call_2", "read_file", {}))
    jpeg = ImagePart("/9j/4AAQ", "image/jpeg")
    history = (
        Message("user", (TextPart("take a screenshot"),)),
        Message("assistant", tool_calls=calls),
        Message("tool", (TextPart("done: "), ImagePart(PNG, "image/png")), tool_call_id="call_1"),
        Message("tool", (TextPart("read"), jpeg), tool_call_id="call_2"),
        Message("user", (TextPart("and this one?"), ImagePart(PNG, "image/png"))),
    )
    body = _openai_wire.payload("gpt-x", ModelRequest(history), stream=True, stream_options=False)
    roles = [m["role"] for m in body["messages"]]
    assert roles == ["user", "assistant", "tool", "tool", "user", "user"]
    assert body["messages"][2]["content"] == "done: \n[image (image/png): attached below]"
    attached = body["messages"][4]["content"]
    assert attached[0] == {"type": "text", "text": TOOL_IMAGES_INTRO}
    assert [p["image_url"]["url"] for p in attached[1:]] == [
        f"data:image/png;base64,{PNG}",
        "data:image/jpeg;base64,/9j/4AAQ",
    ]
    user = body["messages"][5]["content"]
    assert user[1] == {"type": "image_url", "image_url": {"url": f"data:image/png;base64,{PNG}"}}
    assert openai_problems(body) == []
