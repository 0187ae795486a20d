"""Two hundred sessions opened, used and closed on one real `acp-server`: nothing stays behind.

Each session runs one scripted turn of one of six kinds, in turn: a text reply; a command, then
a reply; a file read, then a reply; and three closed mid-turn with `session/close` (the prompt
must answer `cancelled`): while a command sleeps (it must be stopped), while a permission
request waits (the editor then answers it cancelled), while the reply streams. Three runs:
commands in the editor's terminals (the fake editor really runs them); commands as the server's
own child processes (the editor has no terminal); and the same with the model a mock LLM over HTTP
instead of the scripted backend. After twenty sessions of warm-up the server's
resident memory, threads and open file descriptors are read from /proc; after two hundred more
they are read again. Checked: no process the server started still runs, every terminal it
created was released, threads and file descriptors are back where they were, and the resident
memory grew less than the bound below (each figure is reported).

The asyncio tasks are counted in process (the same methods, an in-process editor), where they
can be seen without a debug hook: after two hundred sessions the count is back to its start.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from acp_server.backends.scripted import ScriptedBackend
from acp_server.protocol.handlers import AcpAgent
from acp_server.settings import Settings
from tests.support.fake_editor import FakeEditor, InProcessPeer
from tests.support.load import ProcessUsage, alive, started_pids
from tests.support.mock_llm import MockLLM
from tests.support.raw import Frame, RawServer, stop_reason

Start = Callable[..., Any]
WARMUP = 20
SESSIONS = 200
# Resident memory may grow this much over 200 sessions. Measured on this machine: ~0.7 MiB over
# 200 sessions, ~2.6 MiB over 1,000 and ~2.8 MiB over 3,000: it levels off, as the store's two
# SQLite connections fill their page caches (2 MiB each by default) while the database grows.
# A closed session that stayed in memory (history, tools, transcript, tasks: well over 25 KiB)
# would pass 5 MiB within these 200.
RSS_GROWTH_KIB = 5 * 1024


KINDS = 6  # text; command; read; closed during a command, a permission request, a stream
MID_TURN = {3: "command", 4: "permission", 5: "stream"}
SLOW = " ".join(f"w{i}" for i in range(50))


def rounds(n: int, cwd: Path) -> list[dict[str, Any]]:
    """The model's rounds for session `n` (kind n % KINDS)."""
    kind = n % KINDS
    done = {"text": f"session {n} done."}
    if kind == 0:
        return [done]
    if kind in (1, 2):
        command = {"name": "run_command", "arguments": {"command": f"echo churn {n}"}}
        read = {"name": "read_file", "arguments": {"path": "notes.txt"}}
        return [{"tool_calls": [command if kind == 1 else read]}, done]
    if kind == 3:
        sleep = f"echo $$ > {cwd}/pid-{n} && exec sleep 30"
        return [{"tool_calls": [{"name": "run_command", "arguments": {"command": sleep}}]}]
    if kind == 4:
        write = {"name": "write_file", "arguments": {"path": f"f{n}.txt", "content": "x"}}
        return [{"tool_calls": [write]}]
    return [{"text": SLOW, "delay_ms": 20}]


def reached(kind: str, session: str, frame: Frame, cwd: Path, n: int) -> bool:
    """Whether the turn of a session to close mid-turn is where `kind` closes it."""
    if kind == "command":
        pid_file = cwd / f"pid-{n}"
        return pid_file.exists() and bool(pid_file.read_text().strip())
    if kind == "permission":
        return frame.get("method") == "session/request_permission"
    params = frame.get("params", {})
    chunk = params.get("update", {}).get("sessionUpdate") == "agent_message_chunk"
    return bool(chunk and params.get("sessionId") == session)


