"""Inline tool-call recovery: the streaming scanner and the one-retry policy."""

from __future__ import annotations

import itertools
import json
from collections.abc import AsyncIterator

import pytest

from acp_server.backends.textcalls.forms import parse_block
from acp_server.backends.textcalls.recover import CallRecovery
from acp_server.backends.textcalls.scanner import RECOVERED_INDEX, InlineCallScanner
from acp_server.messages import (
    Event,
    Finish,
    FinishReason,
    Message,
    ModelRequest,
    Notice,
    StreamError,
    TextDelta,
    ToolCall,
    ToolCallAssembler,
    ToolCallDelta,
    ToolSpec,
    Usage,
    text_message,
)

READ = ToolSpec("read_file", "Read a file", {"type": "object"})
REQUEST = ModelRequest(messages=(text_message("user", "look at a.py"),), tools=(READ,))
OFFERED = {"read_file": READ.parameters}
BLOCK = '<tool_call>{"name": "read_file", "arguments": {"path": "a.py"}}</tool_call>'


def scanner() -> InlineCallScanner:
    numbers = itertools.count()
    return InlineCallScanner(lambda: f"call_recovered_{next(numbers)}", OFFERED)


def scan(*deltas: str) -> list[Event]:
    s = scanner()
    out: list[Event] = []
    for delta in deltas:
        out += s.feed(delta)
    return out + s.end()


def visible(events: list[Event]) -> str:
    return "".join(e.text for e in events if isinstance(e, TextDelta))


def calls(events: list[Event]) -> list[tuple[str, str, dict[str, object]]]:
    assembler = ToolCallAssembler()
    for event in events:
        if isinstance(event, ToolCallDelta):
            assembler.add(event)
    return [(c.id, c.name, c.arguments) for c in assembler.calls("x")]


def test_plain_text_passes_through() -> None:
    assert scan("Hello ", "world") == [TextDelta("Hello "), TextDelta("world")]


def test_a_possible_tag_start_is_held_until_decided() -> None:
    s = scanner()
    assert s.feed("a <") == [TextDelta("a ")]
    assert s.feed("too") == []  # "<too" could still become "<tool_call>"
    assert s.feed("k") == [TextDelta("<took")]
    assert s.feed("x <tool_ca") == [TextDelta("x ")]
    assert s.end() == [TextDelta("<tool_ca")]  # never completed: it was text after all


def test_a_block_split_into_single_characters_never_leaks_markup() -> None:
    text = f"Let me look.\n{BLOCK}\nDone."
    events = scan(*text)
    assert all("<" not in e.text and ">" not in e.text for e in events if isinstance(e, TextDelta))
    assert visible(events) == "Let me look.\n\nDone."
    assert calls(events) == [("call_recovered_0", "read_file", {"path": "a.py"})]
    assert [e.index for e in events if isinstance(e, ToolCallDelta)] == [RECOVERED_INDEX]


def test_two_blocks_in_one_delta_get_their_own_ids_and_indexes() -> None:
    second = BLOCK.replace("a.py", "b.py")
    events = scan(f"{BLOCK}{second}")
    assert calls(events) == [
        ("call_recovered_0", "read_file", {"path": "a.py"}),
        ("call_recovered_1", "read_file", {"path": "b.py"}),
    ]
    assert visible(events) == ""


@pytest.mark.parametrize(
    "content",
    [
        '{"name": "read_file", "parameters": {"path": "a.py"}}',
        '{"name": "read_file", "arguments": "{\\"path\\": \\"a.py\\"}"}',
        '```json\n{"name": "read_file", "arguments": {"path": "a.py"}}\n```',
        '[{"name": "read_file", "arguments": {"path": "a.py"}}]',
    ],
)
def test_tolerated_variants(content: str) -> None:
    assert parse_block(content) == ([("read_file", {"path": "a.py"})], [])


