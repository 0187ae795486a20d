"""Raw-wire conformance: the real console script, fed malformed and tricky input line by line.

Every frame the server writes here is also validated against the official schema by the
`conformance` fixture (through `server_factory`).
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.support.raw import Frame, RawServer

Start = Callable[..., Any]
SLOW_TEXT = " ".join(f"word{i}" for i in range(60))


def updates_of(frames: list[Frame]) -> list[dict[str, Any]]:
    return [f["params"]["update"] for f in frames if f.get("method") == "session/update"]


def chunk_text(frames: list[Frame], kind: str = "agent_message_chunk") -> str:
    return "".join(u["content"]["text"] for u in updates_of(frames) if u["sessionUpdate"] == kind)


async def prompt(server: RawServer, session: str, text: str = "hi") -> Any:
    return await server.call(
        "session/prompt", {"sessionId": session, "prompt": [{"type": "text", "text": text}]}
    )


async def test_malformed_json_gets_parse_error_and_server_keeps_serving(
    server_factory: Start,
) -> None:
    server = await server_factory()
    await server.send_raw(b'{"jsonrpc": "2.0", "id": 1, "method": "initialize", \n')
    error = await server.next_frame()
    assert error["id"] == 1  # the id can still be read: the client is not left waiting
    assert error["error"]["code"] == -32700
    await server.send_raw(b'{"jsonrpc": "2.0", "result": {}, "id": 2, \n')
    error = await server.next_frame()
    assert error["id"] is None  # no "method" before it: maybe an answer, never one to echo
    assert error["error"]["code"] == -32700
    answer = await server.request("initialize", {"protocolVersion": 1})
    assert answer["result"]["protocolVersion"] == 1


@pytest.mark.parametrize(
    ("line", "why", "req_id"),
    [
        (b"[1, 2]", "batch", None),
        (b"[]", "batch", None),
        (b"42", "int", None),
        (b'"initialize"', "str", None),
        (b"null", "NoneType", None),
        (b'{"id": 1, "method": "initialize", "params": {"protocolVersion": 1}}', "jsonrpc", 1),
        (b'{"jsonrpc": "1.0", "id": "a", "method": "initialize"}', "jsonrpc", "a"),
        (b'{"jsonrpc": "2.0", "id": 1, "method": 7}', "method", 1),
        (b'{"jsonrpc": "2.0", "id": 1.5, "method": "initialize"}', "id", None),
        (b'{"jsonrpc": "2.0", "id": 9223372036854775808, "method": "initialize"}', "id", None),
        (b'{"jsonrpc": "2.0", "id": 7, "method": "initialize", "params": 5}', "params", 7),
    ],
)
async def test_invalid_requests_get_32600_with_their_id_when_it_can_be_read(
    server_factory: Start, line: bytes, why: str, req_id: Any
) -> None:
    """Regression: a readable id was answered with null, and the client waited for ever."""
    server = await server_factory()
    await server.send_raw(line + b"\n")
    error = await server.next_frame()
    assert error == {"jsonrpc": "2.0", "id": req_id, "error": error["error"]}
    assert error["error"]["code"] == -32600
    assert why in error["error"]["message"] or why in ("int", "str", "NoneType")
    answer = await server.request("initialize", {"protocolVersion": 1})
    assert "result" in answer


async def test_unknown_methods_and_notifications(server_factory: Start) -> None:
    server = await server_factory()
    for method in ("session/unknown", "_vendor.example/do_thing"):
        answer = await server.request(method, {})
        assert answer["error"]["code"] == -32601
        assert method in answer["error"]["message"]
    # Unknown notifications are ignored: the next answer is the very next frame.
    await server.notify("_vendor.example/ping", {"x": 1})
    await server.notify("session/whatever", {})
    req = await server.call("initialize", {"protocolVersion": 1})
    frame = await server.next_frame()
    assert frame["id"] == req and "result" in frame


async def test_invalid_params_name_the_field(server_factory: Start, tmp_path: Path) -> None:
    server = await server_factory()
    await server.request("initialize", {"protocolVersion": 1})
    cases: list[tuple[str, dict[str, Any], str]] = [
        ("session/new", {"mcpServers": []}, "`cwd` is required"),
        ("session/new", {"cwd": "relative/dir", "mcpServers": []}, "`cwd` must be an absolute"),
        ("session/new", {"cwd": 5, "mcpServers": []}, "`cwd` must be a string"),
        (
            "session/new",
            {"cwd": str(tmp_path), "mcpServers": [{"name": "x"}]},
            "mcpServers[0].command",
        ),
        ("session/prompt", {"sessionId": "s", "prompt": "hello"}, "`prompt` must be an array"),
        ("session/prompt", {"sessionId": "s", "prompt": [{"type": "text"}]}, "`prompt[0].text`"),
        ("initialize", {"protocolVersion": "1"}, "`protocolVersion`"),
    ]
    for method, params, expected in cases:
        answer = await server.request(method, params)
        assert answer["error"]["code"] == -32602, (method, params, answer)
        assert expected in answer["error"]["message"], answer["error"]["message"]


async def test_missing_mcp_servers_is_accepted(server_factory: Start, tmp_path: Path) -> None:
    server = await server_factory()
    await server.request("initialize", {"protocolVersion": 1})
    answer = await server.request("session/new", {"cwd": str(tmp_path)})
    assert answer["result"]["sessionId"]


async def test_unknown_session_is_resource_not_found(server_factory: Start) -> None:
    server = await server_factory()
    await server.request("initialize", {"protocolVersion": 1})
    answer = await server.request(
        "session/prompt", {"sessionId": "nope", "prompt": [{"type": "text", "text": "x"}]}
    )
    assert answer["error"]["code"] == -32002
    assert "nope" in answer["error"]["message"]


async def test_ids_are_echoed_exactly(server_factory: Start) -> None:
    server = await server_factory()
    for req_id in ("abc-1", "", 0, -7, 2**53 + 1):
        await server.call("initialize", {"protocolVersion": 1}, req_id=req_id)
        frame = await server.next_frame()
        assert frame["id"] == req_id and type(frame["id"]) is type(req_id)


async def test_initialize_twice_and_two_sessions(server_factory: Start, tmp_path: Path) -> None:
    server = await server_factory()
    first = await server.request("initialize", {"protocolVersion": 1})
    second = await server.request("initialize", {"protocolVersion": 2})
    assert first["result"] == second["result"]
    assert second["result"]["protocolVersion"] == 1
    assert second["result"]["agentInfo"]["name"] == "acp-server"
    a = await server.request("session/new", {"cwd": str(tmp_path), "mcpServers": []})
    b = await server.request("session/new", {"cwd": str(tmp_path), "mcpServers": []})
    assert a["result"]["sessionId"] != b["result"]["sessionId"]


async def test_prompt_streams_then_answers(
    server_factory: Start, script: Any, tmp_path: Path
) -> None:
    path = script([{"thought": "Think first.", "text": "Hello there, friend."}])
    server = await server_factory("--script", str(path))
    session = await server.handshake(str(tmp_path))
    answer, before = await server.response(await prompt(server, session))
    assert answer["result"] == {"stopReason": "end_turn"}
    assert chunk_text(before) == "Hello there, friend."
    assert chunk_text(before, "agent_thought_chunk") == "Think first."
    message_ids = {
        u["messageId"] for u in updates_of(before) if u["sessionUpdate"] == "agent_message_chunk"
    }
    assert len(message_ids) == 1
    kinds = [u["sessionUpdate"] for u in updates_of(before)]
    assert kinds[0] == "session_info_update"  # the title, from the first prompt
    assert kinds[-1] == "usage_update"  # how full the context is, after the round
    assert len(kinds) == 7  # "Think ", "first." + one delta per word of the text
    await asyncio.sleep(0.1)
    assert server.frames.empty()


async def test_two_megabyte_prompt_line(server_factory: Start, script: Any, tmp_path: Path) -> None:
    # A window that takes the prompt (the scripted model reports none: 8,192 would apply).
    path = str(script([{"text": "Got it."}]))
    server = await server_factory("--script", path, "--context-window", "1000000")
    session = await server.handshake(str(tmp_path))
    big = "x" * (2 * 1024 * 1024)
    answer, before = await server.response(await prompt(server, session, big))
    assert answer["result"]["stopReason"] == "end_turn"
    assert chunk_text(before) == "Got it."


async def test_over_limit_line_is_answered_and_server_survives(
    server_factory: Start, tmp_path: Path
) -> None:
    server = await server_factory()
    await server.handshake(str(tmp_path))
    head = (
        b'{"jsonrpc":"2.0","id":77,"method":"session/prompt",'
        b'"params":{"sessionId":"s","prompt":[{"type":"text","text":"'
    )
    await server.send_raw(head + b"y" * (65 * 1024 * 1024) + b'"}]}}\n')
    error = await server.next_frame(timeout=30)
    assert error["id"] == 77
    assert error["error"]["code"] == -32600
    assert "MiB" in error["error"]["message"]
    answer = await server.request("initialize", {"protocolVersion": 1})
    assert "result" in answer


async def test_cancel_request_answers_32800(
    server_factory: Start, script: Any, tmp_path: Path
) -> None:
    path = script([{"text": SLOW_TEXT, "delay_ms": 50}, {"text": "Fresh."}])
    server = await server_factory("--script", str(path))
    session = await server.handshake(str(tmp_path))
    req = await prompt(server, session)
    await server.until(lambda f: f.get("method") == "session/update")
    await server.notify("$/cancel_request", {"requestId": req})
    answer, _ = await server.response(req)
    assert answer["error"]["code"] == -32800
    answer, before = await server.response(await prompt(server, session))
    assert answer["result"]["stopReason"] == "end_turn"
    assert chunk_text(before) == "Fresh."


async def test_cancel_during_streaming_then_prompt_again(
    server_factory: Start, script: Any, tmp_path: Path
) -> None:
    path = script([{"text": SLOW_TEXT, "delay_ms": 50}, {"text": "Back again."}])
    server = await server_factory("--script", str(path))
    session = await server.handshake(str(tmp_path))
    req = await prompt(server, session)
    await server.until(lambda f: f.get("method") == "session/update")
    await server.notify("session/cancel", {"sessionId": session})
    answer, _ = await server.response(req)
    assert answer["result"] == {"stopReason": "cancelled"}
    await asyncio.sleep(0.3)
    assert server.frames.empty(), "no update may follow the cancelled answer"
    answer, before = await server.response(await prompt(server, session))
    assert answer["result"]["stopReason"] == "end_turn"
    assert chunk_text(before) == "Back again."


async def test_cancel_with_nothing_running_is_ignored(
    server_factory: Start, tmp_path: Path
) -> None:
    server = await server_factory()
    session = await server.handshake(str(tmp_path))
    await server.notify("session/cancel", {"sessionId": session})
    await server.notify("session/cancel", {"sessionId": "unknown"})
    answer = await server.request("initialize", {"protocolVersion": 1})
    assert "result" in answer


async def test_two_prompts_are_queued_in_order(
    server_factory: Start, script: Any, tmp_path: Path
) -> None:
    path = script([{"text": "first answer here", "delay_ms": 30}, {"text": "second answer"}])
    server = await server_factory("--script", str(path))
    session = await server.handshake(str(tmp_path))
    first = await prompt(server, session, "one")
    second = await prompt(server, session, "two")
    answer1, before1 = await server.response(first)
    answer2, before2 = await server.response(second)
    assert answer1["result"]["stopReason"] == answer2["result"]["stopReason"] == "end_turn"
    assert chunk_text(before1) == "first answer here"
    assert chunk_text(before2) == "second answer"


async def test_cancel_ends_running_and_queued_prompts(
    server_factory: Start, script: Any, tmp_path: Path
) -> None:
    path = script([{"text": SLOW_TEXT, "delay_ms": 50}, {"text": "never"}, {"text": "Later."}])
    server = await server_factory("--script", str(path))
    session = await server.handshake(str(tmp_path))
    first = await prompt(server, session)
    second = await prompt(server, session)
    await server.until(lambda f: f.get("method") == "session/update")
    await server.notify("session/cancel", {"sessionId": session})
    answer1, _ = await server.response(first)
    answer2, _ = await server.response(second)
    assert answer1["result"]["stopReason"] == answer2["result"]["stopReason"] == "cancelled"
    answer, before = await server.response(await prompt(server, session))
    assert answer["result"]["stopReason"] == "end_turn"
    assert chunk_text(before) == "never"


@pytest.mark.parametrize("how", ["eof", "sigterm", "sigterm-mid-prompt", "initialize-only"])
async def test_exit_zero_within_a_second(
    server_factory: Start, script: Any, tmp_path: Path, how: str
) -> None:
    server = await server_factory("--script", str(script([{"text": SLOW_TEXT, "delay_ms": 100}])))
    await server.request("initialize", {"protocolVersion": 1})
    if how == "sigterm-mid-prompt":
        answer = await server.request("session/new", {"cwd": str(tmp_path), "mcpServers": []})
        await prompt(server, answer["result"]["sessionId"])
        await server.until(lambda f: f.get("method") == "session/update")
    started = time.monotonic()
    if how == "eof":
        await server.close_stdin()
    else:
        server.terminate()
    code = await server.wait(timeout=3)
    elapsed = time.monotonic() - started
    assert code == 0
    assert elapsed < 1.0, f"took {elapsed:.2f}s to exit"
    assert (await server.stderr_text()) == ""


async def test_cancel_in_the_same_write_as_its_prompt(
    server_factory: Start, script: Any, tmp_path: Path
) -> None:
    """Regression: a cancel handled before the prompt's task had started was lost."""
    path = script([{"text": SLOW_TEXT, "delay_ms": 20}])
    server = await server_factory("--script", str(path))
    session = await server.handshake(str(tmp_path))
    req = server.next_id()
    both = [
        {
            "jsonrpc": "2.0",
            "id": req,
            "method": "session/prompt",
            "params": {"sessionId": session, "prompt": [{"type": "text", "text": "x"}]},
        },
        {"jsonrpc": "2.0", "method": "session/cancel", "params": {"sessionId": session}},
    ]
    await server.send_raw(b"".join(json.dumps(f).encode() + b"\n" for f in both))
    answer, _ = await server.response(req, timeout=3)
    assert answer["result"] == {"stopReason": "cancelled"}
    answer, _ = await server.response(await prompt(server, session))
    assert answer["result"]["stopReason"] == "end_turn"


