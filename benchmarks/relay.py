"""Streaming relay: model deltas in, `agent_message_chunk`s out, through a real server process.

Run: python benchmarks/relay.py [--runs N] [--sizes 2000,20000]

The mock LLM (tests/support/mock_llm/) runs in this process, on its own thread and event loop,
and streams one OpenAI-compatible reply of N one-word deltas. A real `acp-server --model
openai:mock-model` subprocess (OPENAI_BASE_URL pointing at the mock) relays it to us over stdio;
we time session/prompt sent -> stopReason received. In the same run, a bare httpx streaming read
of the same reply (SSE lines, no parsing), in a process of its own like the server, gives the
floor the relay is compared with. The server's CPU time comes from /proc/<pid>/stat (utime +
stime) before and after each prompt.

Every delta must reach the editor: the text of the chunks received must equal the scripted text.
The chunk count is printed next to the delta count (deltas that arrive together may be relayed
as one chunk; text is never held back: the promptness check below streams deltas 20 ms apart and
requires each one on the editor's side well before the next one is sent).

Targets (2,000 deltas): prompt -> stopReason <= 150 ms; relay rate >= 0.5 x the bare read's rate;
server CPU <= 25 us per delta.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

import httpx
from common import Editor, MockThread, emit, message_chunks, server_command, words

from tests.support.mock_llm import MockLLM
from tests.support.mock_llm.http_io import ResponseWriter

TARGET_MS = 150.0
TARGET_RATIO = 0.5
TARGET_CPU_US = 25.0
CLOCK_TICK = os.sysconf("SC_CLK_TCK")


def cpu_seconds(pid: int) -> float:
    """utime + stime of a process, in seconds (Linux)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / CLOCK_TICK


async def relay_once(
    editor: Editor, mock: MockThread, cwd: str, n: int
) -> tuple[float, float, int]:
    """(seconds prompt -> stopReason, server CPU seconds, chunks received) for n deltas, in a
    fresh session: replies of 20,000 words would otherwise fill the window, and the
    compaction that follows is not what this measures."""
    new = await editor.request("session/new", {"cwd": cwd, "mcpServers": []})
    session = new["result"]["sessionId"]
    text = words(n)
    mock.queue({"text": text, "usage": {"prompt_tokens": 100, "completion_tokens": n}})
    cpu_before = cpu_seconds(editor.proc.pid)
    start = time.perf_counter()
    req = await editor.send(
        "session/prompt", {"sessionId": session, "prompt": [{"type": "text", "text": "go"}]}
    )
    answer, lines = await editor.until_answer(req)
    elapsed = time.perf_counter() - start
    cpu = cpu_seconds(editor.proc.pid) - cpu_before
    assert answer["result"]["stopReason"] == "end_turn", answer
    got = message_chunks(lines)
    if "".join(got) != text:
        raise AssertionError(f"the relayed text differs from the model's ({len(got)} chunks)")
    return elapsed, cpu, len(got)


async def bare_read(client: httpx.AsyncClient, url: str, n: int) -> float:
    """Seconds for a bare httpx streaming read of a reply of n deltas, SSE line by line."""
    body = {
        "model": "mock-model",
        "messages": [{"role": "user", "content": "go"}],
        "stream": True,
        "stream_options": {"include_usage": True},
    }
    frames = 0
    start = time.perf_counter()
    async with client.stream("POST", f"{url}/v1/chat/completions", json=body) as reply:
        async for line in reply.aiter_lines():
            if line.startswith("data: "):
                frames += 1
                if line == "data: [DONE]":
                    break
    elapsed = time.perf_counter() - start
    assert frames >= n, frames
    return elapsed


async def bare_reader(url: str) -> None:
    """`--bare-reader URL`: read a size per stdin line, answer the seconds its read took.

    A process of its own, like the server: a reader sharing this process (and its GIL) with
    the mock's thread would measure their contention, not httpx.
    """
    loop = asyncio.get_running_loop()
    async with httpx.AsyncClient(timeout=60) as client:
        while line := await loop.run_in_executor(None, sys.stdin.readline):
            print(await bare_read(client, url, int(line)), flush=True)


