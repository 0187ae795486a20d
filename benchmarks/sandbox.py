"""What the sandbox adds to a short command: `/bin/sh -c true` run plain and run confined
(bubblewrap, and Landlock), interleaved, medians of N runs each, in one process.

Run: python benchmarks/sandbox.py [--runs 20]

Target (issue 23): the sandbox adds at most 15 ms to a short command, under bubblewrap (the
sandbox wherever it is installed); Landlock's figure is information (it starts a bare
interpreter before the command). The floor is the same command run plain in the same run.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from common import emit

from acp_server.confine import sandbox
from acp_server.confine.landlock_exec import abi

TARGET_MS = 15.0
COMMAND = ["/bin/sh", "-c", "true"]


def timed(argv: list[str], cwd: Path) -> float:
    start = time.perf_counter()
    subprocess.run(argv, cwd=cwd, check=True, capture_output=True)
    return (time.perf_counter() - start) * 1000


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runs", type=int, default=20)
    runs = parser.parse_args().runs
    project = Path(tempfile.mkdtemp(prefix="acp-bench-sandbox-"))
    policy = sandbox.policy_for("workspace-write", (project,), None)
    ways = {"bubblewrap": sandbox.mechanism() == "bubblewrap", "landlock": abi() >= 1}
    argvs = {"plain": COMMAND}
    argvs |= {how: sandbox.wrap(COMMAND, policy, how) for how, ok in ways.items() if ok}  # type: ignore[arg-type]
    times: dict[str, list[float]] = {name: [] for name in argvs}
    for argv in argvs.values():  # once each first: caches warm, nothing measured
        timed(argv, project)
    for _ in range(runs):
        for name, argv in argvs.items():
            times[name].append(timed(argv, project))
    plain = statistics.median(times["plain"])
    print(f"short command, median of {runs}: plain {plain:.1f} ms", flush=True)
    for name in argvs.keys() - {"plain"}:
        value = statistics.median(times[name])
        added = value - plain
        print(f"  {name}: {value:.1f} ms (+{added:.1f} ms)", flush=True)
        # The target is bubblewrap's, the sandbox where it is installed. Landlock is the
        # fallback: it starts a bare interpreter (`python -I -S`) before the command.
        target = f"<= {TARGET_MS:g}" if name == "bubblewrap" else "information"
        emit(f"sandbox ({name}) adds to a short command", added, "ms", target,
             added <= TARGET_MS or name != "bubblewrap", plain)  # fmt: skip
    sandbox.cleanup(policy)
    project.rmdir()


if __name__ == "__main__":
    main()