# ----- hostile input: answered, never stored, never the end of the process --------------------


async def test_lone_surrogates_are_replaced_at_the_wire_but_an_id_is_kept(
    server_factory: Start, script: Any, conformance: Any, tmp_path: Path
) -> None:
    """Regression: id "\\ud800" was never answered, then answered under "\\ufffd", which the
    client cannot match; a session id with one answered -32603."""
    server = await server_factory("--script", str(script([{"text": "Fine."}])))
    await server.send_raw(
        b'{"jsonrpc":"2.0","id":"\\ud800","method":"initialize","params":{"protocolVersion":1}}\n'
    )
    answer = await server.next_frame()
    assert answer["id"] == "\ud800" and answer["result"]["protocolVersion"] == 1
    # The same escape, on a line that is valid UTF-8.
    lines = [line for side, line in conformance.observed if side == "agent"]
    assert lines[0].startswith('{"jsonrpc":"2.0","id":"\\ud800",'), lines[0][:80]
    session = await server.handshake(str(tmp_path))
    await server.send_raw(
        b'{"jsonrpc":"2.0","id":5,"method":"session/prompt","params":{"sessionId":"s\\udc00",'
        b'"prompt":[{"type":"text","text":"a\\ud800"}]}}\n'
    )
    answer, _ = await server.response(5)
    assert answer["error"]["code"] == -32002
    assert "s\ufffd" in answer["error"]["message"]
    # An id with a lone surrogate and a text with one: the text is cleaned, the id kept.
    await server.send_raw(
        b'{"jsonrpc":"2.0","id":"p\\udfff","method":"session/prompt","params":{"sessionId":"'
        + session.encode()
        + b'","prompt":[{"type":"text","text":"a\\ud800"}]}}\n'
    )
    answer, before = await server.response("p\udfff")
    assert answer["id"] == "p\udfff" and answer["result"]["stopReason"] == "end_turn"
    assert chunk_text(before) == "Fine."
    answer = await server.request("session/close", {"sessionId": session})
    assert answer["result"] == {}