class BareReader:
    """The parent's handle on a `--bare-reader` process."""

    def __init__(self, proc: asyncio.subprocess.Process, mock: MockThread) -> None:
        self.proc = proc
        self.mock = mock

    @classmethod
    async def start(cls, mock: MockThread) -> BareReader:
        proc = await asyncio.create_subprocess_exec(
            sys.executable,
            __file__,
            "--bare-reader",
            mock.mock.url,
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
        )
        return cls(proc, mock)

    async def read(self, n: int) -> float:
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.mock.queue({"text": words(n)})
        self.proc.stdin.write(f"{n}\n".encode())
        await self.proc.stdin.drain()
        return float(await self.proc.stdout.readline())

    async def close(self) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.close()
        await self.proc.wait()


class StampedOut(ResponseWriter):
    """The mock's response writer, noting when each frame left (while `sent` is a list)."""

    sent: list[tuple[float, bytes]] | None = None

    async def send(self, data: bytes) -> None:
        await super().send(data)
        if StampedOut.sent is not None:
            StampedOut.sent.append((time.monotonic(), data))


MockLLM.response_writer = StampedOut  # benchmark-only instrumentation


async def promptness(editor: Editor, mock: MockThread, session: str) -> tuple[float, float, int]:
    """Deltas sent 20 ms apart: (median, worst) seconds from a delta leaving the model server
    to its text reaching the editor, and how many chunks carried the deltas."""
    n, gap = 25, 0.020
    mock.queue({"text": words(n), "delay_ms": gap * 1000})
    StampedOut.sent = []
    arrivals: list[float] = []
    req = await editor.send(
        "session/prompt", {"sessionId": session, "prompt": [{"type": "text", "text": "go"}]}
    )
    _, lines = await editor.until_answer(req, arrivals)
    sent, StampedOut.sent = StampedOut.sent, None
    left: dict[str, float] = {}  # word -> when its frame left the mock
    for at, data in sent:
        if data.startswith(b"data: {"):
            for choice in json.loads(data[6:]).get("choices", []):
                for word in (choice["delta"].get("content") or "").split():
                    left[word] = at
    lags = []
    chunks = 0
    for at, line in zip(arrivals, lines, strict=False):
        for chunk in message_chunks([line]):
            chunks += 1
            lags += [at - left[word] for word in chunk.split()]
    assert len(lags) == n, lags
    return statistics.median(lags), max(lags), chunks


def verdict(good: bool, bad: str = "OVER TARGET") -> str:
    return "ok" if good else bad


async def measure(
    editor: Editor, mock: MockThread, bare: BareReader, cwd: str, n: int, runs: int
) -> bool:
    """Relay and bare read of n deltas, `runs` times each, interleaved; print; True if on target."""
    relays, cpus, bares, counts = [], [], [], []
    for _ in range(runs):
        elapsed, cpu, chunks = await relay_once(editor, mock, cwd, n)
        relays.append(elapsed)
        cpus.append(cpu)
        counts.append(chunks)
        bares.append(await bare.read(n))
    relay, bare_s = statistics.median(relays), statistics.median(bares)
    ratio = bare_s / relay
    # Summed over the runs: /proc counts clock ticks (10 ms), coarse for one run of 2,000.
    cpu_us = sum(cpus) / (n * runs) * 1e6
    print(f"\n{n} deltas ({min(counts)}-{max(counts)} chunks relayed)")
    line = f"  prompt -> stopReason    {relay * 1000:8.1f} ms  ({n / relay:7.0f} deltas/s)"
    ok = True
    if n == 2000:
        ok = relay * 1000 <= TARGET_MS
        line += f"  target <= {TARGET_MS:g} ms  {verdict(ok)}"
    print(line)
    target = f"<= {TARGET_MS:g} ms" if n == 2000 else "-"
    emit(f"relay: {n} deltas, prompt -> stopReason", relay * 1000, "ms", target, ok, bare_s * 1000)
    print(f"  bare httpx SSE read     {bare_s * 1000:8.1f} ms  ({n / bare_s:7.0f} deltas/s)")
    good = ratio >= TARGET_RATIO
    print(f"  relay rate / bare rate  {ratio:8.2f}     target >= {TARGET_RATIO:g}  ", end="")
    print(verdict(good, "UNDER TARGET"))
    emit(f"relay: {n} deltas, relay rate / bare rate", ratio, "x", f">= {TARGET_RATIO:g}", good)
    ok = ok and good
    good = cpu_us <= TARGET_CPU_US
    print(f"  server CPU per delta    {cpu_us:8.1f} us  target <= {TARGET_CPU_US:g} us  ", end="")
    print(verdict(good))
    emit(f"relay: {n} deltas, server CPU per delta", cpu_us, "us", f"<= {TARGET_CPU_US:g} us", good)
    return ok and good


