"""The JSON-RPC peer in-process, fed raw lines: no ACP names anywhere (layering rule)."""

from __future__ import annotations

import asyncio
import json
import logging
from typing import Any

import pytest

from acp_server.errors import ConnectionClosed, InvalidParams, RemoteError
from acp_server.wire.jsonrpc import DEFAULT_MAX_LINE, Connection, Params


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


def make(pipe: Pipe, max_line: int = DEFAULT_MAX_LINE, **handlers: Any) -> Connection:
    async def echo(params: Params) -> Any:
        return params

    async def boom(params: Params) -> Any:
        raise KeyError("secret internal detail\nTraceback (most recent call last): nope")

    async def picky(params: Params) -> Any:
        raise InvalidParams("`size` must be a number", {"field": "size"})

    async def slow(params: Params) -> Any:
        await asyncio.sleep(30)

    requests = {"echo": echo, "boom": boom, "picky": picky, "slow": slow}
    return Connection(pipe.read, pipe, requests=requests, notifications=handlers, max_line=max_line)


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


async def test_a_withdrawn_request_tells_the_peer_and_a_plain_one_does_not() -> None:
    pipe = Pipe()
    conn = make(pipe)
    task = asyncio.create_task(conn.serve())
    withdrawn = asyncio.create_task(conn.request("ask", {"q": 1}, withdraw=True))
    plain = asyncio.create_task(conn.request("ask", {"q": 2}))
    answered = asyncio.create_task(conn.request("ask", {"q": 3}, withdraw=True))
    await settle()
    ids = [f["id"] for f in pipe.out]
    pipe.feed(json.dumps({"jsonrpc": "2.0", "id": ids[2], "result": {}}).encode() + b"\n")
    await settle()
    assert await answered == {}
    for waiting in (withdrawn, plain):
        waiting.cancel()
    await asyncio.wait({withdrawn, plain})
    notices = [f for f in pipe.out if "id" not in f]
    assert notices == [
        {"jsonrpc": "2.0", "method": "$/cancel_request", "params": {"requestId": ids[0]}}
    ]
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


# ----- hostile lines: each is answered (with its id when it can be read), none stops serving ---


async def serve_lines(pipe: Pipe, conn: Connection, *lines: bytes) -> list[dict[str, Any]]:
    """Feed `lines`, then an echo request with id "after"; the frames written before its answer."""
    task = asyncio.create_task(conn.serve())
    for line in lines:
        pipe.feed(line + b"\n")
    pipe.feed(b'{"jsonrpc":"2.0","id":"after","method":"echo","params":{"ok":1}}\n')
    async with asyncio.timeout(5):
        while not any(f.get("id") == "after" for f in pipe.out):
            await asyncio.sleep(0)
    assert pipe.out[-1] == {"jsonrpc": "2.0", "id": "after", "result": {"ok": 1}}
    pipe.feed(b"")
    await task
    return pipe.out[:-1]


async def test_lone_surrogates_become_replacement_characters_except_in_the_id() -> None:
    """Regression: a request with id "\\ud800" was never answered (the answer failed to encode),
    then it was answered under "\\ufffd", an id the client never sent."""
    pipe = Pipe()
    line = (
        rb'{"jsonrpc":"2.0","id":"\ud800","method":"echo",'
        rb'"params":{"k\uDC00":["a\ud800b",{"x":"\udfff"}],"pair":"\ud83d\ude00","id":"\ud800"}}'
    )
    (frame,) = await serve_lines(pipe, make(pipe), line)
    assert frame == {
        "jsonrpc": "2.0",
        "id": "\ud800",
        "result": {
            "k\ufffd": ["a\ufffdb", {"x": "\ufffd"}],
            "pair": "\U0001f600",
            "id": "\ufffd",  # only the message's own id is kept
        },
    }
    # Written back as the escape it came as: the line is UTF-8 (here ASCII), the id the same.
    assert pipe.raw_out[0].startswith(rb'{"jsonrpc":"2.0","id":"\ud800",')


