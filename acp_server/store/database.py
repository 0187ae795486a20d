"""The durable session store: SQLite in WAL mode, one append per history event.

Every session is a row in `sessions` and an ordered log in `events`. An event is a history
message (what the model will see again, "message"), updates that were shown to the editor (what
`session/load` replays, "shown"), the end of a turn ("turn") or a cut of the history back to a
length ("truncate", after a refusal); `transcript.py` writes and reads them. Each write is its
own transaction, made on one writer thread so the event loop never waits on the disk. A failed
write is rolled back and logged, and the writer goes on (one body that could not be encoded once
left a transaction open, and every later write of every session failed unseen).
`flush(session_id)` waits until everything queued is done and raises `SaveFailed` if a write of
that session failed; the session calls it before answering a prompt, so whatever the client was
told is on disk, or it is told it is not.

The tables and their migrations are in `store_schema.py`. Images are stored once, by content
hash, in `blobs`.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import json
import logging
import queue
import sqlite3
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from acp_server.store.schema import connect

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class SessionRow:
    id: str
    cwd: str
    additional_dirs: list[str]
    title: str | None
    created_at: float
    updated_at: float
    state: dict[str, Any]

    @property
    def updated_iso(self) -> str:
        return iso(self.updated_at)


@dataclass(frozen=True)
class Event:
    seq: int
    kind: str  # "message" | "shown" | "turn" | "truncate" | "history"
    body: Any


def iso(stamp: float) -> str:
    """ISO 8601 in UTC, to the millisecond (two updates within a second stay ordered)."""
    millis = int(stamp * 1000) % 1000
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(stamp)) + f".{millis:03d}Z"


_STOP = object()


class SaveFailed(Exception):
    """Writes of one session could not be committed; the message says which and why."""

    def __init__(self, session_id: str, reasons: list[str]) -> None:
        first = reasons[0] if reasons else "unknown reason"
        super().__init__(f"{len(reasons)} write(s) of session {session_id} failed, first: {first}")
        self.session_id = session_id
        self.reasons = reasons


@dataclass(frozen=True)
class _Write:
    session_id: str | None  # whose flush reports a failure (None: only logged)
    what: str
    work: Callable[[sqlite3.Connection], object]


@dataclass(frozen=True)
class _Barrier:
    session_id: str | None
    done: Callable[[list[str]], None]  # called with the failures it covers


@contextlib.contextmanager
def _transaction(db: sqlite3.Connection) -> Iterator[None]:
    """BEGIN … COMMIT, rolled back on any failure (also a failed COMMIT), so the connection
    is always left outside a transaction for the next write."""
    db.execute("BEGIN")
    try:
        yield
        db.execute("COMMIT")
    except BaseException:
        if db.in_transaction:
            db.execute("ROLLBACK")
        raise


class Store:
    """Reads run on the caller's thread (short, indexed); writes go through one thread."""

    def __init__(self, path: Path) -> None:
        # Opening the database (and running migrations) happens on the writer thread and at
        # the first read, not here: `session/new` creates the store and must answer fast.
        self.path = path
        self._db: sqlite3.Connection | None = None
        self._read_db: sqlite3.Connection | None = None
        self._jobs: queue.SimpleQueue[Any] = queue.SimpleQueue()
        self._seq: dict[str, int] = {}
        self._failed: dict[str, list[str]] = {}  # only touched by the writer thread
        self._lock = threading.Lock()
        self._opened = threading.Event()
        self._thread = threading.Thread(target=self._write_loop, name="store-writer", daemon=True)
        self._thread.start()

    # ----- the writer thread -----------------------------------------------------------------

    def _write_loop(self) -> None:
        opened: sqlite3.Connection | BaseException
        try:
            opened = self._db = connect(self.path)
        except Exception as exc:
            log.error("cannot open the session store %s: %s", self.path, exc)
            opened = exc
        finally:
            self._opened.set()
        while True:
            job = self._jobs.get()
            if job is _STOP:
                return
            if isinstance(job, _Barrier):
                job.done(self._failed.pop(job.session_id, []) if job.session_id else [])
            elif isinstance(opened, BaseException):
                self._fail(job, opened)  # logged once, when opening failed
            else:
                self._write(opened, job)

    def _write(self, db: sqlite3.Connection, job: _Write) -> None:
        try:
            with _transaction(db):
                job.work(db)
        except Exception as exc:  # the session's flush reports it; the writer goes on
            log.error("could not save %s of session %s: %s", job.what, job.session_id, exc)
            self._fail(job, exc)

    def _fail(self, job: _Write, exc: BaseException) -> None:
        if job.session_id is not None:
            self._failed.setdefault(job.session_id, []).append(f"{job.what}: {exc}")

    def _submit(
        self, session_id: str | None, what: str, work: Callable[[sqlite3.Connection], object]
    ) -> None:
        self._jobs.put(_Write(session_id, what, work))

    async def flush(self, session_id: str | None = None) -> None:
        """Wait until every write queued so far is done. With a session id, raise `SaveFailed`
        if any write of that session failed since its previous flush (each failure is
        reported once; other sessions' failures are theirs)."""
        loop = asyncio.get_running_loop()
        fut: asyncio.Future[list[str]] = loop.create_future()

        def done(failures: list[str]) -> None:
            loop.call_soon_threadsafe(_settle, fut, failures)

        self._jobs.put(_Barrier(session_id, done))
        failures = await fut
        if failures and session_id is not None:
            raise SaveFailed(session_id, failures)

    def close(self) -> None:
        self._jobs.put(_STOP)
        self._thread.join(timeout=5)
        for db in (self._db, self._read_db):
            if db is not None:
                with contextlib.suppress(sqlite3.Error):
                    db.close()

    # ----- writes ------------------------------------------------------------------------------

    def create(self, row: SessionRow) -> None:
        def work(db: sqlite3.Connection) -> None:
            db.execute(
                "INSERT INTO sessions (id, cwd, additional_dirs, title, created_at, updated_at,"
                " state) VALUES (?, ?, ?, ?, ?, ?, ?)",
                (
                    row.id,
                    row.cwd,
                    json.dumps(row.additional_dirs),
                    row.title,
                    row.created_at,
                    row.updated_at,
                    json.dumps(row.state),
                ),
            )

        with self._lock:
            self._seq[row.id] = 0
        self._submit(row.id, "the new session", work)

    def append(self, session_id: str, kind: str, body: Any) -> None:
        """Append one event (its own transaction) and touch the session's `updated_at`."""
        with self._lock:
            seq = self._seq.get(session_id)
            if seq is None:
                seq = self._last_seq(session_id)
            self._seq[session_id] = seq + 1
        text = json.dumps(body, ensure_ascii=False, separators=(",", ":"))
        now = time.time()

        def work(db: sqlite3.Connection) -> None:
            db.execute(
                "INSERT INTO events (session_id, seq, kind, body) VALUES (?, ?, ?, ?)",
                (session_id, seq + 1, kind, text),
            )
            db.execute("UPDATE sessions SET updated_at = ? WHERE id = ?", (now, session_id))

        self._submit(session_id, f"a {kind} event", work)

    def update(self, session_id: str, *, title: str | None = None, **state: Any) -> None:
        """Set the title and/or merge keys into the session's state (mode, model, …)."""
        now = time.time()

        def work(db: sqlite3.Connection) -> None:
            if title is not None:
                db.execute("UPDATE sessions SET title = ? WHERE id = ?", (title, session_id))
            if state:
                found = db.execute("SELECT state FROM sessions WHERE id = ?", (session_id,))
                row = found.fetchone()
                merged = {**(json.loads(row[0]) if row else {}), **state}
                db.execute(
                    "UPDATE sessions SET state = ? WHERE id = ?", (json.dumps(merged), session_id)
                )
            db.execute("UPDATE sessions SET updated_at = ? WHERE id = ?", (now, session_id))

        self._submit(session_id, "the title or state", work)

    def delete(self, session_id: str) -> None:
        """The session, and its subagents' sessions (marked with their parent in `state`)."""
        sql = "UPDATE sessions SET deleted = 1 WHERE id = ? OR json_extract(state, '$.parent') = ?"
        self._submit(session_id, "the deletion", lambda db: db.execute(sql, (session_id,) * 2))

    def put_blob(self, data: str, session_id: str | None = None) -> str:
        """Store a large value (an image's base64) once, for `session_id`; returns its key."""
        key = hashlib.sha256(data.encode("ascii", "replace")).hexdigest()
        self._submit(
            session_id,
            "an image",
            lambda db: db.execute(
                "INSERT OR IGNORE INTO blobs (hash, data) VALUES (?, ?)", (key, data)
            ),
        )
        return key

    # ----- reads -------------------------------------------------------------------------------

    def _reader(self) -> sqlite3.Connection:
        if self._read_db is None:
            self._opened.wait(15)  # the writer creates and migrates the database first
            self._read_db = connect(self.path)
        return self._read_db

    def _last_seq(self, session_id: str) -> int:
        row = (
            self._reader()
            .execute("SELECT COALESCE(MAX(seq), 0) FROM events WHERE session_id = ?", (session_id,))
            .fetchone()
        )
        return int(row[0])

    def get(self, session_id: str) -> SessionRow | None:
        row = (
            self._reader()
            .execute(
                "SELECT id, cwd, additional_dirs, title, created_at, updated_at, state"
                " FROM sessions WHERE id = ? AND deleted = 0",
                (session_id,),
            )
            .fetchone()
        )
        return _row(row) if row else None

    def events(self, session_id: str) -> Iterator[Event]:
        cursor = self._reader().execute(
            "SELECT seq, kind, body FROM events WHERE session_id = ? ORDER BY seq", (session_id,)
        )
        for seq, kind, body in cursor:
            yield Event(seq, kind, json.loads(body))

    def blob(self, key: str) -> str | None:
        row = self._reader().execute("SELECT data FROM blobs WHERE hash = ?", (key,)).fetchone()
        return str(row[0]) if row else None

    def list(
        self,
        cwd: str | None = None,
        after: tuple[float, str] | None = None,
        limit: int = 50,
        *,
        prompted_only: bool = False,
    ) -> list[SessionRow]:
        """Newest first; `after` is the (updated_at, id) of the last row of the previous page.
        `prompted_only` leaves out sessions without a message (never prompted). A subagent's
        session is never listed: it is shown with its parent's."""
        sql = (
            "SELECT id, cwd, additional_dirs, title, created_at, updated_at, state FROM sessions"
            " WHERE deleted = 0 AND json_extract(state, '$.parent') IS NULL"  # no subagents
        )
        if prompted_only:
            sql += (
                " AND EXISTS (SELECT 1 FROM events"
                " WHERE events.session_id = sessions.id AND events.kind = 'message')"
            )
        args: list[Any] = []
        if cwd is not None:
            sql += " AND cwd = ?"
            args.append(cwd)
        if after is not None:
            sql += " AND (updated_at < ? OR (updated_at = ? AND id < ?))"
            args += [after[0], after[0], after[1]]
        sql += " ORDER BY updated_at DESC, id DESC LIMIT ?"
        args.append(limit)
        return [_row(r) for r in self._reader().execute(sql, args)]

    def message_count(self, session_id: str) -> int:
        row = (
            self._reader()
            .execute(
                "SELECT COUNT(*) FROM events WHERE session_id = ? AND kind = 'message'",
                (session_id,),
            )
            .fetchone()
        )
        return int(row[0])


def _row(row: tuple[Any, ...]) -> SessionRow:
    return SessionRow(
        id=row[0],
        cwd=row[1],
        additional_dirs=json.loads(row[2]),
        title=row[3],
        created_at=row[4],
        updated_at=row[5],
        state=json.loads(row[6]),
    )


def _settle(fut: asyncio.Future[list[str]], failures: list[str]) -> None:
    if not fut.done():
        fut.set_result(failures)
