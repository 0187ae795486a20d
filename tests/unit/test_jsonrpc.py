"""The JSON-RPC peer in-process, fed raw lines: no ACP names anywhere (layering rule)."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest

from acp_server.errors import ConnectionClosed, InvalidParams, RemoteError
from acp_server.jsonrpc import Connection, Params


class Pipe:
    """An in-memory byte source and frame sink."""

    def __init__(self) -> None:
        self.inbound: asyncio.Queue[bytes] = asyncio.Queue()
        self.out: list[dict[str, Any]] = []
        self.raw_out: list[bytes] = []

    async def read(self) -> bytes:
        return await self.inbound.get()

    def write(self, data: bytes) -> None:
        self.raw_out.append(data)
        self.out.append(json.loads(data))

    async def drain(self) -> None:
        return None

    def feed(self, data: bytes) -> None:
        self.inbound.put_nowait(data)


async def settle() -> None:
    for _ in range(5):
        await asyncio.sleep(0)


def make(pipe: Pipe, **handlers: Any) -> Connection:
    async def echo(params: Params) -> Any:
        return params

    async def boom(params: Params) -> Any:
        raise KeyError("secret internal detail\nTraceback (most recent call last): nope")

    async def picky(params: Params) -> Any:
        raise InvalidParams("`size` must be a number", {"field": "size"})

    async def slow(params: Params) -> Any:
        await asyncio.sleep(30)

    requests = {"echo": echo, "boom": boom, "picky": picky, "slow": slow}
    return Connection(pipe.read, pipe, requests=requests, notifications=handlers)


async def test_internal_error_is_short_and_has_no_traceback(
    caplog: pytest.LogCaptureFixture,
) -> None:
    pipe = Pipe()
    conn = make(pipe)
    task = asyncio.create_task(conn.serve())
    pipe.feed(b'{"jsonrpc":"2.0","id":1,"method":"boom"}\n')
    await settle()
    (frame,) = pipe.out
    assert frame["error"]["code"] == -32603
    assert "Traceback" not in frame["error"]["message"]
    assert "\n" not in frame["error"]["message"]
    assert "KeyError" in frame["error"]["message"]
    assert "secret" not in frame["error"]["message"]
    assert any("Traceback" in r.exc_text for r in caplog.records if r.exc_text) or any(
        r.exc_info for r in caplog.records
    )
    pipe.feed(b"")
    await task


async def test_error_tree_keeps_code_message_and_data() -> None:
    pipe = Pipe()
    conn = make(pipe)
    task = asyncio.create_task(conn.serve())
    pipe.feed(b'{"jsonrpc":"2.0","id":"a","method":"picky","params":{}}\n')
    await settle()
    assert pipe.out == [
        {
            "jsonrpc": "2.0",
            "id": "a",
            "error": {
                "code": -32602,
                "message": "`size` must be a number",
                "data": {"field": "size"},
            },
        }
    ]
    pipe.feed(b"")
    await task


async def test_lines_split_across_chunks_and_crlf() -> None:
    pipe = Pipe()
    conn = make(pipe)
    task = asyncio.create_task(conn.serve())
    for piece in (
        b'{"jsonrpc":"2.0",',
        b'"id":1,"method":"echo","params":{"a":"\xc3',
        b'\xa9"}}\r\n\n',
    ):
        pipe.feed(piece)
    await settle()
    assert pipe.out == [{"jsonrpc": "2.0", "id": 1, "result": {"a": "\u00e9"}}]
    pipe.feed(b"")
    await task


async def test_last_line_without_newline_is_served_at_eof() -> None:
    pipe = Pipe()
    conn = make(pipe)
    task = asyncio.create_task(conn.serve())
    pipe.feed(b'{"jsonrpc":"2.0","id":3,"method":"echo","params":{}}')
    pipe.feed(b"")
    await task
    assert pipe.out[0]["id"] == 3


async def test_notifications_run_in_order_while_a_request_is_running() -> None:
    pipe = Pipe()
    seen: list[Any] = []
    conn = make(pipe, note=lambda p: seen.append(p["n"]))
    task = asyncio.create_task(conn.serve())
    pipe.feed(b'{"jsonrpc":"2.0","id":1,"method":"slow"}\n')
    pipe.feed(b'{"jsonrpc":"2.0","method":"note","params":{"n":1}}\n')
    pipe.feed(b'{"jsonrpc":"2.0","method":"note","params":{"n":2}}\n')
    await settle()
    assert seen == [1, 2]
    assert pipe.out == []
    pipe.feed(b'{"jsonrpc":"2.0","method":"$/cancel_request","params":{"requestId":1}}\n')
    await settle()
    assert pipe.out == [
        {
            "jsonrpc": "2.0",
            "id": 1,
            "error": {"code": -32800, "message": "The request was cancelled."},
        }
    ]
    pipe.feed(b"")
    await task


async def test_outgoing_requests_resolve_and_fail_when_peer_leaves() -> None:
    pipe = Pipe()
    conn = make(pipe)
    task = asyncio.create_task(conn.serve())
    ok = asyncio.create_task(conn.request("ask", {"q": 1}))
    bad = asyncio.create_task(conn.request("ask", {"q": 2}))
    hang = asyncio.create_task(conn.request("ask", {"q": 3}))
    await settle()
    ids = [f["id"] for f in pipe.out]
    assert len(set(ids)) == 3
    pipe.feed(json.dumps({"jsonrpc": "2.0", "id": ids[0], "result": {"a": 1}}).encode() + b"\n")
    pipe.feed(
        json.dumps(
            {"jsonrpc": "2.0", "id": ids[1], "error": {"code": -1, "message": "no"}}
        ).encode()
        + b"\n"
    )
    await settle()
    assert await ok == {"a": 1}
    with pytest.raises(RemoteError) as info:
        await bad
    assert info.value.code == -1
    pipe.feed(b"")
    await task
    with pytest.raises(ConnectionClosed):
        await hang
    with pytest.raises(ConnectionClosed):
        await conn.request("ask", {})


async def test_small_limit_over_long_line() -> None:
    pipe = Pipe()
    conn = Connection(pipe.read, pipe, requests={}, notifications={}, max_line=100)
    task = asyncio.create_task(conn.serve())
    pipe.feed(b'{"jsonrpc":"2.0","params":{"x":"' + b"z" * 300)
    pipe.feed(b"z" * 300 + b'"},"id":9}\n')
    pipe.feed(b'{"jsonrpc":"2.0","id":10,"method":"nothing"}\n')
    await settle()
    # The id comes after "params", so it cannot be recovered safely: answered with null.
    assert pipe.out[0]["id"] is None and pipe.out[0]["error"]["code"] == -32600
    assert pipe.out[1]["id"] == 10 and pipe.out[1]["error"]["code"] == -32601
    pipe.feed(b"")
    await task


async def test_non_serializable_result_becomes_internal_error() -> None:
    pipe = Pipe()

    async def nan(params: Params) -> Any:
        return float("nan")

    conn = Connection(pipe.read, pipe, requests={"nan": nan}, notifications={})
    task = asyncio.create_task(conn.serve())
    pipe.feed(b'{"jsonrpc":"2.0","id":1,"method":"nan"}\n')
    await settle()
    assert pipe.out[0]["error"]["code"] == -32603
    pipe.feed(b"")
    await task


async def test_cancel_request_right_behind_its_request_is_still_answered() -> None:
    pipe = Pipe()
    conn = make(pipe)
    task = asyncio.create_task(conn.serve())
    pipe.feed(
        b'{"jsonrpc":"2.0","id":5,"method":"slow"}\n'
        b'{"jsonrpc":"2.0","method":"$/cancel_request","params":{"requestId":5}}\n'
    )
    await settle()
    assert [f["id"] for f in pipe.out] == [5]
    assert pipe.out[0]["error"]["code"] == -32800
    pipe.feed(b"")
    await task
