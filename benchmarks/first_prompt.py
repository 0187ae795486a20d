"""The first prompt of a fresh process: how soon the reply starts, and how much memory it took.

Run: python benchmarks/first_prompt.py [--runs N] [--deltas N]

Each run spawns a real `acp-server --model openai:mock-model` (the mock LLM of
tests/support/mock_llm/ on a thread of this process), answers `initialize`, opens a session and
sends the first prompt, in two variants, interleaved run by run:

- typed: `--pause` seconds after the session/new answer (default 0.5: the user types; the
  server prepares the first turn meanwhile);
- at once: written in the same pass as the session/new answer is read (what `acp-server run`,
  acpx `exec`, scripted clients and "ask about this selection" actions do; nothing had time
  to warm up: the turn's imports, the HTTP stack, the first connection).

The mock streams N one-word deltas (default 2,000) and notes, on the system-wide monotonic
clock, when the head of the streamed reply left it; the editor side notes when each line
arrived. Targets (medians of fresh processes; the floor of each is a later prompt of the same
process, a fresh session so the history is the same size):

- first chunk: the first `agent_message_chunk` read by the editor, after the mock's first byte
  (typed <= 15 ms, at once <= 20 ms: issues 14 and 22);
- prompt sent -> stopReason, against the later prompt: typed <= 1.3 x, at once <= 1.2 x;
- peak RSS (VmHWM) of the server after the first prompt: <= 45 MB.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from common import Editor, MockThread, emit, message_chunks, peak_rss_mb, server_command, words

from tests.support.mock_llm import MockLLM
from tests.support.mock_llm.http_io import ResponseWriter

TARGET_RSS_MB = 45.0


@dataclass(frozen=True)
class Targets:
    first_chunk_ms: float  # after the mock's first byte
    ratio: float  # prompt sent -> stopReason, first / later prompt


TYPED = Targets(first_chunk_ms=15.0, ratio=1.3)  # issue 14
AT_ONCE = Targets(first_chunk_ms=20.0, ratio=1.2)  # issue 22


class StampedHead(ResponseWriter):
    """The mock's response writer, noting when the head of the first streamed reply left."""

    first_byte: float | None = None

    async def head(
        self,
        status: int,
        content_type: str,
        length: int | None = None,
        headers: dict[str, str] | None = None,
    ) -> None:
        if content_type == "text/event-stream" and StampedHead.first_byte is None:
            StampedHead.first_byte = time.monotonic()
        await super().head(status, content_type, length, headers)


MockLLM.response_writer = StampedHead  # benchmark-only instrumentation


@dataclass
class Run:
    first_chunk: float  # seconds from the mock's first byte to the first chunk read
    first_byte: float  # seconds from the first prompt sent to the mock's first byte
    later_byte: float  # the same for a later prompt
    first: float  # seconds from the first prompt sent to its stopReason
    later: float  # the same for a later prompt of the process
    rss_mb: float  # peak RSS after the first prompt


async def prompt(
    editor: Editor, mock: MockThread, cwd: str, n: int, pause: float = 0.0
) -> tuple[float, float, float]:
    """In a new session (prompted `pause` seconds after its answer), a prompt answered with n
    deltas: seconds from the prompt sent to its stopReason, from the prompt sent to the mock's
    first byte, and from that byte to the first chunk the editor read."""
    new = await editor.request("session/new", {"cwd": cwd, "mcpServers": []})
    if pause:  # else the prompt goes in the same pass as the answer was read
        await asyncio.sleep(pause)
    text = words(n)
    mock.queue({"text": text, "usage": {"prompt_tokens": 10, "completion_tokens": n}})
    StampedHead.first_byte = None
    arrivals: list[float] = []
    start = time.monotonic()
    req = await editor.send(
        "session/prompt",
        {"sessionId": new["result"]["sessionId"], "prompt": [{"type": "text", "text": "go"}]},
    )
    answer, lines = await editor.until_answer(req, arrivals)
    elapsed = time.monotonic() - start
    assert answer["result"]["stopReason"] == "end_turn", answer
    if "".join(message_chunks(lines)) != text:
        raise AssertionError("the relayed text differs from the model's")
    first = next(at for at, line in zip(arrivals, lines, strict=False) if message_chunks([line]))
    byte = StampedHead.first_byte
    assert byte is not None
    return elapsed, byte - start, first - byte


