"""The process side of the Landlock launcher (`landlock_exec`): namespaces, capabilities, the
seccomp filter and the namespace's first process. Standard library only and nothing of the
package: the launcher, run as `python -I -S`, imports it from its own folder.

- `namespaces`: a PID and a mount namespace (in a user namespace of its own when not root, or
  as root where the container refuses a plain one), so that nothing the command starts
  outlives it, `.git` can be bound read-only (`read_only_binds`) and /dev/shm is private.
- `drop_capabilities`: every set emptied, so root inside owns its files and nothing more.
- `install_filter`: the seccomp filter of `seccomp.py`.
- `run_as_init`: the first process of the PID namespace runs the command in a new session and
  exits with it; the kernel then ends whatever is left in the namespace.
"""

from __future__ import annotations

import ctypes
import os
import signal
import sys
from collections.abc import Callable

PR_SET_PDEATHSIG, PR_CAPBSET_DROP, PR_SET_SECCOMP, PR_SET_NO_NEW_PRIVS = 1, 24, 22, 38
PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, SECCOMP_MODE_FILTER = 47, 4, 2
CAPABILITY_VERSION_3 = 0x20080522
CLONE_NEWNS, CLONE_NEWUSER, CLONE_NEWPID = 0x00020000, 0x10000000, 0x20000000
MS_RDONLY, MS_NOSUID, MS_NODEV, MS_NOEXEC = 1, 2, 4, 8
MS_REMOUNT, MS_BIND, MS_REC, MS_PRIVATE = 32, 4096, 16384, 1 << 18
# Ignored by every Python process, and an ignored signal stays ignored across exec: a command
# would get EPIPE errors where a closed pipe ends it (`yes | head -1`).
PYTHON_IGNORES = (signal.SIGPIPE, signal.SIGXFSZ)
SECCOMP = os.path.join(os.path.dirname(os.path.abspath(__file__)), "seccomp.py")


class CapHeader(ctypes.Structure):
    _fields_ = [("version", ctypes.c_uint32), ("pid", ctypes.c_int)]


class CapData(ctypes.Structure):
    _fields_ = [(name, ctypes.c_uint32) for name in ("effective", "permitted", "inheritable")]


class SockFprog(ctypes.Structure):
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]


_libc = ctypes.CDLL(None, use_errno=True)


def prctl(option: int, *args: object) -> int:
    values = [ctypes.c_ulong(a) if isinstance(a, int) else a for a in args]
    values += [ctypes.c_ulong(0)] * (4 - len(values))  # the kernel checks unused ones are 0
    return int(_libc.prctl(option, *values))


# --- namespaces ---------------------------------------------------------------------------


def namespaces() -> tuple[bool, bool]:
    """(a PID namespace for the next child, a mount namespace for this process): both where
    the kernel gives them, else a mount namespace alone, else neither. A mount namespace made
    here lets nothing of its mounts reach the host's."""
    for flags in (CLONE_NEWPID | CLONE_NEWNS, CLONE_NEWNS):
        if _libc.unshare(flags) == 0 or _own_user(flags):
            try:
                _mount(None, "/", MS_REC | MS_PRIVATE)
            except OSError:
                return bool(flags & CLONE_NEWPID), False
            return bool(flags & CLONE_NEWPID), True
    return False, False


def _own_user(flags: int) -> bool:
    """`flags`' namespaces inside a user namespace where this process has the same ids as
    outside, so that files keep their owners; False where the kernel refuses it."""
    uid, gid = os.getuid(), os.getgid()
    if _libc.unshare(CLONE_NEWUSER | flags) != 0:
        return False
    try:
        for name, text in (("setgroups", "deny"), ("uid_map", f"{uid} {uid} 1"),
                           ("gid_map", f"{gid} {gid} 1")):  # fmt: skip
            with open(f"/proc/self/{name}", "w", encoding="ascii") as out:
                out.write(text)
    except OSError:
        return False
    return True


def read_only_binds(paths: list[str], mount_namespace: bool) -> bool:
    """Bind each of `paths` read-only over itself in this process's mount namespace: what
    Landlock cannot say, that `.git` stays read-only in a writable root. Landlock then forbids
    the command to unmount them, and a mount point cannot be renamed or removed. False where
    there is no mount namespace or the kernel refuses a mount (a container without the right,
    user namespaces turned off): the command then runs with the folders writable, and the
    agent's own git (own_git.py) is what still holds."""
    if not paths:
        return True
    if not mount_namespace:
        return False
    try:
        for path in paths:
            _mount(path, path, MS_BIND | MS_REC)
            kept = os.statvfs(path).f_flag & (MS_NOSUID | MS_NODEV | MS_NOEXEC)  # locked ones
            _mount(None, path, MS_BIND | MS_REMOUNT | MS_RDONLY | kept)
    except OSError:
        return False
    return True


def private_shm() -> bool:
    """An empty /dev/shm of the command's own (POSIX shared memory and semaphores: Python's
    multiprocessing needs them), none of the host's files in it; False when it cannot be
    mounted: the command then has no /dev/shm to write."""
    flags = ctypes.c_ulong(MS_NOSUID | MS_NODEV | MS_NOEXEC)
    return int(_libc.mount(b"tmpfs", b"/dev/shm", b"tmpfs", flags, b"mode=1777")) == 0