async def start_server(
    env: dict[str, str], cwd: str, profile: str | None
) -> asyncio.subprocess.Process:
    """`acp-server --model openai:mock-model`, under cProfile when `profile` names a file."""
    command = server_command()
    if profile:  # the whole server under cProfile (slower; for finding hot spots)
        command = [sys.executable, "-m", "cProfile", "-o", profile, "-m", "acp_server"]
    return await asyncio.create_subprocess_exec(
        *command,
        "--model",
        "openai:mock-model",
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        env=env,
        cwd=cwd,
        limit=64 * 1024 * 1024,
    )


async def main_async(args: argparse.Namespace) -> int:
    sizes = [int(s) for s in args.sizes.split(",")]
    mock = MockThread()
    mock.mock.set(context_length=131072)
    ok = True
    with tempfile.TemporaryDirectory() as tmp:
        env = {
            **os.environ,
            "OPENAI_BASE_URL": f"{mock.mock.url}/v1",
            "OPENAI_API_KEY": "sk-bench",
            "ACP_SERVER_DATA_DIR": str(Path(tmp) / "data"),
        }
        proc = await start_server(env, tmp, args.profile)
        editor = Editor(proc)
        try:
            await editor.request("initialize", {"protocolVersion": 1, "clientCapabilities": {}})
            new = await editor.request("session/new", {"cwd": tmp, "mcpServers": []})
            session = new["result"]["sessionId"]
            bare = await BareReader.start(mock)
            # Warm up: lazy imports, the HTTP client, window discovery, the bare path.
            for _ in range(2):
                await relay_once(editor, mock, tmp, 200)
                await bare.read(200)
            print(f"runs: {args.runs} per size (medians)")
            for n in sizes:
                ok = await measure(editor, mock, bare, tmp, n, args.runs) and ok
            await bare.close()
            median, worst, count = await promptness(editor, mock, session)
            good = worst < 0.020  # a delta held until the next one would lag >= 20 ms
            ok = ok and good
            emit("relay: promptness, worst delta lag", worst * 1000, "ms", "< 20 ms", good)
            print(f"\npromptness, 25 deltas 20 ms apart: {count} chunks relayed")
            print(
                f"  model server -> editor  median {median * 1000:.1f} ms, worst "
                f"{worst * 1000:.1f} ms  target < 20 ms  {verdict(good, 'HELD BACK')}"
            )
        finally:
            if proc.stdin is not None:
                proc.stdin.close()
            try:
                await asyncio.wait_for(proc.wait(), 5)
            except TimeoutError:
                proc.kill()
                await proc.wait()
            mock.close()
    return 0 if ok else 1


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--sizes", default="2000,20000")
    parser.add_argument("--profile", metavar="FILE", help="run the server under cProfile")
    parser.add_argument("--bare-reader", metavar="URL", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.bare_reader:
        asyncio.run(bare_reader(args.bare_reader))
        return 0
    return asyncio.run(main_async(args))


if __name__ == "__main__":
    sys.exit(main())
