"""The private temp dirs confined commands write in (`$TMPDIR` inside the sandbox): made,
locked, removed, and those of servers that no longer run swept away.

A session's folder is removed when the session closes or the server exits normally; a server
that is killed (SIGKILL: some editors stop their agent that way) or crashes leaves it behind,
and /tmp filled up with thousands of them. So each folder `acp-sandbox-XXXX` has a lock file
beside it, `acp-sandbox-XXXX.lock` (made first, O_EXCL and no link followed, mode 0600), on
which its server holds an exclusive `flock` for as long as the folder exists: the kernel lets
go of it when the process ends, however it ends. The first folder a process makes starts one
sweep, in a thread of its own, of the other folders in the same temp dir.

The sweep trusts nothing in the temp dir (shared by every user; each folder writable by the
commands that ran in it): it looks only at entries named like ours that belong to this user,
never follows a link (names are resolved against the temp dir's descriptor, `lstat`'d, and
checked again right before removal; `shutil.rmtree` refuses a link and follows none inside),
and removes a folder only when
- its lock file is a regular file of ours that nobody holds (its server is gone), or
- it has no lock file (made by a version before this one) and is untouched for a day.
It looks at no more than `LIMIT` such entries and stops after `BUDGET` seconds of its own
thread's CPU time (a folder being removed is finished first; CPU time, not the clock, so that a
busy machine, which pauses the thread, does not end it before it has looked at anything): what
is left is for the next server.
"""

from __future__ import annotations

import logging
import os
import stat
import threading
import time
from pathlib import Path

PREFIX = "acp-sandbox-"
LOCK = ".lock"
LIMIT = 256  # entries named like ours looked at per sweep
BUDGET = 0.05  # seconds of CPU a sweep may take (it runs beside the session's first command)
LEGACY_AGE = 24 * 3600.0  # a folder without a lock file: removed once untouched this long
log = logging.getLogger(__name__)

_HELD: dict[Path, int] = {}  # this process's folders -> their locked descriptors
_STATE = threading.Lock()
_SWEPT: dict[str, threading.Thread] = {}  # the temp dirs this process has started sweeping


def make(parent: str | None = None) -> Path:
    """A new private folder (mode 0700) in `parent` (the system's temp dir when None), locked
    for as long as it exists; the first one in a temp dir starts its sweep."""
    import tempfile  # here: with bz2, lzma and random it costs a session ~3 ms at import

    parent = parent if parent is not None else tempfile.gettempdir()
    try:
        import fcntl  # noqa: F401  (no flock, as on Windows: a plain folder, and no sweep)
    except ImportError:
        return Path(tempfile.mkdtemp(prefix=PREFIX, dir=parent))
    folder = _make_locked(Path(parent))
    with _STATE:
        if parent not in _SWEPT:
            sweeper = threading.Thread(target=_sweep_logged, args=(Path(parent),), daemon=True)
            sweeper.name = "scratch-sweep"
            _SWEPT[parent] = sweeper
            sweeper.start()
    return folder


def _make_locked(parent: Path) -> Path:
    """A folder under a new name whose lock file is held (`_claim`)."""
    for _ in range(100):
        name = PREFIX + os.urandom(6).hex()
        fd = _claim(parent, name)
        if fd is not None:
            with _STATE:
                _HELD[parent / name] = fd
            return parent / name
    raise FileExistsError(f"no new temp folder could be made in {parent}: every name was taken")


def _claim(parent: Path, name: str) -> int | None:
    """Make the lock file, hold it, then make the folder: the descriptor holding the lock, or
    None when the name is taken or a sweep took the lock first. The lock is held before the
    folder exists, so no folder of a live server is ever without a held lock (a sweep that
    takes a lock file in between unlinks it, which is seen here)."""
    import fcntl

    lock = parent / (name + LOCK)
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
    try:
        fd = os.open(lock, flags, 0o600)
    except FileExistsError:
        return None
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        if not _same(os.fstat(fd), os.lstat(lock)):
            raise FileNotFoundError(lock)  # unlinked by a sweep before our flock
        os.mkdir(parent / name, 0o700)
    except BaseException as exc:
        _unlink_if_held(lock, fd)
        os.close(fd)
        if isinstance(exc, BlockingIOError | FileNotFoundError | FileExistsError):
            return None
        raise
    return fd


