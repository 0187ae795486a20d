"""The doctor's checks of this machine (store, permissions, editor command) and how checks are
written (symbols, ASCII, the summary)."""

from __future__ import annotations

import io
import sqlite3
import sys
from pathlib import Path

import pytest

from acp_server.doctor import Check, fail, ok, render, warn
from acp_server.doctor.local import editor_command_check, permissions_check, store_check


def written(checks: list[Check], encoding: str) -> list[str]:
    out = io.TextIOWrapper(io.BytesIO(), encoding=encoding, newline="\n")
    render(checks, out)
    out.flush()
    assert isinstance(out.buffer, io.BytesIO)
    return out.buffer.getvalue().decode(encoding).splitlines()


def test_each_check_is_one_line_with_its_advice_below() -> None:
    checks = [ok("A fine"), warn("B odd", "look at B"), fail("C broken", "fix C\nthen D")]
    assert written(checks, "utf-8") == [
        "✔ A fine",
        "! B odd",
        "    → look at B",
        "✘ C broken",
        "    → fix C",
        "    → then D",
        "1 problem and 1 warning: fix what the lines marked as failed say, then run "
        "`acp-server doctor` again.",
    ]


def test_plain_ascii_where_the_symbols_cannot_be_written() -> None:
    lines = written([ok("A · fine"), fail("C → broken", "fix C")], "ascii")
    assert lines[:3] == ["[ok] A - fine", "[x] C -> broken", "    -> fix C"]


def test_no_problem_is_said_with_the_warnings_to_read() -> None:
    last = written([ok("A"), warn("B", "b")], "utf-8")[-1]
    assert last == "No problem found (1 warning to read)."


def test_the_store_is_made_at_the_first_session(tmp_path: Path) -> None:
    check = store_check(tmp_path / "data" / "sessions.sqlite3")
    assert check.status == "ok" and "made at the first session" in check.line


def test_the_store_counts_its_sessions(tmp_path: Path) -> None:
    path = tmp_path / "sessions.sqlite3"
    with sqlite3.connect(path) as db:
        db.execute("CREATE TABLE sessions (id TEXT)")
        db.executemany("INSERT INTO sessions VALUES (?)", [("a",), ("b",)])
    db.close()
    assert store_check(path) == ok(f"Session store: {path} (2 sessions)")


def test_a_store_that_is_not_a_database_is_a_problem_with_what_to_do(tmp_path: Path) -> None:
    path = tmp_path / "sessions.sqlite3"
    path.write_bytes(b"this is not SQLite" * 100)
    check = store_check(path)
    assert check.status == "fail" and "cannot be read" in check.line
    assert "move it away" in check.advice


def test_a_data_directory_under_a_file_is_a_problem(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("", encoding="utf-8")
    store = store_check(blocker / "data" / "sessions.sqlite3")
    assert store.status == "fail" and f"{blocker} is not a folder" in store.line
    assert "ACP_SERVER_DATA_DIR" in store.advice
    rules = permissions_check(blocker / "data")
    assert rules.status == "fail" and "always" in rules.line


def fake_script(folder: Path) -> Path:
    folder.mkdir(parents=True)
    script = folder / "acp-server"
    script.write_text("#!/bin/sh\n", encoding="utf-8")
    script.chmod(0o755)
    return script


def test_the_editor_command_is_the_one_on_path(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    script = fake_script(tmp_path / "bin")
    monkeypatch.setenv("PATH", str(script.parent))
    check = editor_command_check(str(script), sys.executable)
    assert check.status == "ok"
    assert check.line.startswith(f"Editor command: {script} (or ")


def test_not_on_path_gives_the_absolute_command(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    script = fake_script(tmp_path / "venv" / "bin")
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    check = editor_command_check(str(script), str(script.parent / "python"))
    assert check.status == "warn" and "not on PATH" in check.line
    assert str(script) in check.advice and "-m acp_server" in check.advice


def test_another_installation_first_on_path_is_a_warning(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    ours, theirs = fake_script(tmp_path / "ours"), fake_script(tmp_path / "theirs")
    monkeypatch.setenv("PATH", str(theirs.parent))
    check = editor_command_check(str(ours), sys.executable)
    assert check.status == "warn"
    assert f"on PATH is {theirs}, not this one ({ours})" in check.line
