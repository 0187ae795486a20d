"""Real store failures for tests: a trigger in the session database refuses some writes, as a
full disk or a body that cannot be encoded would."""

from __future__ import annotations

import sqlite3
from pathlib import Path

MARKER = "UNSAVABLE"


def refuse_marked_events(database: Path) -> None:
    """From now on, every event whose body contains MARKER fails to be written."""
    db = sqlite3.connect(database)
    try:
        db.execute(
            f"CREATE TRIGGER refuse_marked BEFORE INSERT ON events WHEN NEW.body LIKE '%{MARKER}%'"
            " BEGIN SELECT RAISE(ABORT, 'refused by the test'); END"
        )
        db.commit()
    finally:
        db.close()