async def test_nan_is_a_parse_error_and_never_stored(
    server_factory: Start, script: Any, tmp_path: Path
) -> None:
    """Regression: NaN was accepted and stored; every later session/load answered -32603."""
    server = await server_factory("--script", str(script([{"text": "Fine."}])))
    session = await server.handshake(str(tmp_path))
    for constant in (b"NaN", b"Infinity", b"-Infinity"):
        await server.send_raw(
            b'{"jsonrpc":"2.0","id":"p","method":"session/prompt","params":{"sessionId":"'
            + session.encode()
            + b'","prompt":[{"type":"text","text":"hi","_meta":{"x":'
            + constant
            + b"}}]}}\n"
        )
        answer, _ = await server.response("p")
        assert answer["error"]["code"] == -32700, answer
    answer, _ = await server.response(await prompt(server, session))
    assert answer["result"]["stopReason"] == "end_turn"
    params = {"sessionId": session, "cwd": str(tmp_path), "mcpServers": []}
    answer = await server.request("session/load", params)
    assert "result" in answer, answer


@pytest.mark.parametrize(
    ("line", "req_id"),
    [
        (b"[" * 1000 + b"]" * 1000, None),
        (b'{"a":' * 1000 + b"0" + b"}" * 1000, None),
        (b'{"jsonrpc":"2.0","id":3,"method":"initialize","params":{"x":' + b"[" * 5000, 3),
        (b'{"jsonrpc":"2.0","id":4,"method":"a","params":' + b'{"a":' * 300 + b"0" + b"}" * 301, 4),
    ],
)
async def test_deep_nesting_is_rejected_and_the_server_keeps_serving(
    server_factory: Start, line: bytes, req_id: Any
) -> None:
    """Regression: RecursionError ended the process."""
    server = await server_factory()
    await server.send_raw(line + b"\n")
    error = await server.next_frame()
    assert error["id"] == req_id
    assert error["error"]["code"] == -32600
    answer = await server.request("initialize", {"protocolVersion": 1})
    assert "result" in answer


