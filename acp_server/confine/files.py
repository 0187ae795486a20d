"""Opening files without races: the path that was checked is the path that is used.

A permission check looks at a path, then the tool touches it; in between, a command running
in the sandbox without a prompt can swap a file for a link (to `~/.bashrc`, to a key), and a
tool that opens the *name* again follows the new link. So the file tools resolve a path once
(`target`: every link and `..` resolved, the result checked), and from then on open that
resolved path with no link followed at any step: `openat2` with `RESOLVE_NO_SYMLINKS` where
the kernel has it (Linux 5.6+), else one `O_NOFOLLOW` step per folder from `/`. A path that
changed meanwhile fails to open, with a sentence saying so; it never leads elsewhere.

Reads refuse what is not a regular file without blocking (a FIFO is opened with `O_NONBLOCK`,
then `fstat` of the descriptor decides) and check the size before reading. Writes go to a
temporary file in the checked folder (its descriptor), then an atomic rename there: a link
swapped in at the file's name is replaced, never written through.

Instruction files and plans never follow a link into a place kept from commands
(`confine.secrets.is_secret`: keys, credentials, the agent's own data and configuration).
"""

from __future__ import annotations

import contextlib
import errno
import os
import secrets
import stat
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

NAME_MAX = 255  # bytes in one file or folder name (Linux, macOS)
PATH_MAX = 4096
_O_PATH = getattr(os, "O_PATH", os.O_RDONLY)
_O_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
_O_DIRECTORY = getattr(os, "O_DIRECTORY", 0)
_O_CLOEXEC = getattr(os, "O_CLOEXEC", 0)
_O_NONBLOCK = getattr(os, "O_NONBLOCK", 0)
_O_NOCTTY = getattr(os, "O_NOCTTY", 0)
_SYS_OPENAT2 = 437  # the same number on every Linux architecture (added in 5.6)
_RESOLVE_NO_MAGICLINKS, _RESOLVE_NO_SYMLINKS = 0x02, 0x04
_KINDS = (
    (stat.S_ISFIFO, "a FIFO (named pipe)"),
    (stat.S_ISSOCK, "a socket"),
    (stat.S_ISCHR, "a device"),
    (stat.S_ISBLK, "a device"),
)


class Refused(Exception):
    """The file cannot be used; the message says why, for the model and the user."""


class Missing(Refused):
    """Nothing is at the path (or a folder on the way is missing)."""


@dataclass(frozen=True)
class Target:
    """A path as the model named it and where it led when it was checked."""

    given: Path  # absolute, normalized; links not followed
    real: Path  # every link and `..` resolved: what is opened, with no link followed
    shown: Path  # `real`, under the root it was reached through (the editor's name for it)

    @property
    def through_link(self) -> bool:
        return self.shown != self.given


def target(given: Path, roots: tuple[Path, ...] = ()) -> Target:
    """Resolve `given` once; a name the system cannot take is refused in words."""
    text = str(given)
    if "\0" in text:
        raise Refused(f"The path {given!r} contains a NUL byte, which no file name can hold.")
    long = next((p for p in given.parts if len(os.fsencode(p)) > NAME_MAX), None)
    if long is not None:
        raise Refused(
            f"The name {long[:60]}… is {len(os.fsencode(long))} bytes long; file and folder "
            f"names are limited to {NAME_MAX} bytes. Choose a shorter name."
        )
    if len(os.fsencode(text)) >= PATH_MAX:
        raise Refused(f"The path is longer than the {PATH_MAX} bytes the system allows.")
    try:
        real = Path(os.path.realpath(given))
    except (OSError, ValueError) as exc:
        raise Refused(f"Cannot resolve {given}: {exc}") from exc
    return Target(given, real, _under_given_root(real, roots))


def _under_given_root(real: Path, roots: tuple[Path, ...]) -> Path:
    """`real` under the root as given when it is inside one (a root reached through a link,
    `/home -> var/home`, keeps the name the editor knows it by)."""
    for root in roots:
        base = Path(os.path.realpath(root))
        if real == base or base in real.parents:
            return root / real.relative_to(base)
    return real


# -- opening without links ---------------------------------------------------------------------


_OPENAT2_MACHINES = ("x86_64", "aarch64", "riscv64", "ppc64le", "s390x")
_state: dict[str, Any] = {}  # "call": libc's syscall, or None without openat2 (found at first use)


