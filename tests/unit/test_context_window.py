"""The window, the silent-truncation guard and reading context-overflow errors."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from acp_server.backends._http import error_from_payload, error_from_response
from acp_server.context.overflow import Overflow, parse_overflow
from acp_server.context.window import DEFAULT_WINDOW, Window, truncated_to

FIXTURES = Path(__file__).parent.parent / "fixtures" / "llama_cpp"


def test_the_window_is_the_smallest_known() -> None:
    assert Window(configured=32768).size == 32768
    assert Window(configured=32768, discovered=8192).size == 8192
    assert Window(configured=4096, discovered=8192).size == 4096
    assert Window(configured=32768, discovered=16384, observed=6144).size == 6144


def test_an_unknown_window_is_a_conservative_8192() -> None:
    window = Window()
    assert not window.known
    assert window.size == DEFAULT_WINDOW == 8192


def test_the_reply_reserve_is_relative_to_the_window() -> None:
    assert Window(configured=4096).reply_reserve == 1024
    assert Window(configured=8192).reply_reserve == 2048
    assert Window(configured=200_000).reply_reserve == 4096
    assert Window(configured=8192).budget == 6144
    assert Window(configured=8192, reserve=500).budget == 7692
    assert Window(configured=8192, reserve=10**6).reply_reserve == 4096  # never half or more


def test_lowering_only_ever_shrinks() -> None:
    window = Window(configured=32768)
    assert window.lower(8192)
    assert window.size == 8192
    assert not window.lower(16384)
    assert window.size == 8192
    assert window.lower(3)  # a misreading: clamped to a sane minimum
    assert window.size == 512


@pytest.mark.parametrize(
    ("sent", "reported", "lowered"),
    [
        (13000, 6144, 6144),  # the server kept half: lower to what it kept
        (13000, 9200, None),  # 70.8 %: plausible disagreement between tokenizers
        (1000, 600, 600),  # 60 % and 400 fewer: both conditions hold
        (1000, 750, None),  # 75 %: plausible
        (800, 550, None),  # 69 % but only 250 tokens apart
        (13000, 0, None),  # nothing reported
        (13000, 300, None),  # a prompt cache counting only the new tokens, not a 300-token model
    ],
)
def test_the_truncation_guard(sent: int, reported: int, lowered: int | None) -> None:
    assert truncated_to(sent, reported) == lowered


def test_llama_cpp_python_overflow_from_the_recorded_fixture() -> None:
    recorded = json.loads((FIXTURES / "chat_context_overflow_error.json").read_text())
    body = json.dumps(recorded["response"]["json"])
    assert parse_overflow(body) == Overflow(window=2048, prompt_tokens=2110)
    error = error_from_response(400, {"content-type": "application/json"}, body)
    assert error.context_overflow
    assert parse_overflow(error.message) == Overflow(window=2048, prompt_tokens=2110)


LLAMA_CPP_BODY = {
    "error": {
        "code": 400,
        "message": "request (18995 tokens) exceeds the available context size (4096 tokens), "
        "try increasing it",
        "type": "exceed_context_size_error",
        "n_prompt_tokens": 18995,
        "n_ctx": 4096,
    }
}


def test_llama_cpp_exceed_context_size_error_body() -> None:
    body = json.dumps(LLAMA_CPP_BODY)
    assert parse_overflow(body) == Overflow(window=4096, prompt_tokens=18995)
    # What the backend turns it into (the person-facing message) still names the window.
    error = error_from_response(400, {}, body)
    assert parse_overflow(error.message) == Overflow(window=4096, prompt_tokens=18995)


def test_older_llama_cpp_bodies_give_the_numbers_only_as_fields() -> None:
    body = json.dumps(
        {
            "error": {
                "code": 400,
                "message": "the request exceeds the available context size, try increasing "
                "the context size or enable context shift",
                "type": "exceed_context_size_error",
                "n_prompt_tokens": 9000,
                "n_ctx": 8192,
            }
        }
    )
    assert parse_overflow(body) == Overflow(window=8192, prompt_tokens=9000)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (
            "This model's maximum context length is 8192 tokens. However, your messages "
            "resulted in 9000 tokens. Please reduce the length of the messages.",
            Overflow(8192, 9000),
        ),
        (
            "'max_tokens' or 'max_completion_tokens' is too large: 2000. This model's maximum "
            "context length is 4096 tokens and your request has 2104 input tokens",
            Overflow(4096, 2104),
        ),
        ("prompt is too long: 210000 tokens > 200000 maximum", Overflow(200000, 210000)),
        ("Requested tokens (757) exceed context window of 512", Overflow(512, 757)),
        (
            "Trying to keep the first 5000 tokens when context the overflows. However, the "
            "model is loaded with context length of only 4096 tokens, which is not enough.",
            Overflow(4096, None),
        ),
        (
            "The input token count (40000) exceeds the maximum number of tokens allowed (32768).",
            Overflow(32768, 40000),
        ),
        ("input length exceeds the context length", Overflow(None, None)),
        ("prompt too long; exceeded max context length by 10 tokens", Overflow(None, None)),
        (
            "The conversation is too long for the model's context window: something",
            Overflow(None, None),
        ),
    ],
)
def test_overflow_texts(text: str, expected: Overflow) -> None:
    assert parse_overflow(text) == expected


@pytest.mark.parametrize(
    "text",
    [
        "The model server answered HTTP 500 Internal Server Error.",
        "Invalid API key",
        '{"error": {"message": "model not found", "type": "invalid_request_error"}}',
        "",
    ],
)
def test_other_errors_are_not_overflows(text: str) -> None:
    assert parse_overflow(text) is None


def test_an_overflow_inside_a_200_stream() -> None:
    error = error_from_payload(
        {"error": {"message": "prompt is too long: 9000 tokens > 8192 maximum"}}
    )
    assert error is not None and error.context_overflow
    assert parse_overflow(error.message) == Overflow(8192, 9000)
