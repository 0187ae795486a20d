"""Seeded wire fuzz: thousands of hostile lines into one real server over real pipes.

Deep nesting, lone surrogates, NaN/Infinity, ids and request ids of every wrong type, wrong JSON
types in every param of every method we serve, over-long lines with broken escapes (the server
runs with a small line limit), huge strings, unknown methods, truncated and binary lines, and
stray responses. Then: the process is still running; every request whose id can be read was
answered exactly once, with that id; every frame the server wrote validates against the
official schema (the `conformance` fixture); no handler failed (no traceback on stderr); and a
normal prompt still works.

Reproduce a failure with the seed it prints:
`WIRE_FUZZ_SEED=1234 pytest tests/e2e/test_wire_fuzz.py` (`WIRE_FUZZ_LINES=20000` runs longer).
"""

from __future__ import annotations

import json
import os
import random
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from tests.support.raw import RawServer
from tests.support.wirefuzz import (
    DELETE,
    ONE_OF_EACH_TYPE,
    Case,
    answered,
    check_answers,
    dump,
    field_paths,
    frame,
    replace,
    send_all,
)

Start = Callable[..., Any]
LINES = int(os.environ.get("WIRE_FUZZ_LINES", "3200"))
MAX_LINE = 16 * 1024


class Fuzzer:
    """Makes hostile lines from a seeded generator; knows which ids must be answered."""

    def __init__(self, seed: int, sessions: tuple[str, str], cwd: Path) -> None:
        self.rng = random.Random(seed)
        self.main, self.spare = sessions
        self.cwd = str(cwd)
        self.count = 0
        self.makers: list[tuple[int, Callable[[], Case]]] = [
            (30, self.wrong_param),
            (6, self.deep),
            (6, self.surrogates),
            (5, self.non_finite),
            (5, self.bad_id),
            (6, self.cancel_request),
            (5, self.over_long),
            (3, self.huge_string),
            (5, self.unknown_method),
            (6, self.truncated),
            (3, self.garbage),
            (4, self.stray_response),
            (3, self.valid),
        ]

    def cases(self, n: int) -> list[Case]:
        """A sweep of every JSON type into every param of every method, then random hostile
        lines up to `n`, shuffled together."""
        cases = list(self.sweep())
        weights = [w for w, _ in self.makers]
        for make in self.rng.choices([m for _, m in self.makers], weights, k=n - len(cases)):
            cases.append(make())
        self.rng.shuffle(cases)
        return cases

    def sweep(self) -> Iterator[Case]:
        for method in METHODS:
            template = self.template(method)
            for path in field_paths(template):
                for value in ONE_OF_EACH_TYPE:
                    yield self.request(method, replace(template, path, value))

    def request(self, method: str, params: Any) -> Case:
        """`method` as a client sends it: a notification, or a request that must be answered."""
        if method in NOTIFICATIONS:
            return Case(dump(frame(None, method, params)))
        req_id = self.new_id()
        return Case(dump(frame(req_id, method, params)), [req_id])

    def new_id(self) -> int | str:
        self.count += 1
        return self.count + 10_000 if self.rng.random() < 0.5 else f"fz-{self.count}"

    # ----- values --------------------------------------------------------------------------

    def hostile(self, depth: int = 0) -> Any:
        """A value of some JSON type, chosen to be wrong for most fields."""
        rng = self.rng

        def inner(depth: int) -> Any:
            return self.hostile(depth) if depth < 3 else None

        makers: list[Callable[[], Any]] = [
            lambda: None,
            lambda: rng.choice([True, False]),
            lambda: rng.choice([0, -1, 1, 2**31, 2**53 + 1, 2**63 - 1, 2**63, -(2**63) - 1, 2**70]),
            lambda: rng.choice([1.5, -0.0, 1e308, 3.14e-300]),
            lambda: rng.choice(["", "x", " ", "\u0000", "\t\n", "ask", "mode", "relative/dir"]),
            lambda: rng.choice(["/", "/nonexistent/dir", self.cwd, "\U0001f600", "../.."]),
            lambda: rng.choice(["a\ud800b", "\udfff", "\ud83d", "\ud800\ud800"]),
            lambda: "x" * rng.choice([1_000, 5_000]),
            lambda: rng.choice(["text", "image", "resource", "resource_link", "audio", "nope"]),
            lambda: rng.choice([[], {}, [[[]]], [None, 1, "a"], {"": 1}]),
            lambda: [inner(depth + 1)],
            lambda: {"k": inner(depth + 1)},
            lambda: {"type": inner(depth + 1), "text": inner(depth + 1)},
            lambda: {"\ud800": 1, "name": "n", "command": "c"},
            lambda: {"_meta": {"x": inner(depth + 1)}},
        ]
        return rng.choice(makers)()

    def template(self, method: str) -> Any:
        cwd, main, spare = self.cwd, self.main, self.spare
        text = {"type": "text", "text": "hello"}
        mcp = {
            "name": "m",
            "command": "/bin/true",
            "args": ["a"],
            "env": [{"name": "A", "value": "1"}],
        }
        return {
            "initialize": {
                "protocolVersion": 1,
                "clientCapabilities": {"fs": {"readTextFile": False}, "terminal": False},
                "clientInfo": {"name": "fuzz", "version": "1"},
            },
            "session/new": {"cwd": cwd, "mcpServers": [mcp], "additionalDirectories": [cwd]},
            "session/prompt": {"sessionId": main, "prompt": [text, dict(text)]},
            "session/load": {"sessionId": main, "cwd": cwd, "mcpServers": [mcp]},
            "session/resume": {"sessionId": spare, "cwd": cwd, "mcpServers": []},
            "session/list": {"cwd": cwd, "cursor": None},
            "session/close": {"sessionId": spare},
            "session/delete": {"sessionId": spare},
            "session/fork": {"sessionId": main, "cwd": cwd, "mcpServers": [mcp]},
            "session/set_mode": {"sessionId": main, "modeId": "ask"},
            "session/set_config_option": {"sessionId": main, "configId": "mode", "value": "ask"},
            "session/cancel": {"sessionId": main},
            "$/cancel_request": {"requestId": 1},
        }[method]

    # ----- line makers ---------------------------------------------------------------------

    def wrong_param(self) -> Case:
        """One field of a valid request of any method we serve gets a wrong value (or goes)."""
        rng = self.rng
        method = rng.choice(METHODS)
        params = self.template(method)
        path = rng.choice(list(field_paths(params)))
        op = rng.random()
        if op < 0.75:
            params = replace(params, path, self.hostile())
        elif op < 0.9 and path:
            params = replace(params, path, DELETE)
        else:
            params = {**params, "unknownField": self.hostile()}
        if method == "$/cancel_request" and rng.random() < 0.3:
            # Sent with an id, a requestId that names no request is -32602.
            req_id = self.new_id()
            bad = rng.choice([[], {}, 1.5, True, [1], {"a": 1}])
            return Case(dump(frame(req_id, method, {"requestId": bad})), [req_id])
        return self.request(method, params)

    def deep(self) -> Case:
        rng = self.rng
        depth = rng.choice([129, 200, 900, 1000, 2500])  # 2500 objects still fit in a line
        open_, close = rng.choice([(b"[", b"]"), (b'{"a":', b"}")])
        body = open_ * depth + b"0" + close * depth if rng.random() < 0.8 else open_ * depth
        if rng.random() < 0.3:
            return Case(body)
        req_id = self.new_id()
        head = dump(frame(req_id, rng.choice(METHODS), ...))[:-1]
        return Case(head + b',"params":{"x":' + body + b"}}", [req_id])

    def surrogates(self) -> Case:
        rng = self.rng
        req_id: Any = f"\ud800-{self.new_id()}" if rng.random() < 0.5 else self.new_id()
        method = rng.choice([*METHODS, "session/\udc00"])
        params = self.template(method) if method in METHODS else {}
        params = {**params, "\ud83d": "lone \udfff", "sessionId": f"{self.main}\ud800"}
        if method in NOTIFICATIONS:
            return Case(dump(frame(None, method, params)))
        return Case(dump(frame(req_id, method, params)), [req_id])  # the id exactly as sent

    def non_finite(self) -> Case:
        req_id = self.new_id()
        value = self.rng.choice(["NaN", "Infinity", "-Infinity", "1e400", "-2e999"])
        line = dump(frame(req_id, self.rng.choice(METHODS), {"sessionId": self.main, "x": 0}))
        return Case(line.replace(b'"x": 0', b'"x": ' + value.encode()), [req_id])

    def bad_id(self) -> Case:
        bad = self.rng.choice([[], {}, [1], {"a": 1}, 1.5, True, False, 2**63, -(2**63) - 1])
        return Case(dump(frame(bad, self.rng.choice(METHODS), {})))

    def cancel_request(self) -> Case:
        rng = self.rng
        targets: list[Any] = [[], {}, [1], 1.5, None, True, "nope", self.count + 10_000]
        target = rng.choice(targets)
        params: Any = {"requestId": target} if rng.random() < 0.8 else rng.choice([[], "x", 5])
        return Case(dump(frame(None, "$/cancel_request", params)))

    def over_long(self) -> Case:
        rng = self.rng
        filler = b"y" * rng.choice([MAX_LINE, 3 * MAX_LINE, 200_000])
        req_id = self.new_id()
        readable = dump(frame(req_id, rng.choice(METHODS), ...))[:-1]
        starts: list[tuple[bytes, list[Any]]] = [
            (b'{"jsonrpc":"2.0","id":"\\q","method":"initialize","params":{"x":"', []),
            (b'{"jsonrpc":"2.0","id":"\\ud800","method":"x","params":{"x":"', ["\ud800"]),
            (b'{"jsonrpc":"2.0","id":"\\u12","method":"x","params":{"x":"', []),
            (readable + b',"params":{"x":"\\q', [req_id]),
            (readable + b',"params":{"x":"\\ud800', [req_id]),
            (b'{"jsonrpc":"2.0","params":{"x":"\\', []),
        ]
        start, answer = rng.choice(starts)
        return Case(start + filler + b'"}}', answer)

    def huge_string(self) -> Case:
        req_id = self.new_id()
        method = self.rng.choice(METHODS[:6])
        text = "x" * (MAX_LINE - 1_000)  # just under the line limit
        params = self.template(method)
        if method == "session/prompt":
            params["prompt"][0]["text"] = text
        else:
            params[self.rng.choice([*params, "x"])] = text
        return Case(dump(frame(req_id, method, params)), [req_id])

    def unknown_method(self) -> Case:
        rng = self.rng
        method = rng.choice(["", "rpc.x", "_vendor/x", "session/", "SESSION/NEW", "fs/read"])
        if rng.random() < 0.3:
            return Case(dump(frame(None, method, rng.choice([{}, [], None]))))
        req_id = self.new_id()
        return Case(dump(frame(req_id, method, rng.choice([{}, [], None, ...]))), [req_id])

    def truncated(self) -> Case:
        req_id = self.new_id()
        method = self.rng.choice(METHODS)
        line = dump(frame(req_id, method, self.template(method)))
        cut = self.rng.randrange(1, len(line))
        return Case(line[:cut], maybe=[req_id])

    def garbage(self) -> Case:
        rng = self.rng
        if rng.random() < 0.2:  # valid JSON, then junk: not JSON, but the id can be read
            req_id = self.new_id()
            return Case(dump(frame(req_id, "initialize", {})) + b"}", [req_id])
        return Case(
            rng.choice(
                [
                    bytes(rng.randrange(256) for _ in range(rng.randrange(1, 40))).replace(
                        b"\n", b""
                    ),
                    b"\xff\xfe{}",
                    b"{}",
                    b"[]",
                    b'"\\ud800"',
                    b"NaN",
                    b"\x00",
                ]
            )
        )

    def stray_response(self) -> Case:
        rng = self.rng
        ids: list[Any] = [1, 2, 999, "x", None, [1]]
        bodies: list[dict[str, Any]] = [{"result": {}}, {"error": {"code": 1, "message": "m"}}, {}]
        req_id, body = rng.choice(ids), rng.choice(bodies)
        return Case(dump({"jsonrpc": "2.0", "id": req_id, **body}))

    def valid(self) -> Case:
        req_id = self.new_id()
        method = self.rng.choice(["initialize", "session/list", "session/set_mode"])
        return Case(dump(frame(req_id, method, self.template(method))), [req_id])


