"""Drive the real `acp-server` console script over real pipes, one JSON line at a time."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import sys
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from tests.support.unprivileged import User

Frame = dict[str, Any]


def console_script() -> str:
    """The installed `acp-server` script next to the interpreter running the tests."""
    script = Path(sys.executable).parent / "acp-server"
    if not script.exists():
        raise RuntimeError(f"{script} is missing: install the project first (pip install -e .)")
    return str(script)


class ErrorReply(Exception):
    """Raised by a test's handler to answer the agent's request with exactly this error."""

    def __init__(self, code: int, message: str, data: Any = None) -> None:
        super().__init__(message)
        self.error: Frame = {"code": code, "message": message}
        if data is not None:
            self.error["data"] = data


class Observer(Protocol):
    def observe(self, side: str, line: str) -> None: ...


ANNOUNCED = ("session/new", "session/load", "session/resume")


def is_commands_update(frame: Frame) -> bool:
    update = frame.get("params", {}).get("update", {}) if frame.get("method") else {}
    return isinstance(update, dict) and update.get("sessionUpdate") == "available_commands_update"


class RawServer:
    """One server process; every line both ways is reported to the observer."""

    def __init__(self, proc: asyncio.subprocess.Process, observer: Observer) -> None:
        self.proc = proc
        self.observer = observer
        self.frames: asyncio.Queue[Frame] = asyncio.Queue()
        self.seen: list[Frame] = []
        self._next_id = 0
        # Agent -> client requests are answered by these handlers (method -> async fn(params)).
        self.handlers: dict[str, Callable[[Any], Awaitable[Any]]] = {}
        self._answering: set[asyncio.Task[None]] = set()
        self._reader = asyncio.create_task(self._read())

    @classmethod
    async def start(
        cls,
        observer: Observer,
        *args: str,
        env: dict[str, str] | None = None,
        cwd: str | None = None,
        as_user: User | None = None,
    ) -> RawServer:
        """The console script, or with `as_user` the package run by that ordinary user (whose
        environment is `env` as given: see `User.env`)."""
        argv = [console_script(), *args] if as_user is None else as_user.argv(*args)
        who: dict[str, Any] = {}
        if as_user is not None:
            who = {"user": as_user.uid, "group": as_user.gid, "extra_groups": []}
        proc = await asyncio.create_subprocess_exec(
            *argv,
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            env=dict(env or {}) if as_user is not None else {**os.environ, **(env or {})},
            cwd=cwd,
            limit=128 * 1024 * 1024,
            **who,
        )
        return cls(proc, observer)

    async def _read(self) -> None:
        assert self.proc.stdout is not None
        while line := await self.proc.stdout.readline():
            text = line.decode("utf-8").rstrip("\n")
            self.observer.observe("agent", text)
            frame = json.loads(text)
            self.seen.append(frame)
            await self.frames.put(frame)
            if "method" in frame and "id" in frame and frame["method"] in self.handlers:
                task = asyncio.create_task(self._answer(frame))
                self._answering.add(task)
                task.add_done_callback(self._answering.discard)

    async def _answer(self, frame: Frame) -> None:
        try:
            result = await self.handlers[frame["method"]](frame.get("params"))
            reply: Frame = {"jsonrpc": "2.0", "id": frame["id"], "result": result}
        except ErrorReply as exc:
            reply = {"jsonrpc": "2.0", "id": frame["id"], "error": exc.error}
        except Exception as exc:  # the test client answers with an error, like an editor would
            reply = {
                "jsonrpc": "2.0",
                "id": frame["id"],
                "error": {"code": -32603, "message": str(exc)},
            }
        stdin = self.proc.stdin
        if self.proc.returncode is None and stdin is not None and not stdin.is_closing():
            await self.send(reply)

    async def send_raw(self, data: bytes) -> None:
        assert self.proc.stdin is not None
        for line in data.split(b"\n"):
            if line:
                self.observer.observe("client", line.decode("utf-8", "replace"))
        self.proc.stdin.write(data)
        await self.proc.stdin.drain()

    async def send(self, frame: Frame) -> None:
        await self.send_raw(json.dumps(frame).encode() + b"\n")

    def next_id(self) -> int:
        self._next_id += 1
        return self._next_id

    async def call(self, method: str, params: Any = None, *, req_id: Any = None) -> Any:
        """Send a request without waiting; returns its id."""
        req_id = self.next_id() if req_id is None else req_id
        frame: Frame = {"jsonrpc": "2.0", "id": req_id, "method": method}
        if params is not None:
            frame["params"] = params
        await self.send(frame)
        return req_id

    async def notify(self, method: str, params: Any) -> None:
        await self.send({"jsonrpc": "2.0", "method": method, "params": params})

    async def next_frame(self, timeout: float = 10) -> Frame:
        return await asyncio.wait_for(self.frames.get(), timeout)

    async def until(
        self, match: Callable[[Frame], bool], timeout: float | None = 10
    ) -> list[Frame]:
        """Frames up to and including the first one that matches (`timeout` None: no limit of
        its own, for a caller that bounds the wait otherwise, see tests/support/progress.py)."""
        got: list[Frame] = []
        async with asyncio.timeout(timeout):
            while True:
                frame = await self.frames.get()
                got.append(frame)
                if match(frame):
                    return got

    async def response(self, req_id: Any, timeout: float | None = 10) -> tuple[Frame, list[Frame]]:
        """The answer to `req_id` and the frames that came before it."""
        frames = await self.until(lambda f: "method" not in f and f.get("id") == req_id, timeout)
        return frames[-1], frames[:-1]

    async def request(self, method: str, params: Any = None, timeout: float | None = 10) -> Frame:
        """Send a request and wait for its answer. A session the answer opens is announced
        its slash commands right after (`available_commands_update`): that is waited for too,
        so it does not show up among the frames of the next request."""
        req_id = await self.call(method, params)
        answer, _ = await self.response(req_id, timeout)
        if method in ANNOUNCED and "result" in answer:
            await self.until(is_commands_update, timeout)
        return answer

    async def handshake(self, cwd: str) -> str:
        """initialize + session/new; returns the session id."""
        await self.request("initialize", {"protocolVersion": 1, "clientCapabilities": {}})
        answer = await self.request("session/new", {"cwd": cwd, "mcpServers": []})
        return str(answer["result"]["sessionId"])

    async def close_stdin(self) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.close()

    async def stderr_text(self, timeout: float = 30) -> str:
        """All of stderr, once the process has closed it (within `timeout` seconds)."""
        assert self.proc.stderr is not None
        return (await asyncio.wait_for(self.proc.stderr.read(), timeout)).decode("utf-8", "replace")

    def terminate(self) -> None:
        self.proc.send_signal(signal.SIGTERM)

    async def wait(self, timeout: float = 5) -> int:
        code = await asyncio.wait_for(self.proc.wait(), timeout)
        await asyncio.wait_for(self._reader, timeout)
        return code

    async def stop(self) -> None:
        if self.proc.returncode is None:
            self.proc.kill()
            await self.proc.wait()
        self._reader.cancel()


def stop_reason(result: Any) -> str:
    """A prompt result's stop reason, after checking it is a turn that neither failed nor went
    unsaved (the result also carries the turn's usage and the session's totals)."""
    assert isinstance(result, dict) and "stopReason" in result, result
    meta = result.get("_meta", {}).get("acpServer", {})
    assert "turnFailed" not in meta and "notSaved" not in meta, result
    return str(result["stopReason"])