async def test_cancel_request_with_an_unhashable_request_id(server_factory: Start) -> None:
    """Regression: `"requestId": []` raised TypeError and ended the process."""
    server = await server_factory()
    bad_ids: list[Any] = [[], {}, 1.5, True]
    for bad in bad_ids:
        await server.notify("$/cancel_request", {"requestId": bad})
    answer = await server.request("$/cancel_request", {"requestId": {}})
    assert answer["error"]["code"] == -32602
    assert "requestId" in answer["error"]["message"]
    answer = await server.request("initialize", {"protocolVersion": 1})
    assert "result" in answer


async def test_session_cancel_with_a_wrong_session_id_type_is_ignored(
    server_factory: Start, tmp_path: Path
) -> None:
    """Regression (found by the wire fuzz): `"sessionId": []` raised TypeError in the handler,
    which logged a traceback on stderr (an error in editors that show stderr)."""
    server = await server_factory()
    await server.handshake(str(tmp_path))
    bad_ids: list[Any] = [[], {}, 5, None]
    for bad in bad_ids:
        await server.notify("session/cancel", {"sessionId": bad})
    answer = await server.request("initialize", {"protocolVersion": 1})
    assert "result" in answer
    await server.close_stdin()
    assert await server.wait() == 0
    assert await server.stderr_text() == ""


