"""Agent loop overhead: 200 scripted rounds of `read_file`, the model's own time excluded.

Run: python benchmarks/loop.py [--rounds N]

One turn runs N rounds, each asking for `read_file` on a small file, then a final text round.
Everything the agent does per round is measured (history, schema validation, permission
decision, the tool itself, building and JSON-encoding every update as it would go on the wire);
the time spent inside the backend's stream is subtracted. Target: <= 2 ms per round.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import tempfile
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

from common import emit

from acp_server.backends.scripted import ScriptedBackend
from acp_server.editor_api import NoEditor
from acp_server.messages import Event, Message, ModelRequest, TextPart
from acp_server.permissions import Permissions, RuleStore
from acp_server.session.session import Session
from acp_server.settings import Settings
from acp_server.store.transcript import NullRecorder


class TimedBackend:
    """Wraps a backend and adds up the time spent producing its events."""

    def __init__(self, inner: ScriptedBackend) -> None:
        self.inner = inner
        self.seconds = 0.0
        self.label = inner.label

    async def context_window(self) -> int | None:
        return None

    async def stream(self, request: ModelRequest) -> AsyncIterator[Event]:
        stream = self.inner.stream(request).__aiter__()
        while True:
            start = time.perf_counter()
            try:
                event = await stream.__anext__()
            except StopAsyncIteration:
                self.seconds += time.perf_counter() - start
                return
            self.seconds += time.perf_counter() - start
            yield event


async def one_turn(rounds: int, workdir: Path) -> tuple[float, float, int]:
    target = workdir / "module.py"
    target.write_text("".join(f"line {i}\n" for i in range(200)), encoding="utf-8")
    script = [
        {"tool_calls": [{"name": "read_file", "arguments": {"path": "module.py"}}]}
        for _ in range(rounds)
    ] + [{"text": "done"}]
    script_path = workdir / "script.json"
    script_path.write_text(json.dumps(script), encoding="utf-8")
    backend = TimedBackend(ScriptedBackend(script_path))
    frames = 0

    def send(session_id: str, update: dict[str, Any]) -> None:
        nonlocal frames
        frame = {
            "jsonrpc": "2.0",
            "method": "session/update",
            "params": {"sessionId": session_id, "update": update},
        }
        json.dumps(frame, ensure_ascii=False, separators=(",", ":")).encode()
        frames += 1

    session = Session(
        "bench",
        cwd=workdir,
        backend=backend,
        editor=NoEditor(),
        recorder=NullRecorder(),
        permissions=Permissions(RuleStore(workdir, workdir / "data")),
        # A window the 200 rounds fit: this measures the loop (compaction is benchmarks/fit.py).
        settings=Settings(max_turn_requests=rounds + 5, context_window=1_000_000),
        send_update=send,
    )

    start = time.perf_counter()
    outcome = await session.prompt(Message(role="user", content=(TextPart("go"),)))
    total = time.perf_counter() - start
    assert outcome.stop == "end_turn", outcome
    return total, backend.seconds, frames


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=200)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        workdir = Path(tmp)
        asyncio.run(one_turn(5, workdir))  # warm caches and lazy imports
        total, model, frames = asyncio.run(one_turn(args.rounds, workdir))
    per_round = (total - model) / args.rounds * 1000
    verdict = "ok" if per_round <= 2.0 else "OVER TARGET"
    print(f"rounds: {args.rounds}, updates emitted: {frames}")
    print(f"turn total {total * 1000:8.1f} ms, inside the scripted model {model * 1000:7.1f} ms")
    print(f"agent overhead per round  {per_round:6.3f} ms  (target <= 2 ms)  {verdict}")
    emit("loop: agent overhead per round", per_round, "ms", "<= 2 ms", per_round <= 2.0)
    return 0


if __name__ == "__main__":
    sys.exit(main())
