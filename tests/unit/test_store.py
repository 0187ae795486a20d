"""The SQLite store: creation races, migrations, and reads right after creation."""

from __future__ import annotations

import subprocess
import sys
import threading
from pathlib import Path

from acp_server.store import MIGRATIONS, Store, connect


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
        "import sys, pathlib; from acp_server.store import connect; "
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
