"""The SQLite store: creation races, migrations, and reads right after creation."""

from __future__ import annotations

import logging
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from acp_server.store.database import SaveFailed, SessionRow, Store
from acp_server.store.schema import MIGRATIONS, connect


def test_many_openers_of_a_new_store_all_succeed(tmp_path: Path) -> None:
    """Editors start two agents at once; both create the same new database."""
    path = tmp_path / "sessions.sqlite3"
    errors: list[BaseException] = []

    def open_it() -> None:
        try:
            connect(path).close()
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=open_it) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    db = connect(path)
    assert db.execute("PRAGMA user_version").fetchone()[0] == len(MIGRATIONS)
    assert db.execute("PRAGMA journal_mode").fetchone()[0] == "wal"


def test_two_processes_create_the_store_at_once(tmp_path: Path) -> None:
    path = tmp_path / "sessions.sqlite3"
    code = (
        "import sys, pathlib; from acp_server.store.schema import connect; "
        "connect(pathlib.Path(sys.argv[1])).close()"
    )
    procs = [subprocess.Popen([sys.executable, "-c", code, str(path)]) for _ in range(4)]
    assert [p.wait(timeout=30) for p in procs] == [0, 0, 0, 0]


def test_a_read_right_after_creation_sees_the_schema(tmp_path: Path) -> None:
    store = Store(tmp_path / "new" / "sessions.sqlite3")
    try:
        assert store.get("nope") is None
        assert store.list() == []
    finally:
        store.close()


def _row(session_id: str, cwd: Path) -> SessionRow:
    return SessionRow(session_id, str(cwd), [], None, 1.0, 1.0, {})


async def test_a_failed_write_is_reported_to_its_session_and_later_writes_still_land(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A JS client that cut an emoji in half sent a lone surrogate: the INSERT failed after
    BEGIN, nothing rolled back, and every later write of every session was lost silently."""
    store = Store(tmp_path / "sessions.sqlite3")
    try:
        store.create(_row("a", tmp_path))
        store.create(_row("b", tmp_path))
        await store.flush()
        with caplog.at_level(logging.ERROR, logger="acp_server.store.database"):
            store.append("a", "message", {"text": "half \ud83d"})  # cannot be UTF-8 encoded
            store.append("b", "message", {"text": "other session"})
            with pytest.raises(SaveFailed) as failed:
                await store.flush("a")
        assert "session a" in caplog.text
        assert "surrogates not allowed" in str(failed.value)
        await store.flush("b")  # the other session's write is not its failure
        store.append("a", "message", {"text": "next prompt"})
        await store.flush("a")  # reported once: this flush covers only the later write
        assert [e.body for e in store.events("a")] == [{"text": "next prompt"}]
        assert [e.body for e in store.events("b")] == [{"text": "other session"}]
    finally:
        store.close()


async def test_a_store_that_cannot_be_opened_fails_every_session_flush(tmp_path: Path) -> None:
    blocker = tmp_path / "not-a-directory"
    blocker.write_text("", encoding="utf-8")
    store = Store(blocker / "sessions.sqlite3")
    try:
        store.create(_row("a", tmp_path))
        store.append("a", "turn", {"stopReason": "end_turn"})
        with pytest.raises(SaveFailed):
            await store.flush("a")
    finally:
        store.close()


async def test_a_subagents_session_is_not_listed_and_goes_with_its_parent(tmp_path: Path) -> None:
    store = Store(tmp_path / "s.sqlite3")
    try:
        store.create(_row("parent", tmp_path))
        store.create(_row("other", tmp_path))
        child = SessionRow("child", str(tmp_path), [], None, 2.0, 2.0, {"parent": "parent"})
        store.create(child)
        await store.flush()
        assert {row.id for row in store.list()} == {"parent", "other"}
        store.delete("parent")
        await store.flush()
        assert {row.id for row in store.list()} == {"other"}
        assert store.get("child") is None and store.get("other") is not None
    finally:
        store.close()