METHODS = [
    "initialize",
    "session/new",
    "session/prompt",
    "session/load",
    "session/resume",
    "session/list",
    "session/close",
    "session/delete",
    "session/fork",
    "session/set_mode",
    "session/set_config_option",
    "session/cancel",
    "$/cancel_request",
]
NOTIFICATIONS = {"session/cancel", "$/cancel_request"}


async def test_wire_fuzz(server_factory: Start, script: Any, tmp_path: Path) -> None:
    seed = int(os.environ.get("WIRE_FUZZ_SEED") or random.randrange(2**32))
    print(f"wire fuzz seed: {seed} (WIRE_FUZZ_SEED={seed} reproduces this run)")
    path = script([{"text": "Fuzzed."}])
    env = {"ACP_SERVER_MAX_LINE_BYTES": str(MAX_LINE)}
    server: RawServer = await server_factory("--script", str(path), env=env)
    main = await server.handshake(str(tmp_path))
    answer = await server.request("session/new", {"cwd": str(tmp_path), "mcpServers": []})
    fuzzer = Fuzzer(seed, (main, answer["result"]["sessionId"]), tmp_path)
    cases = fuzzer.cases(LINES)
    await send_all(server, cases)
    must = Counter(json.dumps(i) for c in cases for i in c.answer)
    maybe = Counter(json.dumps(i) for c in cases for i in c.maybe)
    try:
        await answered(server, set(must), timeout=60)
    except TimeoutError:
        got = {json.dumps(f.get("id")) for f in server.seen if "method" not in f}
        missing = sorted(set(must) - got)[:10]
        raise AssertionError(f"seed {seed}: unanswered ids {missing}") from None
    # The server is still serving, and a normal prompt works.
    await server.request("initialize", {"protocolVersion": 1})
    fresh = await server.request("session/new", {"cwd": str(tmp_path), "mcpServers": []})
    params = {"sessionId": fresh["result"]["sessionId"], "prompt": [{"type": "text", "text": "hi"}]}
    answer = await server.request("session/prompt", params, timeout=20)
    assert answer.get("result", {}).get("stopReason") == "end_turn", (seed, answer)
    assert server.proc.returncode is None, f"seed {seed}: the server exited"
    check_answers(server.seen, must, maybe, seed)
    codes = Counter(f["error"]["code"] if "error" in f else "ok" for f in server.seen if "id" in f)
    print(f"{len(cases)} lines; answers by code: {dict(codes)}")
    internal = [f for f in server.seen if f.get("error", {}).get("code") == -32603]
    assert not internal, f"seed {seed}: internal errors (the log says why): {internal[:5]}"
    await server.close_stdin()
    assert await server.wait(timeout=20) == 0, f"seed {seed}"
    stderr = await server.stderr_text()
    assert "Traceback" not in stderr, f"seed {seed}: handlers failed:\n" + "\n".join(
        dict.fromkeys(line for line in stderr.splitlines() if line[:1] not in " T")
    )