def remove(folder: Path) -> None:
    """Remove a folder `make` made (at session close) and then its lock file, letting go of
    the lock last: a sweep never sees the folder without a held lock."""
    import shutil

    with _STATE:
        fd = _HELD.pop(folder, None)
    shutil.rmtree(folder, ignore_errors=True)
    if fd is not None:
        _unlink_if_held(folder.with_name(folder.name + LOCK), fd)
        os.close(fd)


def sweep(parent: Path, limit: int = LIMIT, budget: float = BUDGET) -> list[str]:
    """Remove the folders in `parent` left by servers that no longer run (see the module's
    docstring for which); returns their names. An entry it cannot look at is skipped."""
    removed: list[str] = []
    try:
        dir_fd = os.open(parent, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    except OSError:
        return removed
    try:
        deadline = time.thread_time() + budget
        seen: set[str] = set()
        with os.scandir(dir_fd) as entries:
            for entry in entries:
                if time.thread_time() > deadline or len(seen) >= limit:
                    break
                name = entry.name.removesuffix(LOCK)
                if not name.startswith(PREFIX) or name in seen:
                    continue
                seen.add(name)
                try:
                    if _sweep_one(dir_fd, name):
                        removed.append(name)
                except OSError:
                    continue  # gone meanwhile, or not ours to touch
    finally:
        os.close(dir_fd)
    return removed


def _sweep_logged(parent: Path) -> None:
    """`sweep`, in its thread: what it removed, or why it stopped, goes to the log."""
    try:
        removed = sweep(parent)
    except Exception:  # a platform without a call it needs: the folders stay, nothing breaks
        log.exception("sweeping the temp folders of stopped servers in %s failed", parent)
        return
    if removed:
        log.info("removed %d temp folders of stopped servers from %s", len(removed), parent)


def _sweep_one(dir_fd: int, name: str) -> bool:
    """Remove the folder `name` (and its lock file) if it is ours and its server is gone;
    True when a folder was removed."""
    import fcntl

    flags = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC  # a FIFO never blocks
    try:
        folder: os.stat_result | None = os.lstat(name, dir_fd=dir_fd)
    except FileNotFoundError:
        folder = None  # a lock file alone: its server was killed while removing its folder
    if folder is not None and not (stat.S_ISDIR(folder.st_mode) and _ours(folder)):
        return False  # a link, a FIFO, a file, another user's folder: not ours to judge
    try:
        fd = os.open(name + LOCK, flags, dir_fd=dir_fd)
    except FileNotFoundError:  # from before lock files: by its age
        if folder is None or time.time() - folder.st_mtime < LEGACY_AGE:
            return False
        return _rmtree(dir_fd, name, folder)
    try:
        held = os.fstat(fd)
        if not (stat.S_ISREG(held.st_mode) and _ours(held)):
            return False
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return False  # its server runs
        if not _same(held, os.lstat(name + LOCK, dir_fd=dir_fd)):
            return False  # removed and made again meanwhile: not the file we hold
        if folder is not None and not _rmtree(dir_fd, name, folder):
            return False
        os.unlink(name + LOCK, dir_fd=dir_fd)
        return folder is not None
    finally:
        os.close(fd)


def _ours(found: os.stat_result) -> bool:
    return found.st_uid == os.geteuid()


def _rmtree(dir_fd: int, name: str, seen: os.stat_result) -> bool:
    """Remove the folder if it is still the one looked at (no link swapped in since)."""
    import shutil

    if not _same(seen, os.lstat(name, dir_fd=dir_fd)):
        return False
    shutil.rmtree(name, ignore_errors=True, dir_fd=dir_fd)
    return True


def _unlink_if_held(lock: Path, fd: int) -> None:
    """Unlink the lock file at `lock` if it is still the one `fd` holds."""
    try:
        if _same(os.fstat(fd), os.lstat(lock)):
            os.unlink(lock)
    except OSError:
        pass


def _same(a: os.stat_result, b: os.stat_result) -> bool:
    return (a.st_dev, a.st_ino) == (b.st_dev, b.st_ino)