async def one_run(mock: MockThread, n: int, pause: float) -> Run:
    """A fresh server: its first prompt `pause` seconds after session/new, then two later."""
    with tempfile.TemporaryDirectory() as tmp:
        env = {
            **os.environ,
            "OPENAI_BASE_URL": f"{mock.mock.url}/v1",
            "OPENAI_API_KEY": "sk-bench",
            "ACP_SERVER_DATA_DIR": str(Path(tmp) / "data"),
        }
        proc = await asyncio.create_subprocess_exec(
            *server_command(),
            "--model",
            "openai:mock-model",
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            env=env,
            cwd=tmp,
            limit=64 * 1024 * 1024,
        )
        editor = Editor(proc)
        try:
            await editor.request("initialize", {"protocolVersion": 1, "clientCapabilities": {}})
            first, first_byte, first_chunk = await prompt(editor, mock, tmp, n, pause)
            rss = peak_rss_mb(proc.pid)
            later = min([await prompt(editor, mock, tmp, n) for _ in range(2)])
        finally:
            await editor.close()
    return Run(first_chunk, first_byte, later[1], first, later[0], rss)


def ms(values: list[float]) -> float:
    return statistics.median(values) * 1000


def report(label: str, runs: list[Run], targets: Targets) -> bool:
    """Print (and emit) the medians of one variant; True if on target."""
    print(f"{label}:")
    chunk = ms([r.first_chunk for r in runs])
    later_byte, later = ms([r.later_byte for r in runs]), ms([r.later for r in runs])
    ratio = statistics.median(r.first / r.later for r in runs)
    rss = statistics.median(r.rss_mb for r in runs)
    checks = [
        ("first chunk after the mock's first byte", chunk, "ms", targets.first_chunk_ms, None),
        ("prompt sent -> the mock's first byte", ms([r.first_byte for r in runs]), "ms", None,
         later_byte),
        ("prompt sent -> stopReason", ms([r.first for r in runs]), "ms", None, later),
        ("stopReason: first / later prompt", ratio, "x", targets.ratio, None),
        ("peak RSS after the first prompt", rss, "MB", TARGET_RSS_MB, None),
    ]  # fmt: skip
    ok = True
    for name, value, unit, aim, floor in checks:
        good = aim is None or value <= aim
        ok = ok and good
        said = f"<= {aim:g} {unit}" if aim is not None else ""
        said += f"later prompt {floor:.1f} ms" if floor is not None else ""
        print(f"  {name:42} {value:8.2f} {unit:2}  ({said or 'for information'})  ", end="")
        print("ok" if good else "MISS")
        target_text = f"<= {aim:g} {unit}" if aim is not None else "-"
        emit(f"first prompt ({label}): {name}", value, unit, target_text, good, floor)
    return ok


async def main_async(args: argparse.Namespace) -> int:
    mock = MockThread()
    mock.mock.set(context_length=131072)
    try:
        await one_run(mock, 200, 0.0)  # warm the file cache once
        typed, at_once = [], []
        for _ in range(args.runs):
            typed.append(await one_run(mock, args.deltas, args.pause))
            at_once.append(await one_run(mock, args.deltas, 0.0))
    finally:
        mock.close()
    print(f"runs: {args.runs} fresh processes per variant (medians), {args.deltas} deltas")
    ok = report(f"typed {args.pause:g} s after session/new", typed, TYPED)
    ok = report("sent at once after session/new", at_once, AT_ONCE) and ok
    return 0 if ok else 1


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=10)
    parser.add_argument("--deltas", type=int, default=2000)
    parser.add_argument("--pause", type=float, default=0.5, help="seconds the user types")
    return asyncio.run(main_async(parser.parse_args()))


if __name__ == "__main__":
    sys.exit(main())