@pytest.mark.parametrize(
    ("head", "req_id"),
    [
        (b'{"jsonrpc":"2.0","id":"\\q","method":"initialize","params":{"x":"', None),
        (b'{"jsonrpc":"2.0","id":"\\ud800","method":"initialize","params":{"x":"', "\ud800"),
        (b'{"jsonrpc":"2.0","id":31,"method":"initialize","params":{"x":"\\q', 31),
    ],
)
async def test_over_limit_line_with_a_broken_escape_is_answered(
    server_factory: Start, head: bytes, req_id: Any
) -> None:
    """Regression: building the "too long" answer raised on the escape."""
    server = await server_factory(env={"ACP_SERVER_MAX_LINE_BYTES": "4096"})
    await server.send_raw(head + b"y" * 5000 + b'"}}\n')
    error = await server.next_frame()
    assert error["id"] == req_id
    assert error["error"]["code"] == -32600
    assert "4,096 bytes" in error["error"]["message"]
    answer = await server.request("initialize", {"protocolVersion": 1})
    assert "result" in answer


# ----- end of input: finish what was received, then exit ----------------------------------------


def request_line(req_id: int, method: str, params: dict[str, Any]) -> bytes:
    frame = {"jsonrpc": "2.0", "id": req_id, "method": method, "params": params}
    return json.dumps(frame).encode() + b"\n"