async def test_a_request_with_a_lone_surrogate_id_can_be_cancelled_by_that_id() -> None:
    pipe = Pipe()
    conn = make(pipe)
    task = asyncio.create_task(conn.serve())
    pipe.feed(b'{"jsonrpc":"2.0","id":"s\\udc00","method":"slow"}\n')
    pipe.feed(b'{"jsonrpc":"2.0","method":"$/cancel_request","params":{"requestId":"s\\udc00"}}\n')
    async with asyncio.timeout(5):
        while not pipe.out:
            await asyncio.sleep(0)
    assert [(f["id"], f["error"]["code"]) for f in pipe.out] == [("s\udc00", -32800)]
    pipe.feed(b"")
    await task


@pytest.mark.parametrize("number", [b"NaN", b"Infinity", b"-Infinity", b"1e400", b"-1e999"])
async def test_non_finite_numbers_are_parse_errors(number: bytes) -> None:
    """Regression: NaN was accepted; stored, it made every later load fail to encode."""
    pipe = Pipe()
    line = b'{"jsonrpc":"2.0","id":4,"method":"echo","params":{"n":' + number + b"}}"
    (frame,) = await serve_lines(pipe, make(pipe), line)
    assert frame["id"] == 4
    assert frame["error"]["code"] == -32700


@pytest.mark.parametrize(
    ("line", "req_id"),
    [
        (b"[" * 1000 + b"]" * 1000, None),
        (b'{"a":' * 1000 + b"1" + b"}" * 1000, None),
        (b"[" * 100000, None),
        (b'{"jsonrpc":"2.0","id":8,"method":"echo","params":{"x":' + b"[" * 5000, 8),
        # Parses, but deeper than anything downstream should have to handle.
        (
            b'{"jsonrpc":"2.0","id":9,"method":"echo","params":{"x":'
            + b"[" * 600
            + b"]" * 600
            + b"}}",
            9,
        ),
    ],
)
async def test_deep_nesting_is_rejected_and_serving_goes_on(line: bytes, req_id: Any) -> None:
    """Regression: RecursionError from json.loads ended the process."""
    pipe = Pipe()
    (frame,) = await serve_lines(pipe, make(pipe), line)
    assert frame["id"] == req_id
    assert frame["error"]["code"] == -32600
    assert "nested more than" in frame["error"]["message"]


async def test_nesting_up_to_the_limit_is_served() -> None:
    pipe = Pipe()
    deep = b"[" * 120 + b"]" * 120
    line = b'{"jsonrpc":"2.0","id":1,"method":"echo","params":{"x":' + deep + b"}}"
    (frame,) = await serve_lines(pipe, make(pipe), line)
    assert "result" in frame


async def test_cancel_request_with_an_unusable_request_id() -> None:
    """Regression: `"requestId": []` raised TypeError (unhashable) and ended the process."""
    pipe = Pipe()
    frames = await serve_lines(
        pipe,
        make(pipe),
        b'{"jsonrpc":"2.0","method":"$/cancel_request","params":{"requestId":[]}}',
        b'{"jsonrpc":"2.0","method":"$/cancel_request","params":{"requestId":{}}}',
        b'{"jsonrpc":"2.0","method":"$/cancel_request","params":{"requestId":1.5}}',
        b'{"jsonrpc":"2.0","method":"$/cancel_request","params":{}}',
        b'{"jsonrpc":"2.0","method":"$/cancel_request","params":[1]}',
        b'{"jsonrpc":"2.0","id":5,"method":"$/cancel_request","params":{"requestId":{}}}',
        b'{"jsonrpc":"2.0","id":6,"method":"$/cancel_request","params":{"requestId":99}}',
    )
    # Notifications are ignored; with an id, a bad requestId is -32602 and a good one is acted on.
    assert [(f["id"], f.get("error", {}).get("code")) for f in frames] == [(5, -32602), (6, None)]
    assert "requestId" in frames[0]["error"]["message"]


