"""The task benchmark scores by effect: every task's check fails on its repository as written
(with no answer), and passes once the task is done by hand, so a pass means the model did it."""

from __future__ import annotations

import importlib
import sys
from pathlib import Path
from types import ModuleType

import pytest

BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"

# For each task: the files as they are once it is done, and an answer that does it.
DONE: dict[str, tuple[dict[str, str], str]] = {
    "read and answer": ({}, "The secret word is Tangerine."),
    "list the files": ({}, "alpha_notes.txt and beta_plan.txt"),
    "find with grep": ({}, "It is defined in b.py."),
    "edit one line": ({"greet.py": 'print("hello")\n'}, ""),
    "create and run a file": ({"hello.py": 'print("Hello, World!")\n'}, ""),
    "write a file": ({"notes.txt": "ship it\n"}, ""),
    "fix a failing test": ({"calc.py": "def add(a, b):\n    return a + b\n"}, ""),
    "rename a function used in two files": (
        {
            "util.py": "def new_name(x):\n    return x * 2\n",
            "main.py": "from util import new_name\n\nprint(new_name(21))\n",
        },
        "",
    ),
    "add a test": (
        {
            "test_mathx.py": "from mathx import double\n\n\ndef test_double():\n"
            "    assert double(2) == 4\n"
        },
        "",
    ),
    "explain an error from a command": ({}, "It raises ZeroDivisionError."),
    "count with a command": ({}, "wc -l says 7."),
    "change a setting": ({"config.json": '{"debug": false, "port": 8080}\n'}, ""),
    "remove a line": ({"todo.txt": "write report\ncall bank\n"}, ""),
}


@pytest.fixture(scope="module")
def tasks() -> ModuleType:
    sys.path.insert(0, str(BENCHMARKS))
    try:
        return importlib.import_module("tasks")
    finally:
        sys.path.remove(str(BENCHMARKS))


def test_every_task_has_a_done_state(tasks: ModuleType) -> None:
    assert sorted(t.name for t in tasks.TASKS) == sorted(DONE)
    assert len(tasks.TASKS) >= 12


@pytest.mark.timeout(120)
@pytest.mark.parametrize("name", sorted(DONE))
def test_a_task_passes_only_once_done(tasks: ModuleType, name: str, tmp_path: Path) -> None:
    task = next(t for t in tasks.TASKS if t.name == name)
    for file, text in task.files.items():
        (tmp_path / file).write_text(text, encoding="utf-8")
    assert not task.check(tmp_path, ""), "passes before anything was done"
    files, answer = DONE[name]
    for file, text in files.items():
        (tmp_path / file).write_text(text, encoding="utf-8")
    assert task.check(tmp_path, answer), "fails although the task was done"


@pytest.mark.timeout(120)
def test_the_callers_pytest_options_do_not_reach_a_check(
    tasks: ModuleType, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The suite run with PYTEST_ADDOPTS=--basetemp=DIR failed here: the check's own pytest took
    the option, and pytest refuses a basetemp that holds the folder it runs in (the task's
    repository, inside this test's folder, inside DIR)."""
    monkeypatch.setenv("PYTEST_ADDOPTS", f"--basetemp={tmp_path}")
    repo = tmp_path / "repo"
    repo.mkdir()
    task = next(t for t in tasks.TASKS if t.name == "fix a failing test")
    for file, text in {**task.files, **DONE["fix a failing test"][0]}.items():
        (repo / file).write_text(text, encoding="utf-8")
    assert task.check(repo, "")