def _openat2_call() -> Any:
    """libc's `syscall`, or None where openat2 cannot be asked for (ctypes is imported here:
    ~3 ms that a session which never opens a file does not pay)."""
    if "call" not in _state:
        _state["call"] = None
        if sys.platform == "linux" and os.uname().machine in _OPENAT2_MACHINES:
            import ctypes

            class OpenHow(ctypes.Structure):
                _fields_ = (
                    ("flags", ctypes.c_uint64),
                    ("mode", ctypes.c_uint64),
                    ("resolve", ctypes.c_uint64),
                )

            _state["how"] = OpenHow
            with contextlib.suppress(OSError, AttributeError):
                _state["call"] = ctypes.CDLL(None, use_errno=True).syscall
    return _state["call"]


def _openat2(path: Path, flags: int, mode: int) -> int | None:
    """The descriptor, None when the kernel (or a seccomp filter) has no openat2."""
    call = _openat2_call()
    if call is None:
        return None
    import ctypes

    mode = mode if flags & os.O_CREAT else 0  # openat2 takes a mode only when creating
    how = _state["how"](flags | _O_CLOEXEC, mode, _RESOLVE_NO_SYMLINKS | _RESOLVE_NO_MAGICLINKS)
    fd = call(
        ctypes.c_long(_SYS_OPENAT2),
        ctypes.c_int(-100),  # AT_FDCWD; the path is absolute anyway
        ctypes.c_char_p(os.fsencode(path)),
        ctypes.byref(how),
        ctypes.c_size_t(ctypes.sizeof(how)),
    )
    if fd >= 0:
        return int(fd)
    code = ctypes.get_errno()
    if code in (errno.ENOSYS, errno.EPERM):
        _state["call"] = None
        return None
    raise OSError(code, os.strerror(code), str(path))


def _walk(path: Path, flags: int, mode: int) -> int:
    """Open `path` one step at a time from `/`, no step following a link."""
    parts = path.parts[1:]
    fd = os.open("/", _O_PATH | _O_DIRECTORY | _O_CLOEXEC)
    try:
        for part in parts[:-1]:
            step = os.open(part, _O_PATH | _O_DIRECTORY | _O_NOFOLLOW | _O_CLOEXEC, dir_fd=fd)
            os.close(fd)
            fd = step
        if not parts:
            return os.open("/", flags | _O_CLOEXEC)
        return os.open(parts[-1], flags | _O_NOFOLLOW | _O_CLOEXEC, mode, dir_fd=fd)
    finally:
        os.close(fd)


def open_exact(real: Path, flags: int, mode: int = 0o600) -> int:
    """A descriptor for `real` (absolute, links resolved) reached without following any
    link; OSError (ELOOP or ENOTDIR for a link met on the way) otherwise."""
    if not real.is_absolute():
        raise ValueError(f"not an absolute path: {real}")
    fd = _openat2(real, flags, mode)
    return fd if fd is not None else _walk(real, flags, mode)


def _why(exc: OSError, path: Path) -> Refused:
    if exc.errno in (errno.ENOENT,):
        return Missing(f"File not found: {path}")
    if exc.errno in (errno.ELOOP, errno.ENOTDIR, errno.EXDEV):
        return Refused(
            f"{path} cannot be reached without following a link: a part of it is a link now, "
            "or not a folder (it changed after it was checked). Nothing was touched; look at "
            "it again (list_directory) before retrying."
        )
    if exc.errno == errno.ENAMETOOLONG:
        return Refused(f"The name of {path} is longer than the system allows.")
    return Refused(f"Cannot open {path}: {exc.strerror or exc}")


def kind_of(info: os.stat_result) -> str | None:
    """What a non-regular file is, in words; None for a regular file."""
    if stat.S_ISREG(info.st_mode):
        return None
    if stat.S_ISDIR(info.st_mode):
        return "a directory"
    return next((word for test, word in _KINDS if test(info.st_mode)), "not a regular file")


# -- reading ------------------------------------------------------------------------------------


class Opened:
    """A regular file opened for reading: its descriptor and size."""

    def __init__(self, fd: int, size: int, path: Path) -> None:
        self.fd, self.size, self.path = fd, size, path

    def head(self, count: int) -> bytes:
        return os.pread(self.fd, count, 0)

    def read(self, limit: int, what: str = "a file") -> bytes:
        """The whole file; refused, before reading, when it has more than `limit` bytes."""
        if self.size > limit:
            raise Refused(too_large(self.path, self.size, limit, what))
        chunks: list[bytes] = []
        got = 0
        while got <= limit:
            chunk = os.read(self.fd, min(1 << 20, limit + 1 - got))
            if not chunk:
                break
            chunks.append(chunk)
            got += len(chunk)
        if got > limit:  # it grew after the check
            raise Refused(too_large(self.path, got, limit, what))
        return b"".join(chunks)


def too_large(path: Path, size: int, limit: int, what: str) -> str:
    return (
        f"{path} has {_mb(size)}, more than the {_mb(limit)} {what} may have; it was not "
        "read. Search it with grep, or read a part with run_command (head, tail, sed -n)."
    )


