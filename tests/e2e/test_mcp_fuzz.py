"""Seeded fuzz of `mcpServers`, the part of session/new, session/load, session/resume and
session/fork a hostile (or careless) client fills in, into one real server over real pipes.

Starting from valid stdio, http and sse entries, every field gets a value of every JSON type (a
sweep), then random combinations of: `env`/`headers` as lists and objects with values that are
not strings, `type` "acp" and types nobody knows, huge names and names with odd characters,
long argument lists, URLs that are not URLs, commands that do not exist (or are a directory, a
file that cannot run, a NUL in the middle), duplicate names, many servers, missing fields.

Checked: every request gets a result or a well-formed error, -32602 naming `mcpServers` when
the shape cannot be used (in words, not quoting a header's value); no internal error, no error
in the log; the server stays up; a session whose servers cannot start still completes its
turns, each server reported once; and no MCP process is left once the agent exits (/proc).
Reproduce with the seed it prints: `MCP_FUZZ_SEED=1234 pytest tests/e2e/test_mcp_fuzz.py`
(`MCP_FUZZ_CASES=2000` runs longer).
"""

from __future__ import annotations

import json
import os
import random
import socket
import sys
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from tests.e2e.test_load_fuzz import well_formed
from tests.e2e.test_mcp_e2e import marked, said
from tests.support.fake_editor import FakeEditor
from tests.support.progress import while_working
from tests.support.raw import Frame, RawServer, stop_reason
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
CASES = int(os.environ.get("MCP_FUZZ_CASES", "400"))
HANGING = 4  # cases with a server process that never answers (bounded by its start-up timeout)
ODD_NAMES = [
    "n" * 100_000,
    "x" * 65,
    "a/b c",
    "../../etc",
    "\u202eevil",
    "名前",
    "mcp__x__y",
    "-",
    "nul\x00in",
    "\U0001f600",
    "line\nbreak",
]
ODD_PAIRS: list[Any] = [
    {"A": 1},
    {"A": None},
    {"A": ["x"]},
    {"A": {"b": "c"}},
    {"": ""},
    [{"name": "A", "value": 2}],
    [{"name": 1, "value": "x"}],
    [{"name": "A"}],
    ["A=1"],
    [None],
    {"Authorization": "Bearer " + "t" * 10_000},
]
SECRET = "fuzz-secret-0123456789"  # in the template's headers: no answer may repeat it
ODD_TYPES: list[Any] = ["acp", "websocket", "HTTP", "", "stdio", "sse", "http", None, 0]
ODD_URLS = ["not a url", "ftp://x/y", "http://[::1", "file:///etc/passwd", "http://" + "a" * 9000]
ODD_COMMANDS = [
    "",
    "no-such-mcp-command",
    "/etc",
    "/etc/hostname",
    "/nonexistent/" + "x" * 5000,
    "/nonexistent/nul\x00byte",
    "\u00e9\u202e",
]


