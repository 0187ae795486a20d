"""Cancellation as a transaction, property-style: 300 scripted turns (seeded, reproducible),
each cancelled at a chosen moment — while the model streams, while a permission request is
pending, while a client terminal or a local command runs, between tool calls, or with a second
prompt queued — and then checked:

- the prompt is answered `cancelled` exactly once, and no update of that turn follows it;
- every `tool_call` got a final status; no terminal is left unreleased, no process running;
- every tool call in history has exactly one result (the scripted backend rejects the next
  request like a strict endpoint would if not), and the next prompt ends `end_turn`.

The script is a sequence of episodes (some tool rounds, then one text round "episode N done").
A cancelled turn may stop anywhere inside an episode; the recovery prompt then plays the rest
of it. The texts seen tell which episode comes next, so each scenario knows what it will meet.
"""

from __future__ import annotations

import asyncio
import os
import random
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from tests.support.fake_editor import FakeEditor
from tests.support.raw import Frame, RawServer

SEED = 20261129
STREAM_WORDS = " ".join(f"w{i}" for i in range(40))


def episode(kind: str, n: int, workdir: Path) -> list[dict[str, Any]]:
    done = {"text": f"episode {n} done."}
    slow = f"echo $$ > {workdir}/pid_{n} && sleep 5"
    if kind == "stream":
        return [{"thought": "thinking a bit", "text": STREAM_WORDS, "delay_ms": 4}, done]
    if kind == "permission":
        return [
            {
                "tool_calls": [
                    {"name": "write_file", "arguments": {"path": f"f{n}.txt", "content": "x"}}
                ]
            },
            done,
        ]
    if kind == "command":
        return [{"tool_calls": [{"name": "run_command", "arguments": {"command": slow}}]}, done]
    if kind == "between":
        calls = [
            {"name": "read_file", "arguments": {"path": "seed.txt"}},
            {"name": "run_command", "arguments": {"command": slow}},
            {
                "name": "update_plan",
                "arguments": {"entries": [{"content": "a", "status": "pending"}]},
            },
        ]
        return [{"tool_calls": calls}, done]
    assert kind == "queued"
    return [{"text": STREAM_WORDS, "delay_ms": 4}, done]


KINDS = ("stream", "permission", "command", "between", "queued")


class Scenario:
    """One server, one session, many cancelled turns."""

    def __init__(self, server: RawServer, editor: FakeEditor, session: str, workdir: Path):
        self.server = server
        self.editor = editor
        self.session = session
        self.workdir = workdir
        self.hold: asyncio.Event | None = None

    async def prompt(self, text: str) -> int:
        return int(
            await self.server.call(
                "session/prompt",
                {"sessionId": self.session, "prompt": [{"type": "text", "text": text}]},
            )
        )

    async def cancel(self) -> None:
        await self.server.notify("session/cancel", {"sessionId": self.session})
        if self.hold is not None:
            self.hold.set()  # like a client: pending permission requests are answered cancelled


def is_update(frame: Frame) -> bool:
    return frame.get("method") == "session/update"


def trigger_for(kind: str, rng: random.Random) -> tuple[str, Any]:
    if kind in ("stream", "queued"):
        return ("chunks", rng.randint(1, 12))
    if kind == "permission":
        return ("permission", None)
    return ("running", rng.random() * 0.05)


async def run_one(s: Scenario, kind: str, n: int, rng: random.Random) -> str:
    """Cancel one turn at the moment `kind` calls for; return the state it was cancelled in."""
    trigger, arg = trigger_for(kind, rng)
    if s.hold is not None:
        s.hold.clear()
    first = await s.prompt(f"scenario {n}")
    second = await s.prompt(f"queued {n}") if kind == "queued" else None
    seen: list[Frame] = []
    commands: set[str] = set()
    chunks = 0
    state = "finished-first"
    while True:
        frame = await s.server.next_frame(timeout=20)
        seen.append(frame)
        if frame.get("id") == first and "method" not in frame:
            break
        update = frame.get("params", {}).get("update", {}) if is_update(frame) else {}
        if update.get("sessionUpdate") == "agent_message_chunk":
            chunks += 1
        hit = (
            (trigger == "chunks" and chunks >= arg)
            or (trigger == "permission" and frame.get("method") == "session/request_permission")
            or (trigger == "running" and _command_running(update, commands, s))
        )
        if hit:
            if trigger == "running" and arg:
                await asyncio.sleep(arg)
            await s.cancel()
            state = {"chunks": "streaming", "permission": "permission-pending"}.get(trigger, "")
            state = state or ("terminal" if s.editor.terminal else "local-command")
            state = "queued+" + state if second is not None else state
            trigger = "done"
    answer = seen[-1]
    assert answer.get("result", {}).get("stopReason") in ("cancelled", "end_turn"), answer
    if state != "finished-first":
        assert answer["result"]["stopReason"] == "cancelled", (kind, n, state, _trace(seen))
    if second is not None:
        answer2, before2 = await s.server.response(second, timeout=20)
        assert answer2["result"]["stopReason"] == "cancelled"
        assert not any(is_update(f) for f in before2), "a cancelled queued prompt ran"
    await _check_clean_after(s, seen, n)
    return state