def _mb(size: int) -> str:
    return f"{size / 1024 / 1024:,.1f} MB" if size >= 1024 * 1024 else f"{size:,} bytes"


@contextlib.contextmanager
def open_regular(real: Path) -> Iterator[Opened]:
    """`real` opened for reading, no link followed, never blocking: anything but a regular
    file (a directory, a FIFO, a device, a socket) is refused in words."""
    try:
        fd = open_exact(real, os.O_RDONLY | _O_NONBLOCK | _O_NOCTTY)
    except OSError as exc:
        if exc.errno == errno.ENXIO:  # a socket, or a FIFO's other end on some systems
            raise Refused(f"{real} is not a regular file; not read.") from exc
        raise _why(exc, real) from exc
    try:
        info = os.fstat(fd)
        kind = kind_of(info)
        if kind == "a directory":
            raise Refused(f"{real} is a directory, not a file; use list_directory.")
        if kind is not None:
            raise Refused(f"{real} is {kind}, not a regular file; not read.")
        yield Opened(fd, info.st_size, real)
    finally:
        os.close(fd)


def read_bytes(real: Path, limit: int, what: str = "a file") -> bytes:
    with open_regular(real) as opened:
        return opened.read(limit, what)


def exists(real: Path) -> os.stat_result | None:
    """What is at `real` now (the last step not followed); None when nothing is there."""
    try:
        fd = open_exact(real.parent, _O_PATH | _O_DIRECTORY)
    except OSError as exc:
        if exc.errno == errno.ENOENT:
            return None
        raise _why(exc, real) from exc
    try:
        return os.stat(real.name, dir_fd=fd, follow_symlinks=False)
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise _why(exc, real) from exc
    finally:
        os.close(fd)


def same_place(shown: Path, real: Path) -> None:
    """Before the editor is given `shown` (it follows links): refused unless `shown` still
    leads to `real` and `real` is still reached without a link."""
    try:
        now = Path(os.path.realpath(shown))
    except (OSError, ValueError) as exc:
        raise _why(OSError(errno.ELOOP, str(exc)), shown) from exc
    if now != real:
        raise _why(OSError(errno.ELOOP, "changed"), shown)
    with contextlib.suppress(FileNotFoundError):
        try:
            fd = open_exact(real.parent, _O_PATH | _O_DIRECTORY)
        except OSError as exc:
            raise _why(exc, shown) from exc
        os.close(fd)


# -- writing ------------------------------------------------------------------------------------


def _folder(real: Path, make: bool) -> int:
    """A descriptor of the folder `real`, made (one step at a time, no link followed) when
    missing and `make`."""
    try:
        return open_exact(real, _O_PATH | _O_DIRECTORY)
    except FileNotFoundError:
        if not make or real.parent == real:
            raise
    parent = _folder(real.parent, make)
    try:
        with contextlib.suppress(FileExistsError):
            os.mkdir(real.name, 0o777, dir_fd=parent)
        return os.open(real.name, _O_PATH | _O_DIRECTORY | _O_NOFOLLOW | _O_CLOEXEC, dir_fd=parent)
    finally:
        os.close(parent)


def write_atomic(real: Path, data: bytes, make_folders: bool = True) -> None:
    """Replace the file at `real` (links resolved when checked) with `data`: written to a
    temporary file in the checked folder, then renamed over the name there. The file keeps
    its permissions; a link that appeared at the name meanwhile is replaced, not followed."""
    try:
        folder = _folder(real.parent, make_folders)
    except OSError as exc:
        raise _why(exc, real.parent) from exc
    tmp = f".acp-tmp-{secrets.token_hex(6)}"
    try:
        _write_in(folder, real.name, tmp, data)
    except OSError as exc:
        with contextlib.suppress(OSError):
            os.unlink(tmp, dir_fd=folder)
        if exc.errno == errno.EISDIR:
            raise Refused(f"{real} is a directory, not a file.") from exc
        raise Refused(f"Cannot write {real}: {exc.strerror or exc}") from exc
    finally:
        os.close(folder)


def _write_in(folder: int, name: str, tmp: str, data: bytes) -> None:
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | _O_NOFOLLOW | _O_CLOEXEC
    fd = os.open(tmp, flags, 0o666, dir_fd=folder)
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view) :]
        with contextlib.suppress(FileNotFoundError):
            old = os.stat(name, dir_fd=folder, follow_symlinks=False)
            if stat.S_ISREG(old.st_mode):
                os.fchmod(fd, old.st_mode & 0o7777)
    finally:
        os.close(fd)
    os.replace(tmp, name, src_dir_fd=folder, dst_dir_fd=folder)


# -- where secrets are --------------------------------------------------------------------------
