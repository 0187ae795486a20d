"""What the benchmarks share: the mock LLM on a thread of its own, the editor side of the
wire, and the machine-readable line `run_all.py` collects.

Each benchmark prints its human report and, for every figure it checks, one line
`BENCH {"metric": ..., "value": ..., "unit": ..., "target": ..., "ok": ..., "floor": ...}`
(`floor` only where the benchmark measured one in the same run).
"""

from __future__ import annotations

import asyncio
import json
import sys
import threading
import time
from collections.abc import Coroutine
from concurrent.futures import Future
from pathlib import Path
from typing import Any, TypeVar

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
# The mock LLM is test support code: the repository root must be importable.
from tests.support.mock_llm import MockLLM

T = TypeVar("T")
BENCH_PREFIX = "BENCH "


def emit(
    metric: str,
    value: float,
    unit: str,
    target: str,
    ok: bool,
    floor: float | None = None,
) -> None:
    """One figure for `run_all.py`: a line of JSON after `BENCH `."""
    record: dict[str, Any] = {
        "metric": metric,
        "value": round(value, 3),
        "unit": unit,
        "target": target,
        "ok": ok,
    }
    if floor is not None:
        record["floor"] = round(floor, 3)
    print(BENCH_PREFIX + json.dumps(record), flush=True)


def server_command() -> list[str]:
    """The installed `acp-server` console script beside this interpreter."""
    script = Path(sys.executable).parent / "acp-server"
    if not script.exists():
        sys.exit(f"{script} not found: install the project first (pip install -e .)")
    return [str(script)]


def peak_rss_mb(pid: int) -> float:
    """The process's peak resident set size (VmHWM), in MB (Linux)."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    raise RuntimeError("no VmHWM in /proc/<pid>/status")


class MockThread:
    """A MockLLM serving from its own thread and event loop."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.thread.start()
        self.mock = MockLLM()
        self.run(self.mock.start())

    def run(self, coro: Coroutine[Any, Any, T]) -> T:
        future: Future[T] = asyncio.run_coroutine_threadsafe(coro, self.loop)
        return future.result()

    def queue(self, *responses: dict[str, Any]) -> None:
        self.loop.call_soon_threadsafe(self.mock.queue, *responses)

    def close(self) -> None:
        self.run(self.mock.close())
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join()


def words(n: int) -> str:
    return " ".join(f"w{i}" for i in range(n))


class Editor:
    """The ACP client side: sends frames, collects the server's lines."""

    def __init__(self, proc: asyncio.subprocess.Process) -> None:
        self.proc = proc
        self.next_id = 0

    async def send(self, method: str, params: dict[str, Any]) -> int:
        assert self.proc.stdin is not None
        self.next_id += 1
        frame = {"jsonrpc": "2.0", "id": self.next_id, "method": method, "params": params}
        self.proc.stdin.write(json.dumps(frame).encode() + b"\n")
        await self.proc.stdin.drain()
        return self.next_id

    async def until_answer(
        self, req_id: int, arrivals: list[float] | None = None
    ) -> tuple[dict[str, Any], list[bytes]]:
        """Lines up to the answer to `req_id` (raw, parsed afterwards: the clock is running);
        `arrivals` gets the time.monotonic() at which each line was read."""
        assert self.proc.stdout is not None
        marker = f'"id":{req_id},'.encode()
        lines: list[bytes] = []
        while True:
            line = await self.proc.stdout.readline()
            if not line:
                raise RuntimeError("the server exited")
            if arrivals is not None:
                arrivals.append(time.monotonic())
            if marker in line and b'"method"' not in line:
                return json.loads(line), lines
            lines.append(line)

    async def request(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        answer, _ = await self.until_answer(await self.send(method, params))
        return answer

    async def close(self) -> None:
        if self.proc.stdin is not None:
            self.proc.stdin.close()
        try:
            await asyncio.wait_for(self.proc.wait(), 5)
        except TimeoutError:
            self.proc.kill()
            await self.proc.wait()


def message_chunks(lines: list[bytes]) -> list[str]:
    out = []
    for line in lines:
        frame = json.loads(line)
        update = frame.get("params", {}).get("update", {})
        if update.get("sessionUpdate") == "agent_message_chunk":
            out.append(update["content"]["text"])
    return out
