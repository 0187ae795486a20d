"""Reasoning from local servers: `<think>` blocks in the content become thoughts (tags cut
across deltas included), a reply that was only reasoning is the answer, and reasoning cut off
is never shown as one."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from acp_server.backends.ollama.backend import OllamaBackend
from acp_server.backends.openai.backend import OpenAIBackend
from acp_server.backends.reasoning import (
    ThinkTagSplitter,
    reasoning_as_answer,
    split_think_tags,
)
from acp_server.messages import (
    Event,
    Finish,
    FinishReason,
    ModelRequest,
    TextDelta,
    ThoughtDelta,
    ToolCallDelta,
    text_message,
)
from tests.support.mock_llm import MockLLM, Response

ASK = ModelRequest((text_message("user", "what is six times seven?"),))
REPLY = "<think>\nsix sevens: 42\n</think>\n\nIt is 42."


def split(pieces: list[str]) -> tuple[str, str]:
    """(thought, text) after feeding `pieces` to a splitter."""
    splitter = ThinkTagSplitter()
    events = [e for piece in pieces for e in splitter.feed(piece)] + splitter.end()
    return texts(events)


def texts(events: list[Event]) -> tuple[str, str]:
    thought = "".join(e.text for e in events if isinstance(e, ThoughtDelta))
    return thought, "".join(e.text for e in events if isinstance(e, TextDelta))


@pytest.mark.parametrize("cut", range(1, len(REPLY)))
def test_a_think_block_is_split_wherever_the_deltas_cut_it(cut: int) -> None:
    assert split([REPLY[:cut], REPLY[cut:]]) == ("\nsix sevens: 42\n", "It is 42.")


def test_a_think_block_arriving_a_character_at_a_time() -> None:
    assert split(list("  " + REPLY)) == ("\nsix sevens: 42\n", "It is 42.")


@pytest.mark.parametrize(
    "reply",
    ["Use a <think> tag.", "<div>hi</div>", "<th", "plain answer", "a < b and <think>x</think>"],
)
def test_text_that_does_not_open_with_a_think_block_stays_text(reply: str) -> None:
    assert split([reply[:3], reply[3:]]) == ("", reply)


def test_plain_text_is_passed_on_at_once() -> None:
    splitter = ThinkTagSplitter()
    assert splitter.feed("Hello") == [TextDelta("Hello")]
    assert splitter.feed(" <think>") == [TextDelta(" <think>")]


def test_an_unclosed_block_is_all_thought() -> None:
    assert split(["<think>still going", " and go"]) == ("still going and go", "")


async def events_of(*events: Event) -> AsyncIterator[Event]:
    for event in events:
        yield event


async def run(wrapped: AsyncIterator[Event]) -> list[Event]:
    return [event async for event in wrapped]


async def test_the_splitter_releases_held_text_before_the_finish() -> None:
    out = await run(split_think_tags(events_of(TextDelta("<thi"), Finish("stop"))))
    assert out == [TextDelta("<thi"), Finish("stop")]


async def test_a_reply_that_was_only_reasoning_is_the_answer() -> None:
    out = await run(
        reasoning_as_answer(events_of(ThoughtDelta("It is "), ThoughtDelta("42. "), Finish("stop")))
    )
    assert out[-2:] == [TextDelta("It is 42."), Finish("stop")]


@pytest.mark.parametrize(
    "ending",
    [
        (Finish("length"),),
        (TextDelta("42"), Finish("stop")),
        (ToolCallDelta(0, "c1", "calc", "{}"), Finish("tool_calls")),
    ],
)
async def test_reasoning_is_not_the_answer_otherwise(ending: tuple[Event, ...]) -> None:
    out = await run(reasoning_as_answer(events_of(ThoughtDelta("hmm"), *ending)))
    assert out == [ThoughtDelta("hmm"), *ending]


async def stream_from(backend: OpenAIBackend | OllamaBackend) -> list[Event]:
    try:
        return [event async for event in backend.stream(ASK)]
    finally:
        await backend.aclose()


def backends(llm: MockLLM) -> list[OpenAIBackend | OllamaBackend]:
    return [OpenAIBackend(llm.url + "/v1", "qwen3"), OllamaBackend(llm.url, "qwen3:8b")]


def finish_of(events: list[Event]) -> FinishReason:
    finishes = [e.reason for e in events if isinstance(e, Finish)]
    assert len(finishes) == 1
    return finishes[0]


@pytest.mark.parametrize("server", [0, 1], ids=["openai", "ollama"])
async def test_a_server_that_sends_think_tags_in_the_content(
    mock_llm: MockLLM, server: int
) -> None:
    mock_llm.queue({"text": REPLY, "chunk_words": 1})
    events = await stream_from(backends(mock_llm)[server])
    assert texts(events) == ("\nsix sevens: 42\n", "It is 42.")
    assert finish_of(events) == "stop"


@pytest.mark.parametrize("server", [0, 1], ids=["openai", "ollama"])
async def test_a_server_that_sends_the_whole_reply_as_reasoning(
    mock_llm: MockLLM, server: int
) -> None:
    mock_llm.queue({"thought": "It is 42.", "finish": "stop"})
    events = await stream_from(backends(mock_llm)[server])
    assert texts(events) == ("It is 42.", "It is 42.")


@pytest.mark.parametrize(
    "reply",
    [
        {"thought": "six sevens are", "finish": "length"},
        {"text": "<think>six sev", "finish": "length"},
    ],
    ids=["reasoning field", "think tag"],
)
@pytest.mark.parametrize("server", [0, 1], ids=["openai", "ollama"])
async def test_reasoning_cut_off_is_never_shown_as_an_answer(
    mock_llm: MockLLM, server: int, reply: Response
) -> None:
    mock_llm.queue(reply)
    events = await stream_from(backends(mock_llm)[server])
    thought, text = texts(events)
    assert text == "" and thought.startswith("six sev")
    assert finish_of(events) == "length"