def closed_url() -> str:
    """An address nothing listens on (connection refused at once)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    return f"http://127.0.0.1:{port}/mcp"


def entries(url: str) -> list[dict[str, Any]]:
    """One valid entry of each kind; none can start (fast failures, no process left)."""
    return [
        {
            "name": "gone",
            "command": "/nonexistent/mcp-server",
            "args": ["--stdio"],
            "env": [{"name": "A", "value": "1"}],
        },
        {"type": "http", "name": "web", "url": url, "headers": [{"name": "X-A", "value": SECRET}]},
        {"type": "sse", "name": "feed", "url": url, "headers": {"X-Key": SECRET}},
    ]


class McpMutator:
    """The seeded cases: each method's params with a mutated `mcpServers`."""

    def __init__(self, seed: int, valid: dict[str, dict[str, Any]], marker: str) -> None:
        self.rng = random.Random(seed)
        self.valid = valid
        self.marker = marker
        self.count = 0
        self.ops: list[Callable[[list[Any]], list[Any]]] = [
            self.retype,
            self.drop,
            self.odd_name,
            self.odd_pairs,
            self.odd_type,
            self.odd_url,
            self.odd_command,
            self.long_args,
            self.duplicate,
            self.many,
        ]

    def cases(self, n: int) -> list[Case]:
        cases = list(self.sweep())
        while len(cases) < n - HANGING:
            method = self.rng.choice(list(self.valid))
            servers = self.valid[method]["mcpServers"]
            for _ in range(self.rng.choice([1, 1, 2, 3])):
                servers = self.rng.choice(self.ops)(servers)
            cases.append(self.case(method, servers))
        cases += [self.case("session/new", [self.hanging()]) for _ in range(HANGING)]
        self.rng.shuffle(cases)
        return cases

    def sweep(self) -> Iterator[Case]:
        """A value of every JSON type into every field of `mcpServers`, for every method."""
        for method, params in self.valid.items():
            for path in field_paths(params["mcpServers"]):
                for value in ONE_OF_EACH_TYPE:
                    yield self.case(method, replace(params["mcpServers"], path, value))

    def case(self, method: str, servers: Any) -> Case:
        self.count += 1
        req_id = f"mf-{self.count}"
        params = {**self.valid[method], "mcpServers": servers}
        return Case(json.dumps(frame(req_id, method, params)).encode(), [req_id])

    def hanging(self) -> dict[str, Any]:
        """A server process that never answers: ended by its start-up timeout, or at exit."""
        code = "import time; time.sleep(60)"
        return {"name": "mute", "command": sys.executable, "args": ["-c", code, self.marker]}

    # ----- mutations of the list of servers ------------------------------------------------

    def pick(self, servers: list[Any]) -> tuple[list[Any], int]:
        copy: list[Any] = json.loads(json.dumps(servers))
        return copy, self.rng.randrange(len(copy)) if copy else 0

    def set_field(self, servers: list[Any], key: str, value: Any) -> list[Any]:
        copy, i = self.pick(servers)
        if copy and isinstance(copy[i], dict):
            copy[i][key] = value
        return copy

    def retype(self, servers: list[Any]) -> list[Any]:
        paths: list[Path_] = list(field_paths(servers))
        return list(replace(servers, self.rng.choice(paths[1:]), self.rng.choice(ONE_OF_EACH_TYPE)))

    def drop(self, servers: list[Any]) -> list[Any]:
        paths: list[Path_] = [p for p in field_paths(servers) if len(p) == 2]
        return list(replace(servers, self.rng.choice(paths), DELETE)) if paths else servers

    def odd_name(self, servers: list[Any]) -> list[Any]:
        return self.set_field(servers, "name", self.rng.choice(ODD_NAMES))

    def odd_pairs(self, servers: list[Any]) -> list[Any]:
        key = self.rng.choice(["env", "headers"])
        return self.set_field(servers, key, self.rng.choice(ODD_PAIRS))

    def odd_type(self, servers: list[Any]) -> list[Any]:
        return self.set_field(servers, "type", self.rng.choice(ODD_TYPES))

    def odd_url(self, servers: list[Any]) -> list[Any]:
        return self.set_field(servers, "url", self.rng.choice(ODD_URLS))

    def odd_command(self, servers: list[Any]) -> list[Any]:
        return self.set_field(servers, "command", self.rng.choice(ODD_COMMANDS))

    def long_args(self, servers: list[Any]) -> list[Any]:
        args = ["a"] * 10_000 if self.rng.random() < 0.5 else ["b" * 200_000, "\x00", "é"]
        return self.set_field(servers, "args", args)

    def duplicate(self, servers: list[Any]) -> list[Any]:
        copy, i = self.pick(servers)
        return [*copy, copy[i]] if copy else copy

    def many(self, servers: list[Any]) -> list[Any]:
        return list(servers) * self.rng.choice([10, 30])


async def open_sessions(server: RawServer, cwd: Path) -> tuple[str, str]:
    await server.request("initialize", {"protocolVersion": 1, "clientCapabilities": {}})
    params = {"cwd": str(cwd), "mcpServers": []}
    main = (await server.request("session/new", params))["result"]["sessionId"]
    spare = (await server.request("session/new", params))["result"]["sessionId"]
    return str(main), str(spare)


def templates(cwd: str, main: str, spare: str, url: str) -> dict[str, dict[str, Any]]:
    servers = entries(url)
    return {
        "session/new": {"cwd": cwd, "mcpServers": servers},
        "session/load": {"sessionId": spare, "cwd": cwd, "mcpServers": servers},
        "session/resume": {"sessionId": spare, "cwd": cwd, "mcpServers": servers},
        "session/fork": {"sessionId": main, "cwd": cwd, "mcpServers": servers},
    }