@pytest.mark.parametrize(
    ("content", "problem"),
    [
        ('{"name": "read_file", "arguments": {"path": ', "not valid JSON"),
        ('{"arguments": {}}', 'no "name"'),
        ('{"name": "read_file", "arguments": [1]}', "not a JSON object"),
        ('{"name": "read_file", "arguments": "{oops"}', "not valid JSON"),
        ('"read_file"', "not a JSON object"),
    ],
)
def test_malformed_blocks_are_reported(content: str, problem: str) -> None:
    found, problems = parse_block(content)
    assert found == [] and len(problems) == 1 and problem in problems[0]


def test_a_block_left_open_at_the_end_is_still_read() -> None:
    # Servers that use the closing tag as a stop sequence never send it.
    events = scan('<tool_call>{"name": "read_file", "arguments": {}}')
    assert calls(events) == [("call_recovered_0", "read_file", {})]


def test_a_malformed_block_is_kept_out_of_the_text() -> None:
    s = scanner()
    events = s.feed("Hi <tool_call>{broken</tool_call> there") + s.end()
    assert visible(events) == "Hi  there"
    assert s.recovered == 0 and len(s.problems) == 1


# ----- CallRecovery -----------------------------------------------------------------------------


class Model:
    """A fake backend round: plays one list of events per request, records the requests."""

    def __init__(self, *replies: list[Event]) -> None:
        self.replies = list(replies)
        self.requests: list[ModelRequest] = []

    async def __call__(self, request: ModelRequest) -> AsyncIterator[Event]:
        self.requests.append(request)
        for event in self.replies.pop(0):
            yield event


async def play(
    recovery: CallRecovery, model: Model, request: ModelRequest = REQUEST
) -> list[Event]:
    return [event async for event in recovery.stream(model, request)]


def reply(*texts: str, finish: FinishReason = "stop") -> list[Event]:
    return [*(TextDelta(t) for t in texts), Usage(10, 5), Finish(finish)]


async def test_recovered_calls_finish_as_tool_calls_with_ids_unique_per_instance() -> None:
    recovery = CallRecovery()
    model = Model(reply("Reading.", BLOCK), reply(BLOCK))
    first = await play(recovery, model)
    second = await play(recovery, model)
    assert first[-1] == Finish("tool_calls")
    assert calls(first) == [("call_recovered_0", "read_file", {"path": "a.py"})]
    assert calls(second) == [("call_recovered_1", "read_file", {"path": "a.py"})]
    assert Usage(10, 5) in first and visible(first) == "Reading."


async def test_a_malformed_only_call_gets_one_retry_with_an_explanation() -> None:
    bad = '<tool_call>{"name": "read_file", "arguments": {"path": </tool_call>'
    model = Model(reply("Let me read it.", bad), reply(BLOCK))
    events = await play(CallRecovery(), model)
    assert len(model.requests) == 2
    retry = model.requests[1]
    assert retry.tools == REQUEST.tools
    assert retry.messages[:-2] == REQUEST.messages
    assistant, user = retry.messages[-2:]
    assert assistant.role == "assistant" and assistant.text == "Let me read it." + bad
    assert user.role == "user" and "could not use" in user.text and "<tool_call>" in user.text
    notices = [e for e in events if isinstance(e, Notice)]
    assert len(notices) == 1 and "asking it to try again" in notices[0].text
    assert calls(events) == [("call_recovered_0", "read_file", {"path": "a.py"})]
    assert events[-1] == Finish("tool_calls")
    assert "<" not in visible(events)


async def test_a_second_malformed_reply_ends_the_turn_without_the_call() -> None:
    bad = "<tool_call>not json</tool_call>"
    model = Model(reply("One.", bad), reply("Two.", bad))
    events = await play(CallRecovery(), model)
    assert len(model.requests) == 2
    assert calls(events) == []
    assert visible(events) == "One.Two."
    notices = [e.text for e in events if isinstance(e, Notice)]
    assert len(notices) == 2 and "it was not run" in notices[1]
    assert events[-1] == Finish("stop")


