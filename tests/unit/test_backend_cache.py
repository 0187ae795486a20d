"""What each dialect sends for the server's prompt cache: Anthropic's breakpoints (4 at most,
the previous request's end read back exactly), OpenAI's `prompt_cache_key` at api.openai.com
alone, llama.cpp's `cache_prompt` and a slot of the session's own."""

from __future__ import annotations

import copy
import json
from typing import Any

import httpx

from acp_server.backends.anthropic.wire import payload as anthropic_payload
from acp_server.backends.openai.backend import OpenAIBackend
from acp_server.backends.openai.wire import cache_fields
from acp_server.backends.responses.backend import ResponsesBackend
from acp_server.backends.responses.wire import payload as responses_payload
from acp_server.messages import Message, ModelRequest, ToolCall, ToolSpec, Usage, text_message
from tests.support.strict_anthropic import anthropic_problems

TOOLS = (
    ToolSpec("read_file", "Read a file.", {"type": "object", "properties": {}}),
    ToolSpec("grep", "Search.", {"type": "object", "properties": {}}),
)


def rounds(n: int) -> tuple[Message, ...]:
    """A prompt, then `n` tool rounds."""
    messages = [text_message("user", "Read the files.")]
    for i in range(n):
        call = ToolCall(f"c{i}", "read_file", {"path": f"f{i}.txt"})
        messages += [
            Message("assistant", tool_calls=(call,)),
            text_message("tool", f"text {i}", tool_call_id=f"c{i}"),
        ]
    return tuple(messages)


def body(messages: tuple[Message, ...], ttl: str | None = None) -> dict[str, Any]:
    request = ModelRequest(messages, TOOLS, "SYSTEM", cache_key="k" * 32)
    return anthropic_payload(
        "claude-sonnet-4-5", request, max_tokens=1024, thinking_budget=None, cache_ttl=ttl
    )


def marks(sent: dict[str, Any]) -> list[str]:
    """Where the breakpoints are: "tools", "system", or the index of the marked message."""
    found = ["tools" for t in sent["tools"] if "cache_control" in t]
    found += ["system" for b in sent["system"] if "cache_control" in b]
    for index, message in enumerate(sent["messages"]):
        found += [str(index) for b in message["content"] if "cache_control" in b]
    return found


def unmarked(value: Any) -> Any:
    """`value` without its cache_control keys (they are not part of what is cached)."""
    if isinstance(value, dict):
        return {k: unmarked(v) for k, v in value.items() if k != "cache_control"}
    if isinstance(value, list):
        return [unmarked(v) for v in value]
    return value


def test_anthropic_marks_tools_system_the_last_message_and_the_previous_requests_end() -> None:
    first, second = body(rounds(2)), body(rounds(3))
    assert marks(first) == ["tools", "system", "2", "4"]
    assert marks(second) == ["tools", "system", "4", "6"]
    assert anthropic_problems(first) == [] and anthropic_problems(second) == []
    # The second request's mark on message 4 ends where the first's last mark ended, on the
    # same bytes: the API reads back what the first request wrote.
    assert unmarked(second["messages"][:5]) == unmarked(first["messages"])
    assert all(m == {"type": "ephemeral"} for m in _all_marks(second))


def test_anthropic_takes_the_hour_long_cache_when_configured() -> None:
    sent = body(rounds(1), ttl="1h")
    assert _all_marks(sent) and all(
        m == {"type": "ephemeral", "ttl": "1h"} for m in _all_marks(sent)
    )
    assert anthropic_problems(sent) == []


def test_a_first_request_has_three_marks() -> None:
    assert marks(body(rounds(0))) == ["tools", "system", "0"]


def _all_marks(sent: dict[str, Any]) -> list[Any]:
    text = json.dumps(sent)
    assert text.count("cache_control") <= 4
    blocks = [*sent["tools"], *sent["system"]] + [b for m in sent["messages"] for b in m["content"]]
    return [copy.deepcopy(b["cache_control"]) for b in blocks if "cache_control" in b]


def test_openai_gets_a_prompt_cache_key_and_llama_cpp_a_slot_others_nothing() -> None:
    key = "0000000a" + "0" * 24
    assert cache_fields(key, openai=True, slots=None) == {"prompt_cache_key": key}
    assert cache_fields(key, openai=False, slots=4) == {"cache_prompt": True, "id_slot": 10 % 4}
    assert cache_fields(key, openai=False, slots=None) == {}  # a server that may refuse it
    assert cache_fields(None, openai=True, slots=4) == {}


def test_the_responses_api_gets_the_key() -> None:
    request = ModelRequest(rounds(0), TOOLS, "SYSTEM", cache_key="abc")
    assert responses_payload("gpt-5", request, reasoning=True)["prompt_cache_key"] == "abc"
    assert "prompt_cache_key" not in responses_payload(
        "gpt-5", ModelRequest(rounds(0), TOOLS, "S"), reasoning=True
    )


async def test_a_hosted_model_the_catalogue_knows_is_not_asked_for_its_window() -> None:
    asked: list[str] = []

    def refuse(request: httpx.Request) -> httpx.Response:
        asked.append(str(request.url))
        return httpx.Response(500)

    transport = httpx.MockTransport(refuse)
    chat = OpenAIBackend("https://api.openai.com/v1", "gpt-4.1", "sk", transport=transport)
    responses = ResponsesBackend("https://api.openai.com/v1", "gpt-5", "sk", transport=transport)
    assert await chat.context_window() == 1_047_576
    assert (await responses.context_window() or 0) >= 272_000
    assert asked == []  # the first request waits for the window: it must cost no round trip
    await chat.aclose()
    await responses.aclose()


def test_cached_tokens_from_openai_details_or_llama_cpp_timings() -> None:
    from acp_server.backends.openai.wire import usage_event

    usage = {"prompt_tokens": 900, "completion_tokens": 10}
    details = {**usage, "prompt_tokens_details": {"cached_tokens": 768}}
    reasoning = {**usage, "completion_tokens_details": {"reasoning_tokens": 4}}
    assert usage_event(details) == Usage(900, 10, cached_tokens=768)
    assert usage_event(usage, {"cache_n": 850, "prompt_n": 50}) == Usage(900, 10, cached_tokens=850)
    assert usage_event(reasoning) == Usage(900, 10, thought_tokens=4)