async def test_mutated_mcp_servers_are_answered_and_never_hurt_the_agent(
    server_factory: Start, script: Any, tmp_path: Path, figures: Any, default_log_file: Path
) -> None:
    seed = int(os.environ.get("MCP_FUZZ_SEED") or random.randrange(2**32))
    figures("seed", f"MCP_FUZZ_SEED={seed}")
    marker = f"mcp-fuzz-{tmp_path.name}"
    env = {"ACP_SERVER_MCP_STARTUP_TIMEOUT": "1"}
    rounds = script([{"text": "Fine."}] * 2)
    server: RawServer = await server_factory("--script", str(rounds), env=env)
    main, spare = await open_sessions(server, tmp_path)
    url = closed_url()
    cases = McpMutator(seed, templates(str(tmp_path), main, spare, url), marker).cases(CASES)
    await send_all(server, cases)
    must = Counter(json.dumps(i) for c in cases for i in c.answer)
    await while_working(
        answered(server, set(must), timeout=None), [server.proc.pid], what="the mutated lists"
    )
    check_answers(server.seen, must, Counter(), seed)
    answers = [f for f in server.seen if "method" not in f]
    assert all(well_formed(f) for f in answers), [f for f in answers if not well_formed(f)][:3]
    codes = Counter(f["error"]["code"] if "error" in f else "ok" for f in answers)
    figures("answers by code", dict(codes))
    odd = [f["error"] for f in answers if "error" in f and not refused_clearly(f["error"])]
    assert odd == [], f"seed {seed}: {odd[:3]}"
    assert SECRET not in json.dumps(answers), f"seed {seed}: a header's value was repeated"
    await failing_servers_cost_only_their_tools(server, tmp_path, url, seed)
    await server.close_stdin()
    assert await server.wait(timeout=20) == 0, f"seed {seed}"
    log = default_log_file.read_text("utf-8") + await server.stderr_text()
    errors = [line for line in log.splitlines() if " ERROR " in line or "CRITICAL" in line]
    assert errors == [], f"seed {seed}: {errors[:5]}"
    assert marked(marker) == [], f"seed {seed}: MCP processes left after the agent exited"


def refused_clearly(error: dict[str, Any]) -> bool:
    """-32602 saying which of the servers (or the list) cannot be used, in words."""
    message = error["message"]
    return error["code"] == -32602 and "mcpServers" in message and "schemas" not in message


async def failing_servers_cost_only_their_tools(
    server: RawServer, cwd: Path, url: str, seed: int
) -> None:
    """A session whose servers all fail completes its turns; each failure is told once."""
    editor = FakeEditor(fs=False, terminal=False)
    editor.attach(server)
    params = {"cwd": str(cwd), "mcpServers": entries(url)}
    # The new session starts its failing servers: on a busy machine that outlasted a fixed 10 s.
    opened = server.request("session/new", params, timeout=None)
    answer = await while_working(opened, [server.proc.pid], what="a session with failing servers")
    session = answer["result"]["sessionId"]
    stop, frames = await prompt_while_working(server, session)
    text = said(frames)
    assert stop == "end_turn" and text.endswith("Fine."), (seed, text)
    for name in ("gone", "web", "feed"):
        assert text.count(f"{name!r}") == 1, (seed, name, text)
    stop, frames = await prompt_while_working(server, session)
    assert (stop, said(frames)) == ("end_turn", "Fine."), seed


async def prompt_while_working(server: RawServer, session: str) -> tuple[str, list[Frame]]:
    """A prompt's answer, waited for while the agent works: after hundreds of mutated server
    lists, its first turn waits on servers that fail to start, which a machine busy with other
    work made last over the 30 s a fixed limit gave it."""
    params = {"sessionId": session, "prompt": [{"type": "text", "text": "go"}]}
    req = await server.call("session/prompt", params)
    answer, before = await while_working(
        server.response(req, None), [server.proc.pid], what="a turn with failing MCP servers"
    )
    return stop_reason(answer["result"]), before