async def one_session(server: RawServer, n: int, cwd: Path) -> None:
    """session/new, a prompt, session/close (during the turn for half the kinds)."""
    new = await server.request("session/new", {"cwd": str(cwd), "mcpServers": []})
    session = new["result"]["sessionId"]
    prompt = {"sessionId": session, "prompt": [{"type": "text", "text": f"churn {n}"}]}
    kind = MID_TURN.get(n % KINDS)
    if kind is None:
        answer = await server.request("session/prompt", prompt, timeout=20)
        assert answer["result"]["stopReason"] == "end_turn", (n, answer)
        closed = await server.request("session/close", {"sessionId": session})
        assert closed.get("result") == {}, (n, closed)
        return
    closing = asyncio.Event()
    allow = server.handlers["session/request_permission"]

    async def hold(params: Any) -> Any:  # until the close: then cancelled, as ACP asks
        await closing.wait()
        return {"outcome": {"outcome": "cancelled"}}

    if kind == "permission":
        server.handlers["session/request_permission"] = hold
    req = await server.call("session/prompt", prompt)
    if kind == "command":
        async with asyncio.timeout(20):
            while not reached(kind, session, {}, cwd, n):
                await asyncio.sleep(0.005)
    else:
        await server.until(lambda f: reached(kind, session, f, cwd, n), timeout=20)
    close = await server.call("session/close", {"sessionId": session})
    closing.set()
    got = await answers(server, {req, close})
    server.handlers["session/request_permission"] = allow
    assert stop_reason(got[req].get("result")) == "cancelled", (n, kind, got)
    assert got[close].get("result") == {}, (n, kind, got)


async def answers(server: RawServer, ids: set[Any]) -> dict[Any, Frame]:
    got: dict[Any, Frame] = {}
    while set(got) != ids:
        frame = await server.next_frame(timeout=20)
        if "method" not in frame and frame.get("id") in ids:
            got[frame["id"]] = frame
    return got


async def settled(pid: int, baseline: ProcessUsage) -> ProcessUsage:
    """The usage once threads, descriptors and processes are back to the baseline (or after two
    seconds, whatever it is then)."""
    deadline = time.monotonic() + 2
    while True:
        usage = ProcessUsage.of(pid)
        back = (usage.threads, usage.fds) <= (baseline.threads, baseline.fds)
        if (back and not usage.descendants) or time.monotonic() > deadline:
            return usage
        await asyncio.sleep(0.05)


async def start(
    kind: str, server_factory: Start, script: Any, mock: MockLLM, cwd: Path
) -> tuple[RawServer, FakeEditor]:
    """The server (its model: the script, or the mock LLM playing the same rounds over HTTP)
    and an editor with terminals or without."""
    played = [r for n in range(WARMUP + SESSIONS) for r in rounds(n, cwd)]
    if kind == "http-model":
        mock.queue(*played)
        env = {"OPENAI_BASE_URL": f"{mock.url}/v1", "OPENAI_API_KEY": "sk-mock"}
        args = ["--model", "openai:mock-model"]
        server = await server_factory(*args, env={**env, "ACP_SERVER_DISCOVER": "0"})
    else:
        server = await server_factory("--script", str(script(played)))
    editor = FakeEditor(terminal=kind == "editor-terminals")
    editor.attach(server)
    caps = editor.capabilities()
    await server.request("initialize", {"protocolVersion": 1, "clientCapabilities": caps})
    return server, editor


@pytest.mark.parametrize("kind", ["editor-terminals", "local-commands", "http-model"])
async def test_two_hundred_sessions_opened_and_closed_leave_nothing_behind(
    server_factory: Start,
    script: Any,
    mock_llm: MockLLM,
    tmp_path: Path,
    figures: Any,
    kind: str,
) -> None:
    """`http-model`: the model is the mock LLM over HTTP (and commands run locally)."""
    (tmp_path / "notes.txt").write_text("notes\n", encoding="utf-8")
    server, editor = await start(kind, server_factory, script, mock_llm, tmp_path)
    pid = server.proc.pid
    for n in range(WARMUP):
        await one_session(server, n, tmp_path)
    before = await settled(pid, ProcessUsage.of(pid))
    started = time.perf_counter()
    for n in range(WARMUP, WARMUP + SESSIONS):
        await one_session(server, n, tmp_path)
    elapsed = time.perf_counter() - started
    after = await settled(pid, before)
    figures("200 sessions", f"{elapsed:.1f} s")
    figures("before", before.describe())
    figures("after", after.describe())
    growth = after.rss_kib - before.rss_kib
    figures("RSS growth", f"{growth} KiB over {SESSIONS} sessions (bound {RSS_GROWTH_KIB} KiB)")
    assert after.descendants == (), f"processes left running: {after.descendants}"
    assert [pid for pid in started_pids(tmp_path) if alive(pid)] == []
    assert editor.unreleased() == [] and editor.running() == []
    assert (after.threads, after.fds) == (before.threads, before.fds)
    assert growth < RSS_GROWTH_KIB
    await editor.close()


