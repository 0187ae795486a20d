"""What an inbound line must be before dispatch: safe JSON, then a JSON-RPC 2.0 message.

`json.loads` alone lets through values that break the agent far from the wire, long after the
request that brought them was accepted:

- `NaN`, `Infinity`, `-Infinity`, and numbers too large for a float (they become infinity):
  not JSON. Once stored by the layer above, they made every later reload of it fail to encode.
  Rejected as a parse error.
- Deep nesting: `json.loads` raises RecursionError near 1,000 levels, and a value just under
  that breaks the first recursive step after it (validation, encoding, the store). Anything
  deeper than `MAX_DEPTH` is rejected as an invalid request. No ACP message comes close.
- Lone surrogates (`"\\ud800"` escapes without their pair): legal JSON text, but a Python string
  holding one cannot be encoded as UTF-8, so the answer to the request (or the store write, or
  the model request) failed. They are replaced with U+FFFD, as browsers do, in every string:
  keys and values, except the message's own `id` (and the `requestId` of a `$/cancel_request`).
  An id is the client's, to match an answer to its request: answered under U+FFFD instead, the
  client waited for ever. It is kept as received and `encode` writes it back as the same escape.
  The walk that does this runs only when the raw line holds such an escape.

Then `envelope_problem` says why a decoded object is not a JSON-RPC 2.0 message (ids are ACP's
`RequestId`: a string, a 64-bit integer or null), and `head_id` reads a request's id from the
start of a line that could not be parsed (broken, too deep or too long), so the client's
pending request is answered instead of waiting for ever.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from acp_server.errors import InvalidRequest, ParseError

CANCEL_REQUEST = "$/cancel_request"
MAX_DEPTH = 128  # as serde_json, which many ACP clients use: they cannot send deeper either
HEAD_BYTES = 4096

_SURROGATE = re.compile("[\ud800-\udfff]")
_SURROGATE_ESCAPE = re.compile(rb"\\u[dD][89a-fA-F]")
_SCALAR = r'"(?:[^"\\]|\\.)*"|-?\d+(?:\.\d+)?(?:[eE][+-]?\d+)?|true|false|null'
_MEMBER = re.compile(rf"\s*({_SCALAR})\s*:\s*({_SCALAR})?\s*([,}}]?)".encode())
_OPEN = re.compile(rb"\s*\{")
_INT64 = range(-(2**63), 2**63)


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a JSON value")


def _finite_float(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise ValueError(f"the number {text[:40]} is too large")
    return value


_DECODER = json.JSONDecoder(parse_constant=_reject_constant, parse_float=_finite_float)
# Compact one-line frames; one encoder for all (json.dumps with options builds one per call).
_ENCODER = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"), allow_nan=False)
_ASCII = json.JSONEncoder(ensure_ascii=True, separators=(",", ":"), allow_nan=False)


def too_deep() -> InvalidRequest:
    return InvalidRequest(
        f"Invalid request: the message is nested more than {MAX_DEPTH} levels deep."
    )


def _parse(text: bytes) -> Any:
    """The JSON value of `text`, strings as they are; ParseError or InvalidRequest."""
    try:
        return _DECODER.decode(text.decode("utf-8-sig"))
    except RecursionError:
        raise too_deep() from None
    except ValueError as exc:  # also UnicodeDecodeError: the line is not UTF-8
        raise ParseError(f"Parse error: the line is not valid JSON ({exc}).") from None


def decode(line: bytes) -> Any:
    """The JSON value of one line; ParseError or InvalidRequest when it cannot be trusted."""
    value = _parse(line)
    deep = line.count(b"[") + line.count(b"{") > MAX_DEPTH
    # A one-byte `in` first (memchr): a big line with no backslash at all costs next to nothing.
    scrub = b"\\" in line and _SURROGATE_ESCAPE.search(line) is not None
    if isinstance(value, str):
        return _clean(value) if scrub else value
    if deep or scrub:
        kept = _ids(value) if scrub else []
        _walk(value, scrub)
        for node, key, raw in kept:
            node[key] = raw
    return value


def _ids(root: Any) -> list[tuple[dict[str, Any], str, Any]]:
    """The string ids in `root` kept as the client sent them: (object, key, value)."""
    if not isinstance(root, dict):
        return []
    places = [(root, "id")]
    if root.get("method") == CANCEL_REQUEST and isinstance(root.get("params"), dict):
        places.append((root["params"], "requestId"))
    return [(node, key, node[key]) for node, key in places if isinstance(node.get(key), str)]


def encode(frame: dict[str, Any]) -> bytes:
    """One compact line of UTF-8 (with its newline). An id kept with a lone surrogate is
    written back as the escape it came as; any other string holding one is a ValueError."""
    try:
        return _ENCODER.encode(frame).encode("utf-8") + b"\n"
    except UnicodeEncodeError:
        req_id = frame.get("id")
        if not (isinstance(req_id, str) and _SURROGATE.search(req_id)):
            raise
        _ENCODER.encode({**frame, "id": None}).encode("utf-8")  # the rest must encode as it is
        return _ASCII.encode(frame).encode("ascii") + b"\n"


def _clean(text: str) -> str:
    return _SURROGATE.sub("\ufffd", text)


def _walk(root: Any, scrub: bool) -> None:
    """Check the depth of `root` and, if `scrub`, replace lone surrogates in place."""
    stack: list[tuple[Any, int]] = [(root, 1)]
    while stack:
        node, depth = stack.pop()
        if depth > MAX_DEPTH:
            raise too_deep()
        if isinstance(node, dict):
            if scrub:
                cleaned = [(_clean(k), v) for k, v in node.items()]
                node.clear()
                node.update(cleaned)
            slots: Any = node.items()
        elif isinstance(node, list):
            slots = enumerate(node)
        else:
            continue
        for key, item in slots:
            if isinstance(item, str):
                if scrub:
                    node[key] = _clean(item)
            elif isinstance(item, dict | list):
                stack.append((item, depth + 1))


def head_id(line: bytes) -> Any:
    """The valid id of a request from the leading scalar members of a line, or None.

    Only when a `"method"` member is among them, so a broken *response* (which carries the id
    of one of our requests) is never mistaken for a request to answer.
    """
    head = line[:HEAD_BYTES]
    opened = _OPEN.match(head)
    if opened is None:
        return None
    members: dict[str, Any] = {}
    pos = opened.end()
    while (found := _MEMBER.match(head, pos)) is not None and found.group(2) is not None:
        try:
            key = decode(found.group(1))
            members[key] = (_parse if key == "id" else decode)(found.group(2))  # id: as sent
        except (ParseError, InvalidRequest):
            break
        if found.group(3) != b",":
            break
        pos = found.end()
    return readable_id(members.get("id")) if "method" in members else None


def valid_id(value: object) -> bool:
    """A JSON-RPC id as ACP allows it: a string, a 64-bit integer or null."""
    if isinstance(value, bool):
        return False
    return value is None or isinstance(value, str) or (isinstance(value, int) and value in _INT64)


def readable_id(value: object) -> Any:
    """`value` if it can be an answer's id, else None (the id of "could not tell")."""
    return value if valid_id(value) else None


