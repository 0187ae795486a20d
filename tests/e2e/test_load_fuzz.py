"""Seeded structural fuzz of valid ACP requests, into one real server over real pipes.

Where tests/e2e/test_wire_fuzz.py throws hostile lines, this one starts from requests a rich
client really sends — session/new, session/prompt with every content block the server accepts,
set_mode and set_config_option with the values the server offered, session/load, session/cancel
— and mutates their structure: a wrong JSON type in every field (a sweep), then random
combinations of a wrong type, a missing or an unknown field, a huge string, nesting as deep as
the protocol allows (128 levels, the limit included), unicode edge cases (line and paragraph
separators and NEL sent raw, BOM, NUL, bidi overrides, combining marks, ZWJ sequences,
noncharacters, the last code point, lone surrogates escaped), and odd numbers.

Checked: every request is answered exactly once, with a result or a well-formed error (integer
code, a message; the `conformance` fixture validates every frame against the official schema);
no internal error and no traceback; the server keeps running; then a known-good prompt succeeds
in the fuzzed session and in a fresh one. Reproduce with the seed it prints:
`LOAD_FUZZ_SEED=1234 pytest tests/e2e/test_load_fuzz.py` (`LOAD_FUZZ_CASES=5000` runs longer).
"""

from __future__ import annotations

import json
import os
import random
import time
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from tests.support.raw import Frame, RawServer
from tests.support.wirefuzz import (
    DELETE,
    ONE_OF_EACH_TYPE,
    Case,
    Path_,
    answered,
    check_answers,
    field_paths,
    frame,
    replace,
    send_all,
)

Start = Callable[..., Any]
CASES = int(os.environ.get("LOAD_FUZZ_CASES", "1500"))
MAX_DEPTH = 128  # the deepest nesting the server (like serde_json clients) accepts
PIXEL = (  # a 1x1 PNG
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg=="
)
UNICODE = [
    "\u2028\u2029",  # JSON allows them raw; a reader splitting on them would cut the line
    "a\x85b",  # NEL: str.splitlines() splits on it
    "\x0b\x0c\x1c\x1d\x1e",  # more splitlines() separators (escaped in JSON)
    "\ufeffstart",
    "nul\x00inside",
    "\u202eevil\u202c",
    "e\u0301\u0301\u0301" * 50,
    "\U0001f468\u200d\U0001f469\u200d\U0001f467",
    "\U0010ffff\uffff\ufffe",
    "\U0001d573\U0001d58a\U0001d591",
    "\u0130\u00df\ufb03",  # case mapping changes the length
    "\u00a0\u3000\u200b",
    "lone \ud800 and \udfff",
]
NUMBERS: list[Any] = [0, -1, 2**53 + 1, 2**64, -(2**63) - 1, 1e308, -0.0, 5e-324, 1.0]


def templates(cwd: str, main: str, spare: str, offer: dict[str, Any]) -> dict[str, Any]:
    """A valid request of each fuzzed method, with the values the server offered."""
    caps = offer["promptCapabilities"]
    prompt: list[dict[str, Any]] = [
        {"type": "text", "text": "hello", "annotations": {"audience": ["user"], "priority": 1}},
        {"type": "resource_link", "uri": f"file://{cwd}/a.txt", "name": "a.txt", "size": 5},
    ]
    if caps.get("embeddedContext"):
        resource = {"uri": f"file://{cwd}/b.txt", "text": "bee", "mimeType": "text/plain"}
        prompt.append({"type": "resource", "resource": resource})
    if caps.get("image"):
        prompt.append({"type": "image", "data": PIXEL, "mimeType": "image/png"})
    return {
        "session/new": {"cwd": cwd, "mcpServers": [], "_meta": {"client": "fuzz"}},
        "session/prompt": {"sessionId": main, "prompt": prompt},
        "session/set_mode": {"sessionId": main, "modeId": offer["mode"]},
        "session/set_config_option": {
            "sessionId": main,
            "configId": offer["configId"],
            "value": offer["configValue"],
        },
        "session/load": {"sessionId": spare, "cwd": cwd, "mcpServers": []},
        "session/cancel": {"sessionId": main},
    }


