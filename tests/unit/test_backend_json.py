"""Lone surrogates from a model server's stream are replaced where it is parsed."""

from __future__ import annotations

import json

from acp_server.backends import _json
from acp_server.backends._sse import SseEvent
from acp_server.backends.ollama.wire import LineParser
from acp_server.backends.openai.wire import ChunkParser
from acp_server.backends.responses.wire import EventParser
from acp_server.messages import TextDelta

HALF_AN_EMOJI = r'"caf\u00e9 \ud83d then"'


def test_a_lone_surrogate_becomes_the_replacement_character() -> None:
    value = _json.loads('{"text": ' + HALF_AN_EMOJI + ', "list": ["\\udc00"]}')
    assert value == {"text": "café \ufffd then", "list": ["\ufffd"]}
    json.dumps(value, ensure_ascii=False).encode("utf-8")  # encodable now


def test_a_whole_pair_and_ordinary_text_are_left_alone() -> None:
    assert _json.loads(r'"\ud83d\ude00 ok"') == "\U0001f600 ok"
    assert _json.loads(b'{"a": "plain"}') == {"a": "plain"}


def test_the_openai_and_ollama_parsers_replace_them() -> None:
    chunk = '{"choices":[{"index":0,"delta":{"content":' + HALF_AN_EMOJI + "}}]}"
    events = ChunkParser().feed(SseEvent(data=chunk))
    assert events == [TextDelta("café \ufffd then")]
    line = '{"message":{"role":"assistant","content":' + HALF_AN_EMOJI + '},"done":false}'
    ollama = LineParser(lambda: "call_1").feed(line)
    assert TextDelta("café \ufffd then") in ollama


def test_the_responses_parser_replaces_them() -> None:
    frame = '{"type":"response.output_text.delta","item_id":"msg_1","output_index":0,'
    frame += '"content_index":0,"delta":' + HALF_AN_EMOJI + ',"sequence_number":3}'
    events = EventParser("gpt-5").feed(SseEvent(data=frame, event="response.output_text.delta"))
    assert TextDelta("café \ufffd then") in events