def envelope_problem(msg: dict[str, Any]) -> str | None:
    """Why `msg` is not a JSON-RPC 2.0 request, notification or response (None if it is)."""
    if msg.get("jsonrpc") != "2.0":
        return 'the "jsonrpc" member must be exactly "2.0"'
    if "id" in msg and not valid_id(msg["id"]):
        return 'the "id" member must be a string, a 64-bit integer or null'
    if "method" in msg:
        if not isinstance(msg["method"], str):
            return 'the "method" member must be a string'
        if "params" in msg and not isinstance(msg["params"], dict | list | type(None)):
            return 'the "params" member must be an object'
        return None
    if "id" not in msg:
        return 'a message needs a "method" (request or notification) or an "id" (response)'
    if ("result" in msg) == ("error" in msg):
        return 'a response needs exactly one of "result" and "error"'
    return None


@dataclass(frozen=True)
class TooLong:
    """A line longer than the limit, dropped: only its head is kept, to read its id from."""

    head: bytes


async def lines(read: Callable[[], Awaitable[bytes]], limit: int) -> AsyncIterator[bytes | TooLong]:
    """The lines of a byte stream (without their newline), until it ends; a line over `limit`
    bytes is read through and yielded as `TooLong`."""
    buf = bytearray()
    discarding = False
    head = b""
    while chunk := await read():
        start = 0
        while True:
            nl = chunk.find(b"\n", start)
            if not discarding:
                buf += chunk[start:] if nl < 0 else chunk[start:nl]
                if len(buf) > limit:
                    discarding, head = True, bytes(buf[:HEAD_BYTES])
                    buf.clear()
            if nl < 0:
                break
            start = nl + 1
            if discarding:
                discarding = False
                yield TooLong(head)
            else:
                yield bytes(buf)
                buf.clear()
    if buf and not discarding:
        yield bytes(buf)