class Mutator:
    """Makes the seeded cases; knows which ids must be answered."""

    def __init__(self, seed: int, valid: dict[str, Any]) -> None:
        self.rng = random.Random(seed)
        self.valid = valid
        self.count = 0
        self.ops: list[Callable[[Any, Path_], Any]] = [
            self.retype,
            self.drop,
            self.extra,
            self.huge,
            self.deep,
            self.unicode,
            self.number,
        ]

    def cases(self, n: int) -> list[Case]:
        cases = list(self.sweep())
        while len(cases) < n:
            cases.append(self.mutated())
        self.rng.shuffle(cases)
        return cases

    def sweep(self) -> Iterator[Case]:
        """A value of every JSON type into every field of every method."""
        for method, params in self.valid.items():
            for path in field_paths(params):
                for value in ONE_OF_EACH_TYPE:
                    yield self.case(method, replace(params, path, value))

    def mutated(self) -> Case:
        method = self.rng.choice(list(self.valid))
        params = self.valid[method]
        for _ in range(self.rng.choice([1, 1, 2, 3])):
            # Not the root (the sweep sends params of every type): a field inside them.
            path = self.rng.choice(list(field_paths(params))[1:] or [[]])
            params = self.rng.choice(self.ops)(params, path)
        return self.case(method, params)

    def case(self, method: str, params: Any) -> Case:
        req_id = None if method == "session/cancel" else self.new_id()
        message = frame(req_id, method, params)
        try:  # raw UTF-8 half the time: U+2028, NEL and friends travel unescaped
            raw = self.rng.random() < 0.5
            line = json.dumps(message, ensure_ascii=not raw).encode()
        except UnicodeEncodeError:  # a lone surrogate can only travel escaped
            line = json.dumps(message).encode()
        return Case(line, [] if req_id is None else [req_id])

    def new_id(self) -> int | str:
        self.count += 1
        return self.count + 10_000 if self.rng.random() < 0.5 else f"lf-{self.count}"

    # ----- mutations: (params, path) -> params ----------------------------------------------

    def retype(self, params: Any, path: Path_) -> Any:
        return replace(params, path, self.rng.choice(ONE_OF_EACH_TYPE))

    def drop(self, params: Any, path: Path_) -> Any:
        return replace(params, path, DELETE) if path else params

    def extra(self, params: Any, path: Path_) -> Any:
        if not isinstance(params, dict):
            return params
        return {**params, self.rng.choice(["x", "_meta", "sessionId2", ""]): self.value()}

    def huge(self, params: Any, path: Path_) -> Any:
        size = self.rng.choice([10_000, 100_000, 100_000, 1_000_000])
        piece = self.rng.choice(["x", "é", "\U0001f600", "ab\u2028"])
        return replace(params, path, piece * (size // len(piece.encode())))

    def deep(self, params: Any, path: Path_) -> Any:
        """A chain of containers as deep as allowed (or less): the frame, its params and the
        path to the node already take len(path) + 1 levels of the 128."""
        room = MAX_DEPTH - len(path) - 1
        if room < 1:  # the node is already as deep as allowed (an earlier mutation nested it)
            return params
        levels = room if self.rng.random() < 0.3 else self.rng.randint(1, room)
        value: Any = self.rng.choice(["leaf", 1, None])
        for _ in range(levels):
            value = [value] if self.rng.random() < 0.5 else {"k": value}
        return replace(params, path, value)

    def unicode(self, params: Any, path: Path_) -> Any:
        edge = self.rng.choice(UNICODE)
        node = node_at(params, path)
        return replace(params, path, node + edge if isinstance(node, str) else edge)

    def number(self, params: Any, path: Path_) -> Any:
        return replace(params, path, self.rng.choice(NUMBERS))

    def value(self) -> Any:
        return self.rng.choice([*ONE_OF_EACH_TYPE, *UNICODE, *NUMBERS])


def node_at(value: Any, path: Path_) -> Any:
    for key in path:
        value = value[key]
    return value


async def open_sessions(server: RawServer, cwd: Path) -> tuple[str, str, dict[str, Any]]:
    """initialize and two sessions; the main one's offer (modes, a config option)."""
    init = await server.request("initialize", {"protocolVersion": 1, "clientCapabilities": {}})
    params = {"cwd": str(cwd), "mcpServers": []}
    main = (await server.request("session/new", params))["result"]
    spare = (await server.request("session/new", params))["result"]
    option = main["configOptions"][0]
    offer = {
        "promptCapabilities": init["result"]["agentCapabilities"]["promptCapabilities"],
        "mode": main["modes"]["availableModes"][-1]["id"],
        "configId": option["id"],
        "configValue": option["options"][0]["value"],
    }
    return main["sessionId"], spare["sessionId"], offer


def well_formed(answer: Frame) -> bool:
    if "result" in answer:
        return "error" not in answer
    error = answer.get("error")
    return (
        isinstance(error, dict)
        and type(error.get("code")) is int
        and isinstance(error.get("message"), str)
        and bool(error["message"])
    )


async def test_structural_fuzz_of_valid_requests(
    server_factory: Start, script: Any, tmp_path: Path, figures: Any
) -> None:
    seed = int(os.environ.get("LOAD_FUZZ_SEED") or random.randrange(2**32))
    figures("seed", f"LOAD_FUZZ_SEED={seed}")
    (tmp_path / "a.txt").write_text("apple", encoding="utf-8")
    server: RawServer = await server_factory("--script", str(script([{"text": "Fuzzed."}])))
    main, spare, offer = await open_sessions(server, tmp_path)
    valid = templates(str(tmp_path), main, spare, offer)
    cases = Mutator(seed, valid).cases(CASES)
    started = time.perf_counter()
    await send_all(server, cases)
    must = Counter(json.dumps(i) for c in cases for i in c.answer)
    try:
        await answered(server, set(must), timeout=120)
    except TimeoutError:
        got = {json.dumps(f.get("id")) for f in server.seen if "method" not in f}
        raise AssertionError(f"seed {seed}: unanswered {sorted(set(must) - got)[:10]}") from None
    figures("cases", f"{len(cases)} answered in {time.perf_counter() - started:.1f} s")
    check_answers(server.seen, must, Counter(), seed)
    answers = [f for f in server.seen if "method" not in f]
    assert all(well_formed(f) for f in answers), [f for f in answers if not well_formed(f)][:3]
    codes = Counter(f["error"]["code"] if "error" in f else "ok" for f in answers)
    figures("answers by code", dict(codes))
    assert codes[-32603] == 0, f"seed {seed}: internal errors (the log says why)"
    await known_good(server, main, tmp_path, seed)
    await server.close_stdin()
    assert await server.wait(timeout=20) == 0, f"seed {seed}"
    stderr = await server.stderr_text()
    assert "Traceback" not in stderr, f"seed {seed}: a handler failed:\n{stderr[-3000:]}"


async def known_good(server: RawServer, main: str, cwd: Path, seed: int) -> None:
    """A plain prompt works in the fuzzed session and in a new one."""
    fresh = await server.request("session/new", {"cwd": str(cwd), "mcpServers": []})
    for session in (main, fresh["result"]["sessionId"]):
        params = {"sessionId": session, "prompt": [{"type": "text", "text": "hi"}]}
        answer = await server.request("session/prompt", params, timeout=60)
        assert answer.get("result", {}).get("stopReason") == "end_turn", (seed, answer)
    assert server.proc.returncode is None, f"seed {seed}: the server exited"
