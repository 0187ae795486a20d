"""What the agent's own git (acp_server/confine/own_git.py) costs the environment block's
`git status`, asked once per turn: run as before (one plain `git status`, the agent's whole
environment) and as the agent's own git (the settings listed, then the status with every
program-naming setting off) with no sandbox, under bubblewrap, and under Landlock. Medians of
N interleaved runs in a small repository, in one process.

Run: python benchmarks/own_git.py [--runs 20]

Target (issue 29): under bubblewrap, the sandbox wherever it is installed, the agent's own
git adds at most 15 ms to a turn's status (a later turn waits for it at most
`workspace.TURN_WAIT`, 300 ms, in any case); the others are information.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from common import emit

from acp_server.confine import own_git, sandbox
from acp_server.confine.landlock_exec import abi
from acp_server.workspace.environment import git_state

TARGET_MS = 15.0
STATUS = ["status", "--porcelain=v1", "--branch"]


def repository() -> Path:
    folder = Path(tempfile.mkdtemp(prefix="acp-bench-git-"))
    env = {**os.environ, "GIT_CONFIG_GLOBAL": os.devnull}
    for argv in (["init", "-q"], ["add", "."], ["-c", "user.name=b", "-c", "user.email=b@b",
                 "commit", "-q", "-m", "x", "--allow-empty"]):  # fmt: skip
        (folder / "a.txt").write_text("a\n", encoding="utf-8")
        subprocess.run(["git", *argv], cwd=folder, check=True, capture_output=True, env=env)
    return folder


async def timed(ask: Callable[[], Awaitable[object]]) -> float:
    start = time.perf_counter()
    await ask()
    return (time.perf_counter() - start) * 1000


async def measure(runs: int) -> None:
    repo = repository()

    async def before() -> None:
        env = {**os.environ, "GIT_OPTIONAL_LOCKS": "0", "LC_ALL": "C"}
        proc = await asyncio.create_subprocess_exec(
            "git", *STATUS, cwd=repo, env=env, stdout=asyncio.subprocess.PIPE
        )
        await proc.communicate()

    def own(how: str) -> Callable[[], Awaitable[object]]:
        async def ask() -> object:
            os.environ[sandbox.MECHANISM_ENV] = how
            return await git_state(repo, timeout=30)

        return ask

    ways = {"before": before, "own git, no sandbox": own("none")}
    if sandbox.mechanism() == "bubblewrap":
        ways["own git, bubblewrap"] = own("bubblewrap")
    if abi() >= 1:
        ways["own git, landlock"] = own("landlock")
    times: dict[str, list[float]] = {name: [] for name in ways}
    for ask in ways.values():  # once each first: caches warm, nothing measured
        await ask()
    for _ in range(runs):
        for name, ask in ways.items():
            times[name].append(await timed(ask))
    plain = statistics.median(times["before"])
    print(f"git status, median of {runs}: before {plain:.1f} ms", flush=True)
    for name in ways.keys() - {"before"}:
        value = statistics.median(times[name])
        added = value - plain
        print(f"  {name}: {value:.1f} ms (+{added:.1f} ms)", flush=True)
        gated = name.endswith("bubblewrap")
        emit(f"{name} adds to the turn's git status", added, "ms",
             f"<= {TARGET_MS:g}" if gated else "information", added <= TARGET_MS or not gated,
             plain)  # fmt: skip
    for box in own_git._BOX:
        box.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runs", type=int, default=20)
    asyncio.run(measure(parser.parse_args().runs))


if __name__ == "__main__":
    main()
