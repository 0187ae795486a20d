"""Context compaction in small windows: how many summary rounds a long session pays for.

Run: python benchmarks/compaction.py [--turns N] [--short-turns N]

A real `acp-server --model openai:mock-model` against the mock LLM (tests/support/mock_llm/ on
a thread of this process, its `file_reader` responder: each turn reads a file and answers with
its first word). Two sessions:

- "8K, 6 KB reads": the server reports an 8,192-token window; each turn reads a different
  ~6 KB file (N turns, default 60). Figure: summary rounds per turn (each is a second model
  call the user waits for); target <= 1/3 (at most one every third turn). Compactions per
  turn are printed for information (pruning needs no model round).
- "short turns, long paths": the default window (nothing reported), N turns (default 100)
  whose prompts and tool arguments name files deep in long folders. Figure: pairs of
  consecutive turns that both compacted without a summary freeing room in the first (target
  0).

In both sessions, a compaction must never leave the request larger than it found it (target
0). Counts, not times: no floor is measured.

Every turn must be answered from the file it read; a turn that is not fails the benchmark.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from common import Editor, MockThread, emit, message_chunks, server_command

from tests.support.context_session import write_files
from tests.support.mock_llm.responders import file_reader
from tests.support.mock_llm.view import is_summary

CARD = re.compile(r"about ([\d,]+) → ([\d,]+) tokens \(([^)]*)\)")
DEEP = "a_rather_long_folder_name_for_this_project/" * 4


@dataclass
class Session:
    """What one session's turns showed: per turn, its compactions as (before, after, how)."""

    turns: list[list[tuple[int, int, str]]] = field(default_factory=list)
    summaries: int = 0

    @property
    def compactions(self) -> int:
        return sum(len(t) for t in self.turns)

    def grew(self) -> int:
        return sum(after > before for t in self.turns for before, after, _ in t)

    def useless_pairs(self) -> int:
        """Consecutive turns that both compacted, the first without a summary freeing room."""
        pairs = 0
        for first, second in zip(self.turns, self.turns[1:], strict=False):
            freed = any(how == "older messages summarized" for _, _, how in first)
            pairs += bool(first and second and not freed)
        return pairs


def compaction_lines(lines: list[bytes]) -> list[tuple[int, int, str]]:
    found = []
    for line in lines:
        update = json.loads(line).get("params", {}).get("update", {})
        if not str(update.get("toolCallId", "")).startswith("compact_"):
            continue
        for block in update.get("content") or []:
            match = CARD.search(block.get("content", {}).get("text", ""))
            if match:
                before, after = (int(g.replace(",", "")) for g in match.groups()[:2])
                found.append((before, after, match.group(3)))
    return found


async def run_session(mock: MockThread, files: list[str], turns: int, cwd: Path) -> Session:
    """One server, one session, `turns` prompts reading `files` in turn."""
    env = {
        **os.environ,
        "OPENAI_BASE_URL": f"{mock.mock.url}/v1",
        "OPENAI_API_KEY": "sk-bench",
        "ACP_SERVER_DATA_DIR": str(cwd / "data"),
    }
    proc = await asyncio.create_subprocess_exec(
        *server_command(),
        "--model",
        "openai:mock-model",
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        env=env,
        cwd=cwd,
        limit=64 * 1024 * 1024,
    )
    editor = Editor(proc)
    seen = Session()
    try:
        await editor.request("initialize", {"protocolVersion": 1, "clientCapabilities": {}})
        new = await editor.request("session/new", {"cwd": str(cwd), "mcpServers": []})
        session = new["result"]["sessionId"]
        for n in range(turns):
            text = f"Please read {files[n % len(files)]} and tell me how it begins."
            params = {"sessionId": session, "prompt": [{"type": "text", "text": text}]}
            answer, lines = await editor.until_answer(await editor.send("session/prompt", params))
            said = "".join(message_chunks(lines))
            if answer["result"]["stopReason"] != "end_turn" or f"word{n % len(files)}" not in said:
                raise AssertionError(f"turn {n} was not answered from its file: {said[:200]}")
            seen.turns.append(compaction_lines(lines))
    finally:
        await editor.close()
    seen.summaries = sum(is_summary(r.json) for r in mock.mock.chat_requests)
    return seen


async def scenario(window: int | None, size: int, turns: int, deep: bool) -> Session:
    mock = MockThread()
    mock.mock.report_window = window
    mock.mock.strict_tools = True
    mock.mock.responder = file_reader()
    try:
        with tempfile.TemporaryDirectory() as tmp:
            folder = Path(tmp) / DEEP if deep else Path(tmp)
            folder.mkdir(parents=True, exist_ok=True)
            names = write_files(
                folder, 10 if deep else 6, size, prefix="module_" if deep else "file"
            )
            files = [str(folder / name) for name in names] if deep else names
            return await run_session(mock, files, turns, Path(tmp))
    finally:
        mock.close()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--turns", type=int, default=60)
    parser.add_argument("--short-turns", type=int, default=100)
    args = parser.parse_args()
    small = asyncio.run(scenario(8192, 6000, args.turns, deep=False))
    short = asyncio.run(scenario(None, 200, args.short_turns, deep=True))
    per_turn = small.summaries / args.turns
    checks: list[tuple[str, float, str, str, bool]] = [
        ("8K, 6 KB reads: summary rounds per turn", per_turn, "x", "<= 0.333", per_turn <= 1 / 3),
        ("8K, 6 KB reads: compactions per turn", small.compactions / args.turns, "x", "-", True),
        ("short turns: summary rounds per turn", short.summaries / args.short_turns, "x", "-",
         True),
        ("both: compactions that grew the request", short.grew() + small.grew(), "",
         "0", short.grew() + small.grew() == 0),
        ("short turns: consecutive compactions, no summary between", short.useless_pairs(), "", "0",
         short.useless_pairs() == 0),
    ]  # fmt: skip
    print(f"{args.turns} turns of 6 KB reads in 8,192 tokens; {args.short_turns} short turns")
    ok = True
    for name, value, unit, target, good in checks:
        ok = ok and good
        print(f"  {name:52} {value:8.3f} {unit:1}  (target {target})  {'ok' if good else 'MISS'}")
        emit(f"compaction: {name}", value, unit or "count", target, good)
    print(f"  summary rounds: {small.summaries} in {args.turns} turns; {short.summaries} in "
          f"{args.short_turns} short turns", file=sys.stdout)  # fmt: skip
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
