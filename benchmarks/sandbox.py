"""What the sandbox adds to a short command: `/bin/sh -c true` run plain and run confined
(bubblewrap, and Landlock), interleaved, medians of N runs each, in one process.

Run: python benchmarks/sandbox.py [--runs 20]

Target (issue 23, kept by issue 29): the sandbox adds at most 15 ms to a short command, under
bubblewrap (the sandbox wherever it is installed), with every protection of issue 29 in force
(a user namespace without capabilities, a new session, the seccomp filter read through a shell
from the agent's sealed copy). Landlock's figure is information: it starts a bare interpreter
before the command, drops the capabilities, installs the seccomp filter and, as root or where
user namespaces are allowed, runs the command in a PID namespace of its own. The floor is the
same command run plain in the same run. The processor time the children used is reported as
well: on a loaded machine the wall time waits for the scheduler at each of bubblewrap's
namespace steps, the processor time does not.
"""

from __future__ import annotations

import argparse
import resource
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


def timed(argv: list[str], cwd: Path) -> tuple[float, float]:
    """Wall time and the children's processor time of one run, in ms."""
    before = _children_cpu()
    start = time.perf_counter()
    subprocess.run(argv, cwd=cwd, check=True, capture_output=True)
    return (time.perf_counter() - start) * 1000, (_children_cpu() - before) * 1000


def _children_cpu() -> float:
    used = resource.getrusage(resource.RUSAGE_CHILDREN)
    return used.ru_utime + used.ru_stime


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runs", type=int, default=20)
    runs = parser.parse_args().runs
    project = Path(tempfile.mkdtemp(prefix="acp-bench-sandbox-"))
    policy = sandbox.policy_for("workspace-write", (project,), None)
    ways = {"bubblewrap": sandbox.mechanism() == "bubblewrap", "landlock": abi() >= 1}
    argvs = {"plain": COMMAND}
    argvs |= {how: sandbox.wrap(COMMAND, policy, how) for how, ok in ways.items() if ok}  # type: ignore[arg-type]
    times: dict[str, list[tuple[float, float]]] = {name: [] for name in argvs}
    for argv in argvs.values():  # once each first: caches warm, nothing measured
        timed(argv, project)
    for _ in range(runs):
        for name, argv in argvs.items():
            times[name].append(timed(argv, project))
    plain, plain_cpu = (statistics.median(t) for t in zip(*times["plain"], strict=True))
    print(f"short command, median of {runs}: plain {plain:.1f} ms ({plain_cpu:.1f} ms CPU)")
    for name in argvs.keys() - {"plain"}:
        value, cpu = (statistics.median(t) for t in zip(*times[name], strict=True))
        added = value - plain
        print(f"  {name}: {value:.1f} ms (+{added:.1f} ms; CPU +{cpu - plain_cpu:.1f} ms)")
        # The target is bubblewrap's, the sandbox where it is installed. Landlock is the
        # fallback: it starts a bare interpreter (`python -I -S`) before the command.
        target = f"<= {TARGET_MS:g}" if name == "bubblewrap" else "information"
        emit(f"sandbox ({name}) adds to a short command", added, "ms", target,
             added <= TARGET_MS or name != "bubblewrap", plain)  # fmt: skip
        emit(f"sandbox ({name}) adds processor time to a short command", cpu - plain_cpu,
             "ms", "information", True, plain_cpu)  # fmt: skip
    sandbox.cleanup(policy)
    project.rmdir()


if __name__ == "__main__":
    main()