@pytest.mark.parametrize(
    ("start", "req_id"),
    [
        (b'{"jsonrpc":"2.0","id":"\\q","method":"echo","params":{"x":"', None),
        (b'{"jsonrpc":"2.0","id":"\\ud800","method":"echo","params":{"x":"', "\ud800"),
        (b'{"jsonrpc":"2.0","id":"ok","method":"echo","params":{"x":"\\q', "ok"),
        (b'{"jsonrpc":"2.0","id":99999999999999999999,"method":"echo","params":{"x":"', None),
        (b'{"jsonrpc":"2.0","id":12,"result":{"x":"', None),  # a response: never answered by id
    ],
)
async def test_over_long_line_with_a_broken_start_is_answered(start: bytes, req_id: Any) -> None:
    """Regression: building the "too long" answer decoded the id with json.loads and raised."""
    pipe = Pipe()
    conn = Connection(
        pipe.read, pipe, requests=make(pipe)._requests, notifications={}, max_line=100
    )
    (frame,) = await serve_lines(pipe, conn, start + b"z" * 300 + b'"}}')
    assert frame["id"] == req_id
    assert frame["error"]["code"] == -32600
    assert "too large" in frame["error"]["message"]


@pytest.mark.parametrize(
    ("line", "req_id"),
    [
        (b'{"jsonrpc":"2.0","id":7,"method":"echo","params":5}', 7),
        (b'{"jsonrpc":"2.0","id":"x","method":7}', "x"),
        (b'{"jsonrpc":"1.0","id":-3,"method":"echo"}', -3),
        (b'{"id":0,"method":"echo"}', 0),
        (b'{"jsonrpc":"2.0","id":9223372036854775808,"method":"echo"}', None),
        (b'{"jsonrpc":"2.0","id":true,"method":"echo"}', None),
        (b'{"jsonrpc":"2.0","id":7}', None),  # a broken response: its id is one of ours
        (b'{"jsonrpc":"2.0","id":7,"result":1,"error":{}}', None),
    ],
)
async def test_invalid_envelope_is_answered_with_the_request_id(line: bytes, req_id: Any) -> None:
    """Regression: answered with id null, so the client waited for request 7 for ever."""
    pipe = Pipe()
    (frame,) = await serve_lines(pipe, make(pipe), line)
    assert frame["id"] == req_id and type(frame["id"]) is type(req_id)
    assert frame["error"]["code"] == -32600


async def test_end_of_input_finishes_received_requests_and_fails_ours_at_once() -> None:
    """Regression: EOF cancelled requests still running (answered -32800)."""
    pipe = Pipe()
    conn: Connection

    async def later(params: Params) -> Any:
        await asyncio.sleep(0.05)
        return {"done": True}

    async def ask(params: Params) -> Any:
        await asyncio.sleep(0.05)  # the client's input ends while this request is running
        try:
            return await conn.request("question", {})
        except ConnectionClosed as exc:
            return {"failed": str(exc)}

    async def hang(params: Params) -> Any:
        try:
            return await conn.request("question", {})
        except ConnectionClosed:
            return {"failed": "at once"}

    handlers = {"later": later, "ask": ask, "hang": hang}
    conn = Connection(pipe.read, pipe, requests=handlers, notifications={})
    task = asyncio.create_task(conn.serve())
    for n, method in enumerate(("later", "ask", "hang")):
        pipe.feed(b'{"jsonrpc":"2.0","id":%d,"method":"%s"}\n' % (n, method.encode()))
    pipe.feed(b"")
    await asyncio.wait_for(task, 2)
    answers = {f["id"]: f["result"] for f in pipe.out if "result" in f}
    assert answers[0] == {"done": True}
    assert "closed" in answers[1]["failed"]
    assert answers[2] == {"failed": "at once"}
    assert conn.closed


