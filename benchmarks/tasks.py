"""The task benchmark (issue 31): small coding tasks in tiny repositories it writes, each run
through `acp-server run` on a local model and scored by its effect (a file's contents, `pytest`
passing, the answer holding a fact only a tool could find), never by how the model words it.

Run: python benchmarks/tasks.py [--model 1.5b|0.5b|local:/path/to/model.gguf] [--only NAME ...]
[--keep DIR]
(or `python benchmarks/run_all.py --tasks`, which adds its figures to the table).

Without --model it uses the tool-model tier's Qwen2.5-Coder-1.5B (tests/support/tool_model.py:
assembled from pinned packages, sha256 checked); `--model 0.5b` its 0.5B sibling, likewise.
Each task gets a fresh folder, temperature 0 (the local default), 2 threads, an 8,192-token
window (in 4,096 the compact tool profile leaves grep, list_directory and write_file out), at
most 8 model requests and `--timeout` seconds. One line per task: passed or not, wall time,
exit status, the model requests (the embedded server's log), the prompt and reply tokens (run's
tokens line) and the share of the prompt tokens llama.cpp's prefix cache served (its own log,
ACP_SERVER_LOCAL_VERBOSE=1); then the pass rate (target: three in four) and the totals as BENCH
figures. One pass takes ~15-25 minutes on 2 quiet cores.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from common import emit  # noqa: E402  (benchmarks/ is on the path when run as a script)

Check = Callable[[Path, str], bool]  # (the task's folder, the answer printed) -> passed


@dataclass(frozen=True)
class Task:
    name: str
    files: dict[str, str]
    prompt: str
    check: Check


def _text(repo: Path, name: str) -> str:
    try:
        return (repo / name).read_text("utf-8")
    except OSError:
        return ""


def _own_env() -> dict[str, str]:
    """This environment without pytest's variables: a `PYTEST_ADDOPTS` of the caller's (say
    `--basetemp=DIR`) would reach the pytest a check or the model runs, and that pytest refuses
    a basetemp holding the folder it runs in (or empties DIR, where it may)."""
    return {k: v for k, v in os.environ.items() if not k.startswith("PYTEST_")}


def _passes(repo: Path, *argv: str) -> bool:
    try:
        done = subprocess.run(
            argv, cwd=repo, env=_own_env(), capture_output=True, text=True, timeout=120
        )
    except (OSError, subprocess.TimeoutExpired):
        return False
    return done.returncode == 0


def _output(repo: Path, *argv: str) -> str:
    try:
        done = subprocess.run(argv, cwd=repo, capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired):
        return ""
    return done.stdout


def _words(text: str) -> str:
    """Lower case, punctuation gone: "Hello, World!" says hello world too."""
    return " ".join(re.sub(r"[^a-z0-9]+", " ", text.lower()).split())


def _json(repo: Path, name: str) -> object:
    try:
        return json.loads(_text(repo, name))
    except ValueError:
        return None


PYTEST = (sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider")
TASKS = [
    Task(
        "read and answer",
        {"README.md": "# vault\n\nThe secret word is tangerine.\n"},
        "Read README.md and tell me the secret word.",
        lambda repo, answer: "tangerine" in answer.lower(),
    ),
    Task(
        "list the files",
        {"alpha_notes.txt": "a\n", "beta_plan.txt": "b\n"},
        "List the files here.",
        lambda repo, answer: "alpha_notes" in answer and "beta_plan" in answer,
    ),
    Task(
        "find with grep",
        {
            "a.py": "def add(a, b):\n    return a + b\n",
            "b.py": "def compute_total(x):\n    return sum(x)\n",
        },
        "Use grep to find which file defines compute_total, and answer with its name.",
        lambda repo, answer: "b.py" in answer,
    ),
    Task(
        "edit one line",
        {"greet.py": 'print("hi")\n'},
        'In greet.py, change "hi" to "hello".',
        lambda repo, answer: _text(repo, "greet.py") == 'print("hello")\n',
    ),
    Task(
        "create and run a file",
        {},
        "Create hello.py that prints hello world, then run it with python3.",
        lambda repo, answer: "hello world" in _words(_output(repo, sys.executable, "hello.py")),
    ),
    Task(
        "write a file",
        {},
        "Create the file notes.txt containing exactly: ship it",
        lambda repo, answer: _text(repo, "notes.txt").strip() == "ship it",
    ),
    Task(
        "fix a failing test",
        {
            "calc.py": "def add(a, b):\n    return a - b\n",
            "test_calc.py": "from calc import add\n\n\ndef test_add():\n"
            "    assert add(2, 3) == 5\n",
        },
        "The test in test_calc.py fails. Fix calc.py so that it passes.",
        lambda repo, answer: _passes(repo, *PYTEST) and "a + b" in _text(repo, "calc.py"),
    ),
    Task(
        "rename a function used in two files",
        {
            "util.py": "def old_name(x):\n    return x * 2\n",
            "main.py": "from util import old_name\n\nprint(old_name(21))\n",
        },
        "Rename the function old_name to new_name everywhere it is used.",
        lambda repo, answer: (
            "old_name" not in _text(repo, "util.py") + _text(repo, "main.py")
            and _output(repo, sys.executable, "main.py").strip() == "42"
        ),
    ),
    Task(
        "add a test",
        {"mathx.py": "def double(x):\n    return 2 * x\n"},
        "Add a file test_mathx.py with a pytest test of double from mathx.py.",
        lambda repo, answer: "double" in _text(repo, "test_mathx.py") and _passes(repo, *PYTEST),
    ),
    Task(
        "explain an error from a command",
        {"broken.py": "rate = 10\nprint(rate / 0)\n"},
        "Run python3 broken.py and tell me which exception it raises.",
        lambda repo, answer: "zerodivisionerror" in answer.lower(),
    ),
    Task(
        "count with a command",
        {"data.txt": "".join(f"row {n}\n" for n in range(7))},
        "How many lines does data.txt have? Find out with a command.",
        lambda repo, answer: "7" in answer,
    ),
    Task(
        "change a setting",
        {"config.json": '{"debug": true, "port": 8080}\n'},
        "Set debug to false in config.json.",
        lambda repo, answer: _json(repo, "config.json") == {"debug": False, "port": 8080},
    ),
    Task(
        "remove a line",
        {"todo.txt": "write report\nbuy milk\ncall bank\n"},
        "Remove the line 'buy milk' from todo.txt.",
        lambda repo, answer: _text(repo, "todo.txt") == "write report\ncall bank\n",
    ),
]


@dataclass
class Outcome:
    task: str
    passed: bool
    seconds: float
    exit_code: int
    requests: int = 0  # chat requests the model server answered
    tokens_in: int = 0  # prompt tokens, as the agent counted what the server reported
    tokens_out: int = 0
    cached: int = 0  # prompt tokens llama.cpp's prefix cache served (its own log)
    tail: str = ""  # the end of what run printed, to see why a task failed
    said: str = ""  # all of it (written with --keep)

    @property
    def reuse(self) -> float:
        return self.cached / self.tokens_in if self.tokens_in else 0.0


_TOKENS = re.compile(r"\[tokens: ([\d,]+) in, ([\d,]+) out")
_HIT = re.compile(r"Llama\.generate: (\d+) prefix-match hit")
_PROMPT_EVAL = re.compile(r"prompt eval time = .*?/\s*(\d+) tokens")
_EVAL = re.compile(r"\beval time = .*?/\s*(\d+) runs")


def measured(outcome: Outcome, said: str, server_log: str) -> Outcome:
    """The task's requests, tokens and cache reuse, from what run printed (its tokens line)
    and the embedded server's log (one POST per chat request; llama-cpp-python's own prefix
    cache hits and timings, written with ACP_SERVER_LOCAL_VERBOSE=1)."""
    outcome.requests = server_log.count("POST /v1/chat/completions")
    outcome.cached = sum(int(hit) for hit in _HIT.findall(server_log))
    found = _TOKENS.search(said)
    if found:
        outcome.tokens_in = int(found.group(1).replace(",", ""))
        outcome.tokens_out = int(found.group(2).replace(",", ""))
    else:  # llama-cpp-python reports no usage when streaming: its own timings say it
        read = sum(int(n) for n in _PROMPT_EVAL.findall(server_log))
        outcome.tokens_in = read + outcome.cached
        outcome.tokens_out = sum(int(n) for n in _EVAL.findall(server_log))
    return outcome


def run_task(task: Task, model: str, timeout: float) -> Outcome:
    # The same folder for a task at every run: its path is in the system prompt, and at
    # temperature 0 a different path (a random temporary name) is a different answer.
    folder = Path(tempfile.gettempdir()) / "acp-tasks" / task.name.replace(" ", "-")
    shutil.rmtree(folder, ignore_errors=True)
    try:
        return _run_in(folder, task, model, timeout)
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def _run_in(folder: Path, task: Task, model: str, timeout: float) -> Outcome:
    repo = folder / "repo"
    repo.mkdir(parents=True)
    for name, text in task.files.items():
        (repo / name).write_text(text, encoding="utf-8")
    data = folder / "data"
    env = {
        **_own_env(),
        "ACP_SERVER_LOCAL_CONTEXT": "8192",
        "ACP_SERVER_LOCAL_THREADS": "2",
        "ACP_SERVER_LOCAL_VERBOSE": "1",
        "ACP_SERVER_DATA_DIR": str(data),
        "ACP_SERVER_DISCOVER": "0",
    }
    argv = [sys.executable, "-m", "acp_server", "run", "--model", model, "--yes"]
    argv += ["--cwd", str(repo), "--max-turn-requests", "8", task.prompt]
    start = time.monotonic()
    try:
        done = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=timeout)
        answer, code, said = done.stdout, done.returncode, done.stderr + done.stdout
    except subprocess.TimeoutExpired:
        answer, code, said = "", -1, "(timed out)"
    seconds = time.monotonic() - start
    log = data / "local-model.log"
    server_log = log.read_text("utf-8", "replace") if log.exists() else ""
    passed = task.check(repo, answer)
    whole = f"{said}\n--- the model server's log ---\n{server_log}"
    outcome = Outcome(task.name, passed, seconds, code, tail=said[-600:], said=whole)
    return measured(outcome, said, server_log)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--model",
        default="1.5b",
        help="PROVIDER:MODEL, or 1.5b (the default: the tool-model tier's file) or 0.5b (its "
        "smaller sibling), assembled from their pinned packages",
    )
    parser.add_argument("--only", nargs="*", default=[], help="task names to run")
    parser.add_argument("--timeout", type=float, default=900.0, help="seconds per task")
    parser.add_argument("--label", default="", help="a name for the model in the figures")
    parser.add_argument(
        "--keep", type=Path, help="a folder to write each task's whole output and server log to"
    )
    args = parser.parse_args()
    model = args.model
    if model in ("1.5b", "0.5b"):
        from tests.support.tool_model import CODER_0_5B, CODER_1_5B, assemble, cache_dir

        label = args.label or f"Qwen2.5-Coder-{model.upper()}"
        model = f"local:{assemble(cache_dir(), CODER_1_5B if model == '1.5b' else CODER_0_5B)}"
    label = args.label or Path(model.split(":", 1)[-1]).stem
    chosen = [t for t in TASKS if not args.only or t.name in args.only]
    outcomes = []
    print("pass  wall s  exit  requests  tokens in/out  cache reuse  task")
    for task in chosen:
        o = run_task(task, model, args.timeout)
        outcomes.append(o)
        if args.keep is not None:
            args.keep.mkdir(parents=True, exist_ok=True)
            (args.keep / f"{task.name.replace(' ', '-')}.txt").write_text(o.said, "utf-8")
        mark = "pass" if o.passed else "FAIL"
        print(
            f"{mark} {o.seconds:7.1f} {o.exit_code:5d} {o.requests:9d} "
            f"{o.tokens_in:7,}/{o.tokens_out:<6,} {100 * o.reuse:9.0f} %  {task.name}",
            flush=True,
        )
        if not o.passed:
            print("      " + o.tail.replace("\n", "\n      "))
    passed = sum(o.passed for o in outcomes)
    total_in = sum(o.tokens_in for o in outcomes)
    reuse = sum(o.cached for o in outcomes) / total_in if total_in else 0.0
    print(f"{passed} of {len(outcomes)} tasks passed on {model}")
    emit(
        f"tasks passed ({label})",
        passed,
        "tasks",
        f">= {0.75 * len(outcomes):g}",
        passed >= 0.75 * len(outcomes),
    )
    for name, value, unit in (
        ("model requests", sum(o.requests for o in outcomes), "requests"),
        ("prompt tokens", total_in, "tokens"),
        ("prompt cache reuse", 100 * reuse, "%"),
        ("wall time", sum(o.seconds for o in outcomes), "s"),
    ):
        emit(f"tasks {name} ({label})", value, unit, "-", True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