def _mount(source: str | None, target: str, flags: int) -> None:
    src = source.encode() if source is not None else None
    if _libc.mount(src, target.encode(), None, ctypes.c_ulong(flags), None) != 0:
        raise OSError(ctypes.get_errno(), f"mount {target}")


# --- capabilities and the seccomp filter ------------------------------------------------


def drop_capabilities() -> None:
    """Empty every capability set (a user has none to drop: the calls that need one are
    refused and the sets stay empty)."""
    prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL)
    for cap in range(64):
        if prctl(PR_CAPBSET_DROP, cap) != 0 and ctypes.get_errno() == 22:  # EINVAL: no such
            break
    header, data = CapHeader(CAPABILITY_VERSION_3, 0), (CapData * 2)()
    if _libc.capset(ctypes.byref(header), ctypes.byref(data)) != 0:
        raise OSError(ctypes.get_errno(), "capset")


def install_filter(policy: dict[str, object], version: int) -> None:
    """The seccomp filter for this level (after no-new-privileges): the one the agent compiled
    (`seccomp`, in hex: compiling it here costs ~3 ms), else built from `seccomp.py`."""
    given = policy.get("seccomp")
    if isinstance(given, str):
        install(bytes.fromhex(given))
        return
    with open(SECCOMP, encoding="utf-8") as f:
        source = f.read()
    namespace: dict[str, object] = {"__name__": "acp_seccomp", "__file__": SECCOMP}
    exec(compile(source, SECCOMP, "exec"), namespace)
    build: Callable[..., bytes] = namespace["program"]  # type: ignore[assignment]
    install(build(ip=ip_rule(bool(policy.get("network")), version), unix=False))


def ip_rule(network: bool, version: int) -> str:
    """What the seccomp filter lets through of IP (`seccomp.program`'s `ip`): everything with
    the network on; with it off only TCP, whose bind and connect Landlock then refuses (ABI 4),
    or nothing where Landlock cannot refuse them."""
    return "all" if network else ("tcp" if version >= 4 else "none")


def install(compiled: bytes) -> None:
    """Install a compiled seccomp filter on this process (no-new-privileges must be set)."""
    buffer = ctypes.create_string_buffer(compiled, len(compiled))
    prog = SockFprog(len(compiled) // 8, ctypes.addressof(buffer))
    if prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, ctypes.pointer(prog)) != 0:
        raise OSError(ctypes.get_errno(), "prctl(PR_SET_SECCOMP)")


# --- running the command ------------------------------------------------------------------


def run_as_init(command: list[str]) -> int:
    """Fork the namespace's first process, which runs `command` in a new session and exits
    with it (the kernel then kills what is left in the namespace); wait for it here, passing
    on the signals that end a command (the agent sends them to this process's group)."""
    alive_r, alive_w = os.pipe()  # closes when this process ends, however it ends
    first = os.fork()
    if first == 0:
        try:
            os.close(alive_w)
            prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
            os.set_blocking(alive_r, False)
            try:
                if os.read(alive_r, 1) == b"":
                    os._exit(137)  # the launcher ended before the line above
            except BlockingIOError:
                pass
            os.setsid()
            # As the namespace's first process it gets only the signals it handles: Python's
            # SIGINT handler would end it (and the namespace) at the launcher's forwarded ^C.
            signal.signal(signal.SIGINT, signal.SIG_DFL)
            os._exit(_reap(_spawn(command)))
        finally:
            os._exit(126)

    def forward(sig: int, _frame: object) -> None:
        try:  # noqa: SIM105 (contextlib costs this launcher's start ~1 ms)
            os.killpg(first, sig)
        except OSError:
            pass

    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP, signal.SIGQUIT):
        signal.signal(sig, forward)
    _, status = os.waitpid(first, 0)
    return _code(status)


def run_in_place(command: list[str]) -> int:
    """Without a PID namespace: become the command, in a new session where this process is not
    already a group's leader (the agent starts it in a session of its own)."""
    try:  # noqa: SIM105
        os.setsid()
    except OSError:
        pass
    for sig in PYTHON_IGNORES:
        signal.signal(sig, signal.SIG_DFL)
    try:
        os.execvp(command[0], command)
    except OSError as exc:
        sys.stderr.write(f"acp-server: cannot run {command[0]}: {exc.strerror}\n")
    return 127


def _spawn(command: list[str]) -> int:
    try:  # posix_spawn: no copy of this interpreter made to run it
        return os.posix_spawnp(command[0], command, os.environ, setsigdef=PYTHON_IGNORES)
    except OSError as exc:
        sys.stderr.write(f"acp-server: cannot run {command[0]}: {exc.strerror}\n")
        os._exit(127)


def _reap(child: int) -> int:
    """As the namespace's first process: reap whatever ends (orphans are given to it) until
    `child` does; its exit code, 128 + N for a signal N."""
    while True:
        pid, status = os.wait()
        if pid == child:
            return _code(status)


def _code(status: int) -> int:
    code = os.waitstatus_to_exitcode(status)
    return 128 - code if code < 0 else code