class InProcess:
    """The same sessions in process: an `AcpAgent` whose editor is the in-process peer."""

    def __init__(self, cwd: Path) -> None:
        script = [r for n in range(WARMUP + SESSIONS) for r in rounds(n, cwd)]
        backend = ScriptedBackend.from_rounds(script)
        # Commands as before the sandbox: they write their pid (`$$`) for the test to look
        # for, and inside the sandbox's own PID namespace that is not the pid seen from here.
        self.agent = AcpAgent(lambda: backend, Settings(sandbox="off"))
        self.peer = InProcessPeer(FakeEditor(terminal=False))
        self.agent.conn = self.peer
        self.handlers = self.agent.request_handlers()
        self.allow = self.peer.handlers["session/request_permission"]
        self.asked: set[str] = set()
        self.cwd = cwd

    def reached(self, kind: str, session: str, n: int) -> bool:
        if kind == "stream":
            updates = self.peer.updates(session)
            return any(u["sessionUpdate"] == "agent_message_chunk" for u in updates)
        return session in self.asked or reached(kind, session, {}, self.cwd, n)

    async def one(self, n: int) -> None:
        created = await self.handlers["session/new"]({"cwd": str(self.cwd), "mcpServers": []})
        session = created["sessionId"]
        prompt = {"sessionId": session, "prompt": [{"type": "text", "text": f"churn {n}"}]}
        kind = MID_TURN.get(n % KINDS)
        closing = asyncio.Event()

        async def hold(params: Any) -> Any:
            self.asked.add(params["sessionId"])
            await closing.wait()
            return {"outcome": {"outcome": "cancelled"}}

        async def ask() -> Any:
            return await self.handlers["session/prompt"](prompt)

        permission = hold if kind == "permission" else self.allow
        self.peer.handlers["session/request_permission"] = permission
        turn = asyncio.create_task(ask())
        async with asyncio.timeout(20):
            while kind is not None and not self.reached(kind, session, n):
                await asyncio.sleep(0.005)
            if kind is None:
                await turn
        await self.handlers["session/close"]({"sessionId": session})
        closing.set()
        assert (await turn)["stopReason"] == ("cancelled" if kind else "end_turn"), (n, kind)


async def test_two_hundred_sessions_in_process_leave_no_task(tmp_path: Path) -> None:
    """session/new, a prompt, session/close, each kind of turn: the task count comes back."""
    (tmp_path / "notes.txt").write_text("notes\n", encoding="utf-8")
    editor = InProcess(tmp_path)
    caps = {"fs": {"readTextFile": True, "writeTextFile": True}, "terminal": False}
    await editor.handlers["initialize"]({"protocolVersion": 1, "clientCapabilities": caps})
    for n in range(WARMUP):
        await editor.one(n)
    await asyncio.sleep(0.05)
    start = len(asyncio.all_tasks())
    for n in range(WARMUP, WARMUP + SESSIONS):
        await editor.one(n)
    deadline = time.monotonic() + 2
    while len(asyncio.all_tasks()) > start and time.monotonic() < deadline:
        await asyncio.sleep(0.01)
    names = sorted(t.get_coro().__qualname__ for t in asyncio.all_tasks())  # type: ignore[union-attr]
    assert len(names) <= start, f"{len(names) - start} tasks more than before: {names}"
    assert [pid for pid in started_pids(tmp_path) if alive(pid)] == []