async def test_no_retry_when_another_call_is_valid() -> None:
    native = ToolCallDelta(0, "call_a", "read_file", json.dumps({"path": "b.py"}))
    model = Model(
        [TextDelta("<tool_call>{bad</tool_call>"), native, Finish("tool_calls")],
    )
    events = await play(CallRecovery(), model)
    assert len(model.requests) == 1
    assert calls(events) == [("call_a", "read_file", {"path": "b.py"})]
    assert any(isinstance(e, Notice) and "not run" in e.text for e in events)


async def test_no_retry_without_tools_or_when_cut_off() -> None:
    bad = "<tool_call>{bad</tool_call>"
    no_tools = ModelRequest(messages=REQUEST.messages)
    model = Model(reply(bad), reply(bad, finish="length"))
    ended = (await play(CallRecovery(), model, no_tools))[-1]
    assert isinstance(ended, StreamError) and "could not be used" in ended.message
    assert (await play(CallRecovery(), model))[-1] == Finish("length")
    assert len(model.requests) == 2


async def test_a_reply_that_was_only_an_unusable_call_ends_saying_so_not_as_empty() -> None:
    bad = '<tool_call>{"name": "list_files", "arguments": {}}</tool_call>'  # not offered
    events = await play(CallRecovery(), Model(reply(bad), reply(bad)))
    assert visible(events) == ""
    assert events[-1] == StreamError(
        'The model wrote a tool call that could not be used (there is no tool named "list_files" '
        "(the tools offered: read_file)); it was not run."
    )


async def test_held_text_is_released_before_a_stream_error() -> None:
    model = Model([TextDelta("partial <"), StreamError("boom")])
    events = await play(CallRecovery(), model)
    assert events == [TextDelta("partial "), TextDelta("<"), StreamError("boom")]


async def test_arguments_that_are_the_tools_schema_are_sent_back_with_an_example() -> None:
    """Seen on Qwen2.5-Coder-1.5B: read_file called with its own parameter schema."""
    path = ToolSpec(
        "read_file",
        "Read a file",
        {"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]},
    )
    request = ModelRequest(messages=REQUEST.messages, tools=(path,))
    echoed = json.dumps({"name": "read_file", "arguments": path.parameters})
    model = Model(reply(f"<tool_call>{echoed}</tool_call>"), reply(BLOCK))
    events = await play(CallRecovery(), model, request)
    explanation = model.requests[1].messages[-1].text
    assert "do not fit its schema" in explanation
    assert '{"name": "read_file", "arguments": {"path": "..."}}' in explanation
    assert calls(events) == [("call_recovered_0", "read_file", {"path": "a.py"})]


AFTER_RESULT = ModelRequest(
    messages=(
        *REQUEST.messages,
        Message("assistant", (), tool_calls=(ToolCall("call_1", "read_file", {"path": "a"}),)),
        text_message("tool", "x = 1", tool_call_id="call_1"),
    ),
    tools=(READ,),
)


async def test_an_empty_reply_right_after_a_tool_result_is_asked_again_once() -> None:
    """Seen on Qwen2.5-Coder-1.5B: after write_file's result, a reply with no text at all."""
    model = Model(reply(""), reply("It says x = 1."))
    events = await play(CallRecovery(), model, AFTER_RESULT)
    assert len(model.requests) == 2
    asked = model.requests[1].messages
    assert asked[:-1] == AFTER_RESULT.messages  # no empty assistant message is added
    assert asked[-1].role == "user" and "was empty" in asked[-1].text
    assert [e.text for e in events if isinstance(e, Notice)] == [
        "The model sent an empty reply after the tool result; asking it to answer."
    ]
    assert visible(events) == "It says x = 1." and events[-1] == Finish("stop")


async def test_an_empty_reply_elsewhere_or_twice_is_not_asked_again() -> None:
    model = Model(reply(""), reply(""), reply(" \n"))
    assert (await play(CallRecovery(), model))[-1] == Finish("stop")  # not after a result
    assert len(model.requests) == 1
    events = await play(CallRecovery(), model, AFTER_RESULT)
    assert len(model.requests) == 3 and events[-1] == Finish("stop")  # asked once, no more