async def test_piped_requests_are_all_answered_at_end_of_input(
    server_factory: Start, tmp_path: Path
) -> None:
    """Regression: `printf '<initialize>\\n<session/new>\\n' | acp-server` answered session/new
    with -32800: end of input cancelled what was still running."""
    server = await server_factory()
    await server.send_raw(
        request_line(1, "initialize", {"protocolVersion": 1})
        + request_line(2, "session/new", {"cwd": str(tmp_path), "mcpServers": []})
        + request_line(3, "session/list", {})
    )
    await server.close_stdin()
    assert await server.wait() == 0
    answers = {f["id"]: f for f in server.seen if "id" in f}
    assert sorted(answers) == [1, 2, 3]
    assert all("result" in a for a in answers.values()), answers
    assert answers[2]["result"]["sessionId"]


@pytest.mark.parametrize("needs_permission", [False, True])
async def test_prompt_received_before_end_of_input_is_finished(
    server_factory: Start, script: Any, tmp_path: Path, needs_permission: bool
) -> None:
    """A scripted conformance run: the prompt is written, stdin closed at once, answers read.
    A permission request can get no answer after that: it fails at once, the turn ends."""
    rounds: list[dict[str, Any]] = [{"text": "All done here.", "delay_ms": 20}]
    if needs_permission:
        command = {"name": "run_command", "arguments": {"command": "touch made.txt"}}
        rounds.insert(0, {"tool_calls": [command]})
    server = await server_factory("--script", str(script(rounds)))
    session = await server.handshake(str(tmp_path))
    req = server.next_id()
    params = {"sessionId": session, "prompt": [{"type": "text", "text": "go"}]}
    await server.send_raw(request_line(req, "session/prompt", params))
    await server.close_stdin()
    assert await server.wait() == 0
    answer = next(f for f in server.seen if f.get("id") == req and "method" not in f)
    assert answer["result"] == {"stopReason": "end_turn"}
    assert chunk_text(server.seen) == "All done here."
    assert not (tmp_path / "made.txt").exists()
    if needs_permission:
        (failed,) = [
            u
            for u in updates_of(server.seen)
            if u["sessionUpdate"] == "tool_call_update" and u.get("status") == "failed"
        ]
        assert "closed the connection" in failed["content"][0]["content"]["text"]
    assert await server.stderr_text() == ""


async def test_sigterm_while_finishing_after_end_of_input_is_immediate(
    server_factory: Start, script: Any, tmp_path: Path
) -> None:
    # The reply takes at least 60 x 0.2 s = 12 s (sleeps, on any machine): immediate is before
    # it ends, with the reply cut short. (A fixed "under 1 s" failed on a busy machine.)
    server = await server_factory("--script", str(script([{"text": SLOW_TEXT, "delay_ms": 200}])))
    session = await server.handshake(str(tmp_path))
    req = await prompt(server, session)
    await server.close_stdin()
    await server.until(lambda f: f.get("method") == "session/update")
    started = time.monotonic()
    server.terminate()
    assert await server.wait(timeout=30) == 0
    assert time.monotonic() - started < 12
    assert chunk_text(server.seen) != SLOW_TEXT, "the reply was finished before the exit"
    assert not any(f.get("id") == req and "result" in f for f in server.seen)


async def test_late_answer_to_a_cancelled_permission_request_is_not_a_warning(
    server_factory: Start, script: Any, tmp_path: Path
) -> None:
    """Regression: the answer a client must send after a cancel was logged as a warning, which
    editors such as agent-shell show as an error."""
    command = {"name": "run_command", "arguments": {"command": "touch made.txt"}}
    path = script([{"tool_calls": [command]}, {"text": "never"}])
    server = await server_factory("--script", str(path), "--log-level", "warning", "--log-stderr")
    session = await server.handshake(str(tmp_path))
    req = await prompt(server, session)
    frames = await server.until(lambda f: f.get("method") == "session/request_permission")
    asked = frames[-1]
    await server.notify("session/cancel", {"sessionId": session})
    answer, _ = await server.response(req)
    assert answer["result"] == {"stopReason": "cancelled"}
    outcome = {"outcome": {"outcome": "cancelled"}}
    await server.send({"jsonrpc": "2.0", "id": asked["id"], "result": outcome})
    answer = await server.request("initialize", {"protocolVersion": 1})
    await server.close_stdin()
    assert await server.wait() == 0
    assert await server.stderr_text() == ""
