"""The session store's tables, and how a database file gets them.

Schema changes are named, ordered migrations; `PRAGMA user_version` says how many ran. Editors
start two agents at once, so two processes may create the same new file together: opening
retries on a lock, and each migration checks again inside its transaction.
"""

from __future__ import annotations

import sqlite3
import time
from pathlib import Path

MIGRATIONS: tuple[tuple[str, str], ...] = (
    (
        "create sessions and events",
        """
        CREATE TABLE sessions (
            id TEXT PRIMARY KEY,
            cwd TEXT NOT NULL,
            additional_dirs TEXT NOT NULL DEFAULT '[]',
            title TEXT,
            created_at REAL NOT NULL,
            updated_at REAL NOT NULL,
            state TEXT NOT NULL DEFAULT '{}',
            deleted INTEGER NOT NULL DEFAULT 0
        );
        CREATE TABLE events (
            session_id TEXT NOT NULL REFERENCES sessions(id),
            seq INTEGER NOT NULL,
            kind TEXT NOT NULL,
            body TEXT NOT NULL,
            PRIMARY KEY (session_id, seq)
        );
        CREATE INDEX sessions_by_update ON sessions(deleted, updated_at DESC, id);
        """,
    ),
    (
        "store images once",
        """
        CREATE TABLE blobs (hash TEXT PRIMARY KEY, data TEXT NOT NULL);
        """,
    ),
)


def connect(path: Path, attempts: int = 50) -> sqlite3.Connection:
    """Open (creating and migrating as needed). Two processes that create the same new store
    at once (editors start two agents) may meet a lock while switching to WAL: retried."""
    path.parent.mkdir(parents=True, exist_ok=True)
    db = sqlite3.connect(path, isolation_level=None, check_same_thread=False, timeout=10)
    for attempt in range(attempts):
        try:
            db.execute("PRAGMA journal_mode=WAL")
            db.execute("PRAGMA synchronous=NORMAL")
            db.execute("PRAGMA foreign_keys=ON")
            migrate(db)
            return db
        except sqlite3.OperationalError as exc:
            if ("locked" not in str(exc) and "busy" not in str(exc)) or attempt == attempts - 1:
                db.close()
                raise
            time.sleep(0.05)
    raise AssertionError("unreachable")


def migrate(db: sqlite3.Connection) -> None:
    """Run the migrations this database has not seen, in order, each in a transaction."""
    done = db.execute("PRAGMA user_version").fetchone()[0]
    for number, (_name, script) in enumerate(MIGRATIONS[done:], start=done + 1):
        db.execute("BEGIN IMMEDIATE")
        try:
            current = db.execute("PRAGMA user_version").fetchone()[0]
            if current >= number:  # another process got there first
                db.execute("ROLLBACK")
                continue
            for statement in filter(str.strip, script.split(";")):
                db.execute(statement)
            db.execute(f"PRAGMA user_version = {number}")
            db.execute("COMMIT")
        except BaseException:
            db.execute("ROLLBACK")
            raise
