"""grep and glob on a generated 20,000-file project with gitignored build folders, against
ripgrep run directly in the same run.

Run: python benchmarks/search.py [--runs N] [--files N]

The tree is a git repository of `--files` source files (Python and TypeScript, a few KB each)
plus gitignored copies: a root `build/`, and `dist/` folders ignored by nested `.gitignore`
files, about a third again as many files. Each figure is the median of N runs, alternating
with its floor: the same search by the `rg` binary the tools use, started as a process and read
to the end (`rg -n PATTERN` for grep, `rg --files` for glob). The tools are timed from the call
to the result (in-process: the tool's own run, as the agent calls it), and through the agent:
from the `tool_call` frame the server sends to the frame with its result (the scripted backend
asks for the calls). Targets: <= 1.5x ripgrep's time, the same set of matching files as
ripgrep, no ignored folder in the results, and the ignored ones present with include_ignored.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from common import emit

from acp_server.editor_api import NoEditor
from acp_server.permissions import Permit
from acp_server.tools.base import Tool, ToolContext
from acp_server.tools.search.glob import GLOB, GREP
from acp_server.tools.search.rg import rg_binary

TARGET = 1.5
RARE = "needle_[0-9]+"
GLOB_PATTERN = "**/*_test.py"
BODY = "import os\n\n\ndef handler_{n}(request):\n    return {{'value': {n}}}\n" * 20


def generate(root: Path, files: int) -> None:
    """The project: `files` sources, 1 in 500 with the rare word, and ignored copies of some."""
    subprocess.run(["git", "init", "-q", str(root)], check=True)
    (root / ".gitignore").write_text("build/\n*.log\n", encoding="utf-8")
    for n in range(files):
        package, module = divmod(n, 400)
        folder = root / f"pkg{package}" / f"mod{module // 20}"
        folder.mkdir(parents=True, exist_ok=True)
        name = f"file{n}_test.py" if n % 50 == 0 else f"file{n}.{'py' if n % 3 else 'ts'}"
        extra = f"# needle_{n}\n" if n % 500 == 0 else ""
        (folder / name).write_text(BODY.format(n=n) + extra, encoding="utf-8")
    for package in range(files // 400):
        (root / f"pkg{package}" / ".gitignore").write_text("dist/\n", encoding="utf-8")
    copies = sorted(root.glob("pkg*/mod*/*"))[::3]
    for source in copies:
        number = int("".join(c for c in source.name if c.isdigit()))
        where = "build" if (number // 500) % 2 else f"{source.parent.parent.name}/dist"
        target = root / where / source.relative_to(root)
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(source.read_bytes())


def context(root: Path) -> ToolContext:
    async def permit(request: Permit) -> None:
        return None

    return ToolContext("bench", root, (root,), NoEditor(), lambda update: None, permit)


def rg_run(rg: str, root: Path, args: list[str]) -> tuple[float, list[str]]:
    start = time.perf_counter()
    done = subprocess.run([rg, *args], cwd=root, capture_output=True, check=False)
    seconds = time.perf_counter() - start
    return seconds, done.stdout.decode().splitlines()


LOOP = asyncio.new_event_loop()  # one loop for every call, as in the agent


def tool_run(tool: Tool, root: Path, args: dict[str, Any]) -> tuple[float, str]:
    start = time.perf_counter()
    out = LOOP.run_until_complete(tool.run(args, context(root)))
    return time.perf_counter() - start, out.text


def grep_files(text: str) -> set[str]:
    return {line.split(":", 1)[0] for line in text.splitlines() if not line.startswith("[")}


def compare(name: str, runs: int, ours: Any, floor: Any) -> tuple[float, float, Any, Any]:
    """Medians (ours, floor) in ms over alternating runs, and the last outputs of each."""
    mine, theirs = [], []
    for _ in range(runs):
        seconds, our_out = ours()
        mine.append(seconds)
        seconds, their_out = floor()
        theirs.append(seconds)
    ms, floor_ms = statistics.median(mine) * 1000, statistics.median(theirs) * 1000
    print(
        f"  {name:<34} {ms:7.1f} ms   rg {floor_ms:7.1f} ms   x{ms / floor_ms:.2f}", file=sys.stdout
    )
    return ms, floor_ms, our_out, their_out


def report(metric: str, ms: float, floor_ms: float, same: bool, as_asked: bool) -> None:
    ok = ms <= TARGET * floor_ms and same and as_asked
    emit(metric, ms, "ms", f"<= {TARGET}x rg, same files", ok, floor_ms)
    if not (same and as_asked):
        print(
            f"  {metric}: same files as rg: {same}; ignored folders as asked: {as_asked}",
            file=sys.stdout,
        )


def ignored(paths: set[str]) -> tuple[bool, bool]:
    """Whether any path lies in the root build/ folder, and in a nested dist/ folder."""
    return any(p.startswith("build/") for p in paths), any("/dist/" in p for p in paths)


def in_process(rg: str, root: Path, runs: int, size: str) -> None:
    grep = {"pattern": RARE, "max_results": 2000}
    ms, floor_ms, ours, theirs = compare(
        "grep (rare pattern)",
        runs,
        lambda: tool_run(GREP, root, grep),
        lambda: rg_run(rg, root, ["-n", RARE]),
    )
    found = grep_files(ours)
    same = bool(found) and found == grep_files("\n".join(theirs))
    report(f"grep, rare pattern, {size}", ms, floor_ms, same, ignored(found) == (False, False))
    ms, floor_ms, ours, theirs = compare(
        "glob " + GLOB_PATTERN,
        runs,
        lambda: tool_run(GLOB, root, {"pattern": GLOB_PATTERN}),
        lambda: rg_run(rg, root, ["--files"]),
    )
    listed = set(ours.splitlines())
    same = bool(listed) and listed == {p for p in theirs if p.endswith("_test.py")}
    report(f"glob **/*_test.py, {size}", ms, floor_ms, same, ignored(listed) == (False, False))
    ms, floor_ms, ours, theirs = compare(
        "grep include_ignored",
        runs,
        lambda: tool_run(GREP, root, {**grep, "include_ignored": True}),
        lambda: rg_run(rg, root, ["-n", "--no-ignore", RARE]),
    )
    found = grep_files(ours)
    same = found == grep_files("\n".join(theirs))
    report(f"grep include_ignored, {size}", ms, floor_ms, same, ignored(found) == (True, True))
    ms, floor_ms, ours, theirs = compare(
        "glob include_ignored",
        runs,
        lambda: tool_run(GLOB, root, {"pattern": GLOB_PATTERN, "include_ignored": True}),
        lambda: rg_run(rg, root, ["--files", "--no-ignore"]),
    )
    listed = set(ours.splitlines()[:-1])  # more than 500: the last line says how many
    expected = {p for p in theirs if p.endswith("_test.py")}
    same = listed <= expected and f"[{len(expected)} matches" in ours
    report(f"glob include_ignored, {size}", ms, floor_ms, same, ignored(expected) == (True, True))


class Agent:
    """An acp-server process (scripted backend) spoken to over its pipes."""

    def __init__(self, script: Path) -> None:
        command = Path(sys.executable).parent / "acp-server"
        if not command.exists():
            sys.exit(f"{command} not found: install the project first (pip install -e .)")
        self.proc = subprocess.Popen(
            [str(command), "--script", str(script)], stdin=subprocess.PIPE, stdout=subprocess.PIPE
        )
        self.next_id = 0

    def send(self, frame: dict[str, Any]) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(json.dumps({"jsonrpc": "2.0", **frame}).encode() + b"\n")
        self.proc.stdin.flush()

    def frames(self) -> Any:
        assert self.proc.stdout is not None
        while line := self.proc.stdout.readline():
            yield json.loads(line), time.perf_counter()

    def request(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        self.next_id += 1
        self.send({"id": self.next_id, "method": method, "params": params})
        for frame, _ in self.frames():
            if frame.get("id") == self.next_id and "method" not in frame:
                return frame
        raise RuntimeError("the agent closed its output")

    def close(self) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.close()
        self.proc.wait(timeout=10)


def through_agent(root: Path, runs: int, args: dict[str, Any]) -> list[float]:
    """Seconds from each grep's `tool_call` frame to the frame with its result."""
    call = {"tool_calls": [{"name": "grep", "arguments": args}]}
    with tempfile.TemporaryDirectory() as scratch:
        script = Path(scratch) / "script.json"
        script.write_text(json.dumps([call] * runs + [{"text": "done"}]), encoding="utf-8")
        agent = Agent(script)
        agent.request("initialize", {"protocolVersion": 1})
        new = agent.request("session/new", {"cwd": str(root), "mcpServers": []})
        session = new["result"]["sessionId"]
        agent.next_id += 1
        prompt = {"sessionId": session, "prompt": [{"type": "text", "text": "search"}]}
        agent.send({"id": agent.next_id, "method": "session/prompt", "params": prompt})
        started: dict[str, float] = {}
        seconds: list[float] = []
        for frame, at in agent.frames():
            if frame.get("id") == agent.next_id:
                break
            update = frame.get("params", {}).get("update", {})
            if update.get("sessionUpdate") == "tool_call":
                started[update["toolCallId"]] = at
            elif update.get("status") in ("completed", "failed"):
                seconds.append(at - started[update["toolCallId"]])
        agent.close()
    return seconds


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=10)
    parser.add_argument("--files", type=int, default=20_000)
    args = parser.parse_args()
    rg = rg_binary()
    if rg is None:
        sys.exit("no rg: install the project (the ripgrep package) first")
    with tempfile.TemporaryDirectory() as scratch:
        root = Path(scratch) / "project"
        generate(root, args.files)
        total = sum(1 for p in root.rglob("*") if p.is_file() and ".git" not in p.parts)
        print(f"{total} files ({args.files} not ignored), median of {args.runs}:", file=sys.stdout)
        size = f"{args.files // 1000}k files"
        in_process(rg, root, args.runs, size)
        grep_args = {"pattern": RARE, "max_results": 2000}
        floor = [rg_run(rg, root, ["-n", RARE])[0] for _ in range(args.runs)]
        agent_ms = statistics.median(through_agent(root, args.runs, grep_args)) * 1000
        floor += [rg_run(rg, root, ["-n", RARE])[0] for _ in range(args.runs)]  # before and after
        floor_ms = statistics.median(floor) * 1000
        name = "grep through the agent"
        print(
            f"  {name:<34} {agent_ms:7.1f} ms   rg {floor_ms:7.1f} ms   x{agent_ms / floor_ms:.2f}",
            file=sys.stdout,
        )
        target, ok = f"<= {TARGET}x rg", agent_ms <= TARGET * floor_ms
        emit(
            f"grep through the agent, tool call to result, {size}",
            agent_ms,
            "ms",
            target,
            ok,
            floor_ms,
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