async def test_late_answers_to_our_requests_are_not_warnings(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Regression: the answer a client must still send after a cancel was logged as a warning
    (and editors such as agent-shell show any stderr line as an error)."""
    caplog.set_level(logging.DEBUG, logger="acp_server.wire.jsonrpc")
    pipe = Pipe()
    conn = make(pipe)
    task = asyncio.create_task(conn.serve())
    asking = asyncio.create_task(conn.request("session/request_permission", {}))
    await settle()
    asking.cancel()
    await settle()
    pipe.feed(b'{"jsonrpc":"2.0","id":1,"result":{"outcome":{"outcome":"cancelled"}}}\n')
    pipe.feed(b'{"jsonrpc":"2.0","id":42,"result":{}}\n')  # never sent: still worth a warning
    pipe.feed(b"")
    await task
    records = [(r.levelno, r.getMessage()) for r in caplog.records if "response" in r.getMessage()]
    assert records == [
        (logging.DEBUG, "dropping a late response to our request 1"),
        (logging.WARNING, "dropping a response to an unknown request id 42"),
    ]


async def test_notification_with_invalid_params_is_a_warning_without_traceback(
    caplog: pytest.LogCaptureFixture,
) -> None:
    def strict(params: Params) -> None:
        raise InvalidParams("`sessionId` must be a string")

    pipe = Pipe()
    await serve_lines(
        pipe, make(pipe, note=strict), b'{"jsonrpc":"2.0","method":"note","params":{}}'
    )
    (record,) = [r for r in caplog.records if "note" in r.getMessage()]
    assert record.levelno == logging.WARNING and record.exc_info is None
    assert "`sessionId` must be a string" in record.getMessage()


class BufferedPipe(Pipe):
    """A sink that, like stdio's, holds frames until it flushes (in a later callback or on
    drain): what the peer has received is `out`."""

    def __init__(self) -> None:
        super().__init__()
        self.held: list[bytes] = []

    def write(self, data: bytes) -> None:
        if not self.held:
            asyncio.get_running_loop().call_soon(self.flush)
        self.held.append(data)

    def flush(self) -> None:
        for data in self.held:
            super().write(data)
        self.held.clear()

    async def drain(self) -> None:
        self.flush()


async def test_work_after_a_reply_runs_once_the_reply_has_left() -> None:
    pipe = BufferedPipe()
    conn: Connection
    seen_at_callback: list[list[Any]] = []

    async def answered_then(params: Params) -> Any:
        conn.after_reply(lambda: seen_at_callback.append([f.get("id") for f in pipe.out]))
        conn.after_reply(lambda: conn.notify("after", {}))
        return "ok"

    async def failing_then(params: Params) -> Any:
        conn.after_reply(lambda: seen_at_callback.append(["never"]))
        raise InvalidParams("no")

    requests = {"then": answered_then, "fail": failing_then}
    conn = Connection(pipe.read, pipe, requests=requests, notifications={})
    task = asyncio.create_task(conn.serve())
    pipe.feed(
        b'{"jsonrpc":"2.0","id":1,"method":"then"}\n{"jsonrpc":"2.0","id":2,"method":"fail"}\n'
    )
    await settle()
    assert seen_at_callback == [[1]]  # the answer had left; the failed request runs nothing
    sent = [f.get("id", f.get("method")) for f in pipe.out]
    assert sorted(map(str, sent)) == ["1", "2", "after"] and sent.index(1) < sent.index("after")
    with pytest.raises(RuntimeError):
        conn.after_reply(lambda: None)  # outside a request handler
    pipe.feed(b"")
    await task


async def test_a_notification_sent_with_an_id_starts_before_the_requests_after_it() -> None:
    pipe = Pipe()
    started: list[str] = []

    async def request(params: Params) -> Any:
        started.append("request")
        return None

    conn = Connection(
        pipe.read,
        pipe,
        requests={"request": request},
        notifications={"note": lambda params: started.append("note")},
    )
    task = asyncio.create_task(conn.serve())
    pipe.feed(b'{"jsonrpc":"2.0","id":1,"method":"note","params":{}}\n')
    pipe.feed(b'{"jsonrpc":"2.0","id":2,"method":"request","params":{}}\n')
    await settle()
    assert started == ["note", "request"]  # a session/cancel with an id ends what came before
    assert sorted(f["id"] for f in pipe.out) == [1, 2]
    pipe.feed(b"")
    await task