def _trace(frames: list[Frame]) -> list[str]:
    """A compact account of a turn's frames, for failure messages."""
    out = []
    for f in frames:
        update = f.get("params", {}).get("update", {})
        out.append(
            f.get("method", "answer")
            + (f":{update.get('sessionUpdate')}:{update.get('status', '')}" if update else "")
            + (f":{f.get('result')}" if "result" in f else "")
        )
    return out


def _command_running(update: dict[str, Any], commands: set[str], s: Scenario) -> bool:
    """A run_command call has started: its live terminal is shown, or it went in_progress."""
    if update.get("sessionUpdate") == "tool_call" and update.get("name") == "run_command":
        commands.add(update["toolCallId"])
    if update.get("toolCallId") not in commands:
        return False
    if s.editor.terminal:
        return any(c.get("type") == "terminal" for c in update.get("content") or [])
    return update.get("status") == "in_progress"


async def _check_clean_after(s: Scenario, seen: list[Frame], n: int) -> None:
    await asyncio.sleep(0.02)
    assert s.server.frames.empty(), f"scenario {n}: frames after the answer: {s.server.frames}"
    started = {
        f["params"]["update"]["toolCallId"]
        for f in seen
        if is_update(f) and f["params"]["update"]["sessionUpdate"] == "tool_call"
    }
    finished = {
        f["params"]["update"]["toolCallId"]
        for f in seen
        if is_update(f)
        and f["params"]["update"]["sessionUpdate"] == "tool_call_update"
        and f["params"]["update"].get("status") in ("completed", "failed")
    }
    assert started <= finished, f"scenario {n}: tool calls without a final status"
    assert s.editor.unreleased() == [], f"scenario {n}: terminals not released"
    assert s.editor.running() == [], f"scenario {n}: editor terminals still running"
    for pid_file in s.workdir.glob("pid_*"):
        pid = int(pid_file.read_text().strip() or 0)
        assert not _alive(pid), f"scenario {n}: process {pid} is still running"
        pid_file.unlink()


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False
    except OSError:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return False
        return True


async def recover(s: Scenario, n: int) -> int:
    """The next prompt must work; returns the last episode number it finished."""
    req = await s.prompt(f"recover {n}")
    answer, before = await s.server.response(req, timeout=30)
    text = "".join(
        f["params"]["update"]["content"]["text"]
        for f in before
        if is_update(f) and f["params"]["update"]["sessionUpdate"] == "agent_message_chunk"
    )
    assert answer["result"]["stopReason"] == "end_turn", (n, answer, text)
    assert "malformed" not in text, f"scenario {n}: history broke: {text}"
    assert s.editor.unreleased() == [] and s.editor.running() == []
    finished = [int(w) for w in text.replace(".", " ").split() if w.isdigit()]
    assert finished, f"scenario {n}: recovery did not finish an episode: {text!r}"
    return finished[-1]


@pytest.mark.parametrize("editor_kind", ["editor-terminal", "local"])
async def test_cancel_anywhere_leaves_a_clean_session(
    server_factory: Any, script: Any, tmp_path: Path, editor_kind: str
) -> None:
    rng = random.Random(f"{SEED}-{editor_kind}")
    turns = 150
    workdir = tmp_path / "work"
    workdir.mkdir()
    (workdir / "seed.txt").write_text("seed\n", encoding="utf-8")
    kinds = [KINDS[i % len(KINDS)] for i in range(turns * 3)]
    rng.shuffle(kinds)
    rounds = [r for n, kind in enumerate(kinds) for r in episode(kind, n, workdir)]
    through_editor = editor_kind == "editor-terminal"
    hold = asyncio.Event()

    async def wait_then_cancel(params: dict[str, Any]) -> dict[str, Any]:
        await hold.wait()
        hold.clear()
        return {"outcome": {"outcome": "cancelled"}}

    editor = FakeEditor(fs=through_editor, terminal=through_editor)
    server = await server_factory(
        "--script", str(script(rounds)), env={"ACP_SERVER_DATA_DIR": str(tmp_path / "data")}
    )
    editor.attach(server)
    server.handlers["session/request_permission"] = wait_then_cancel
    await server.request(
        "initialize", {"protocolVersion": 1, "clientCapabilities": editor.capabilities()}
    )
    answer = await server.request("session/new", {"cwd": str(workdir), "mcpServers": []})
    session = answer["result"]["sessionId"]
    s = Scenario(server, editor, session, workdir)
    s.hold = hold
    states: Counter[str] = Counter()
    next_episode = 0
    for n in range(turns):
        kind = kinds[next_episode]
        # Everything but write_file runs without asking; write_file asks (and is held).
        mode = "ask" if kind == "permission" else "bypass"
        await server.request("session/set_mode", {"sessionId": session, "modeId": mode})
        while not server.frames.empty():
            server.frames.get_nowait()  # the mode change's own updates
        states[await run_one(s, kind, n, rng)] += 1
        next_episode = await recover(s, n) + 1
    await editor.close()
    expected = {"streaming", "permission-pending", "queued+streaming"}
    expected.add("terminal" if through_editor else "local-command")
    missing = {state for state in expected if states[state] < 10}
    assert not missing, f"states hit too rarely: {dict(states)}"
