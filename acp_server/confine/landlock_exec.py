"""Run a command under Landlock: the sandbox where bubblewrap is not installed (Linux >= 5.13).

Started as a script (`python -I -S landlock_exec.py POLICY -- ARGV...`), so it imports nothing
of the package and costs only a bare interpreter's start: it reads the policy (JSON: the
directories that may be written, the paths that stay unreadable, whether the network is on),
confines itself, and runs the command, which inherits every restriction and can lift none:

- Landlock: reading everything but the hidden paths and /dev (of which only the standard
  nodes: null, zero, full, random, urandom, tty), writing the writable directories; TCP bind
  and connect refused when the network is off (ABI 4); abstract unix sockets and signals to
  processes outside the sandbox refused (ABI 6).
- no capabilities: as root the bounding, permitted, effective, inheritable and ambient sets
  are emptied, with no-new-privileges, so root inside is an ordinary owner of its files (no
  mounts, no other processes' memory or environment, no network configuration).
- the seccomp filter of `seccomp.py` (compiled by the agent and given in the policy, else
  built from that file, loaded by its path): no unix sockets, no UDP, MPTCP or raw IP when
  the network is off, no TIOCSTI, no io_uring, no kernel keyrings.
- a PID and a mount namespace where the kernel gives them (as root; as a user where user
  namespaces are allowed), with an empty /dev/shm of its own: the launcher waits outside
  while a first process inside runs the command in a new session, and when the command ends,
  or the launcher is ended, the kernel ends every process left in the namespace, `setsid`
  ones included. Where none can be had, the command runs in place of the launcher, in a new
  session where possible, without /dev/shm, and a process that leaves its group (`setsid`)
  can outlive it.

Landlock only ever allows, so a hidden path is kept unreadable by granting reading on each of
its siblings, level by level down from `/`, never on a directory above it; directories stay
listable everywhere (names, not contents). Exit status 126 with a line on stderr when the
kernel refuses any of this: the command never runs less confined than asked.
"""

from __future__ import annotations

import ctypes
import json
import os
import signal
import sys
from collections.abc import Callable, Iterable

# Syscall numbers are the same on x86_64 and the generic table (aarch64, riscv).
CREATE_RULESET, ADD_RULE, RESTRICT_SELF = 444, 445, 446
CREATE_RULESET_VERSION = 1
RULE_PATH_BENEATH, RULE_NET_PORT = 1, 2
PR_SET_PDEATHSIG, PR_CAPBSET_DROP, PR_SET_SECCOMP, PR_SET_NO_NEW_PRIVS = 1, 24, 22, 38
PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, SECCOMP_MODE_FILTER = 47, 4, 2
CAPABILITY_VERSION_3 = 0x20080522
CLONE_NEWNS, CLONE_NEWUSER, CLONE_NEWPID = 0x00020000, 0x10000000, 0x20000000
MS_NOSUID, MS_NODEV, MS_NOEXEC, MS_REC, MS_SLAVE = 2, 4, 8, 1 << 14, 1 << 19

EXECUTE, WRITE_FILE, READ_FILE, READ_DIR = 1 << 0, 1 << 1, 1 << 2, 1 << 3
# REMOVE_DIR .. MAKE_SYM (bits 4-12): every way of changing a directory's entries (ABI 1).
CHANGE_DIR = sum(1 << bit for bit in range(4, 13))
REFER, TRUNCATE, IOCTL_DEV = 1 << 13, 1 << 14, 1 << 15
BIND_TCP, CONNECT_TCP = 1 << 0, 1 << 1
SCOPE_ABSTRACT_UNIX_SOCKET, SCOPE_SIGNAL = 1 << 0, 1 << 1
READ = EXECUTE | READ_FILE | READ_DIR
# The only device nodes a command may open: not /dev/shm (shared with the host's processes),
# not the disks (root owns them), not /dev/pts (the user's other terminals).
DEVICES = ("/dev/null", "/dev/zero", "/dev/full", "/dev/random", "/dev/urandom", "/dev/tty")
# Ignored by every Python process, and an ignored signal stays ignored across exec: a command
# would get EPIPE errors where a closed pipe ends it (`yes | head -1`).
PYTHON_IGNORES = (signal.SIGPIPE, signal.SIGXFSZ)
SECCOMP = os.path.join(os.path.dirname(os.path.abspath(__file__)), "seccomp.py")


class RulesetAttr(ctypes.Structure):
    _fields_ = [("handled_access_fs", ctypes.c_uint64), ("handled_access_net", ctypes.c_uint64)]


class ScopedRulesetAttr(ctypes.Structure):  # ABI 6: with `scoped`
    _fields_ = [*RulesetAttr._fields_, ("scoped", ctypes.c_uint64)]


class PathBeneathAttr(ctypes.Structure):
    _pack_ = 1
    _fields_ = [("allowed_access", ctypes.c_uint64), ("parent_fd", ctypes.c_int32)]


class CapHeader(ctypes.Structure):
    _fields_ = [("version", ctypes.c_uint32), ("pid", ctypes.c_int)]


class CapData(ctypes.Structure):
    _fields_ = [(name, ctypes.c_uint32) for name in ("effective", "permitted", "inheritable")]


class SockFprog(ctypes.Structure):
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]


_libc = ctypes.CDLL(None, use_errno=True)
_libc.syscall.restype = ctypes.c_long


def _prctl(option: int, *args: object) -> int:
    values = [ctypes.c_ulong(a) if isinstance(a, int) else a for a in args]
    values += [ctypes.c_ulong(0)] * (4 - len(values))  # the kernel checks unused ones are 0
    return int(_libc.prctl(option, *values))


def abi() -> int:
    """The kernel's Landlock ABI version; 0 when it has none (or it is disabled)."""
    if not sys.platform.startswith("linux"):
        return 0
    found = _libc.syscall(CREATE_RULESET, None, ctypes.c_size_t(0), CREATE_RULESET_VERSION)
    return max(int(found), 0)


def fs_rights(version: int) -> int:
    """Every filesystem right the kernel of ABI `version` can refuse."""
    rights = READ | WRITE_FILE | CHANGE_DIR
    rights |= REFER if version >= 2 else 0
    rights |= TRUNCATE if version >= 3 else 0
    return rights | (IOCTL_DEV if version >= 5 else 0)


def readable(hidden: Iterable[str]) -> list[str]:
    """The paths to grant reading on so that everything but `hidden` (and what lies under
    it) can be read: for each directory on the way to a hidden path, its other entries."""
    hidden_set = {os.path.normpath(path) for path in hidden}
    above = {os.path.dirname(p) for p in hidden_set}
    for path in list(above):
        while path not in ("/", ""):
            path = os.path.dirname(path)
            above.add(path)
    above = {p for p in above if p} | {"/"}
    grants = []
    for parent in sorted(above):
        try:
            names = os.listdir(parent)
        except OSError:
            continue
        for name in names:
            path = os.path.join(parent, name)
            # A link is not granted: a rule follows it, and one pointing back up the tree
            # (pytest's `pytest-current`, a `~/dotfiles` link) would open the hidden path again.
            # What it points at is granted, or not, under its own name.
            if path not in hidden_set and path not in above and not os.path.islink(path):
                grants.append(path)
    return grants


def _add_rule(ruleset: int, path: str, access: int) -> None:
    try:
        fd = os.open(path, os.O_PATH | os.O_CLOEXEC)
    except OSError:
        return  # gone, or unreadable to us anyway
    try:
        rule = PathBeneathAttr(access, fd)
        if not os.path.isdir(path):
            access &= READ_FILE | WRITE_FILE | EXECUTE | TRUNCATE | IOCTL_DEV
            rule = PathBeneathAttr(access, fd)
        if _libc.syscall(ADD_RULE, ruleset, RULE_PATH_BENEATH, ctypes.byref(rule), 0) < 0:
            raise OSError(ctypes.get_errno(), f"landlock_add_rule {path}")
    finally:
        os.close(fd)


def _ruleset(version: int, network: bool) -> int:
    handled = fs_rights(version)
    net = 0 if network or version < 4 else BIND_TCP | CONNECT_TCP
    attr: ctypes.Structure = RulesetAttr(handled, net)
    if version >= 6:
        attr = ScopedRulesetAttr(handled, net, SCOPE_ABSTRACT_UNIX_SOCKET | SCOPE_SIGNAL)
    ruleset = int(_libc.syscall(CREATE_RULESET, ctypes.byref(attr), ctypes.sizeof(attr), 0))
    if ruleset < 0:
        raise OSError(ctypes.get_errno(), "landlock_create_ruleset")
    return ruleset


def restrict(policy: dict[str, object]) -> None:
    """Restrict this process (and what it executes) to `policy`'s files and TCP; OSError
    when it cannot."""
    version = abi()
    if version < 1:
        raise OSError(0, "this kernel has no Landlock")
    ruleset = _ruleset(version, bool(policy.get("network")))
    ioctl = IOCTL_DEV if version >= 5 else 0
    try:
        _add_rule(ruleset, "/", READ_DIR)
        hidden = [str(p) for p in policy.get("hidden", [])]  # type: ignore[attr-defined]
        for path in readable([*hidden, "/dev"]):
            _add_rule(ruleset, path, READ | ioctl)
        for path in DEVICES:
            _add_rule(ruleset, path, READ_FILE | WRITE_FILE | TRUNCATE | ioctl)
        for path in policy.get("writable", []):  # type: ignore[attr-defined]
            _add_rule(ruleset, str(path), fs_rights(version))
        if _prctl(PR_SET_NO_NEW_PRIVS, 1) != 0:
            raise OSError(ctypes.get_errno(), "prctl(PR_SET_NO_NEW_PRIVS)")
        if _libc.syscall(RESTRICT_SELF, ruleset, 0) < 0:
            raise OSError(ctypes.get_errno(), "landlock_restrict_self")
    finally:
        os.close(ruleset)


def drop_capabilities() -> None:
    """Empty every capability set (a user has none to drop: the calls that need one are
    refused and the sets stay empty)."""
    _prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL)
    for cap in range(64):
        if _prctl(PR_CAPBSET_DROP, cap) != 0 and ctypes.get_errno() == 22:  # EINVAL: no such
            break
    header, data = CapHeader(CAPABILITY_VERSION_3, 0), (CapData * 2)()
    if _libc.capset(ctypes.byref(header), ctypes.byref(data)) != 0:
        raise OSError(ctypes.get_errno(), "capset")


def _load_seccomp() -> dict[str, object]:
    """`seccomp.py` beside this file, run as a module of its own (the launcher imports nothing
    of the package)."""
    with open(SECCOMP, encoding="utf-8") as f:
        source = f.read()
    namespace: dict[str, object] = {"__name__": "acp_seccomp", "__file__": SECCOMP}
    exec(compile(source, SECCOMP, "exec"), namespace)
    return namespace


def install_filter(policy: dict[str, object], version: int) -> None:
    """The seccomp filter for this level (after no-new-privileges): the one the caller
    compiled (`seccomp`, in hex: compiling it here costs ~3 ms), else built here."""
    given = policy.get("seccomp")
    if isinstance(given, str):
        install(bytes.fromhex(given))
        return
    build: Callable[..., bytes] = _load_seccomp()["program"]  # type: ignore[assignment]
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
    if _prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, ctypes.pointer(prog)) != 0:
        raise OSError(ctypes.get_errno(), "prctl(PR_SET_SECCOMP)")


def _namespaces() -> bool:
    """Have the next child made the first process of a new PID namespace, in a mount namespace
    of its own: as root directly, as a user in a user namespace of its own too (uid and gid
    mapped to themselves). False where the kernel allows neither."""
    if _libc.unshare(CLONE_NEWPID | CLONE_NEWNS) == 0:
        return True
    uid, gid = os.getuid(), os.getgid()
    if _libc.unshare(CLONE_NEWUSER | CLONE_NEWPID | CLONE_NEWNS) != 0:
        return False
    maps = {"setgroups": "deny", "uid_map": f"{uid} {uid} 1", "gid_map": f"{gid} {gid} 1"}
    for name, text in maps.items():
        with open(f"/proc/self/{name}", "w", encoding="ascii") as f:
            f.write(text)
    return True


def _private_shm() -> bool:
    """In the new mount namespace, an empty /dev/shm of the command's own (POSIX shared memory
    and semaphores: Python's multiprocessing needs them), none of the host's files in it.
    False when it cannot be mounted: the command then has no /dev/shm to write."""
    slave = _libc.mount(b"none", b"/", None, ctypes.c_ulong(MS_REC | MS_SLAVE), None) == 0
    flags = ctypes.c_ulong(MS_NOSUID | MS_NODEV | MS_NOEXEC)
    return slave and int(_libc.mount(b"tmpfs", b"/dev/shm", b"tmpfs", flags, b"mode=1777")) == 0


def confine(policy: dict[str, object]) -> bool:
    """Everything of the module's doc, in this process; True when the command is to run in
    the new PID namespace (`run_as_init`)."""
    _prctl(PR_SET_PDEATHSIG, signal.SIGKILL)  # whoever started the command ended: so does it
    namespaced = _namespaces()
    shm = ["/dev/shm"] if namespaced and _private_shm() else []
    restrict({**policy, "writable": [*policy.get("writable", []), *shm]})  # type: ignore[misc]
    drop_capabilities()
    install_filter(policy, abi())
    return namespaced


def run_as_init(command: list[str]) -> int:
    """Fork the namespace's first process, which runs `command` in a new session and exits
    with it (the kernel then kills what is left in the namespace); wait for it here, passing
    on the signals that end a command (the agent sends them to this process's group)."""
    alive_r, alive_w = os.pipe()  # closes when this process ends, however it ends
    first = os.fork()
    if first == 0:
        try:
            os.close(alive_w)
            _prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
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


def main(argv: list[str]) -> int:
    if len(argv) < 3 or argv[1] != "--":
        sys.stderr.write("usage: landlock_exec.py POLICY_JSON -- COMMAND [ARGS...]\n")
        return 2
    try:
        namespaced = confine(json.loads(argv[0]))
    except (OSError, ValueError) as exc:
        sys.stderr.write(f"acp-server: the sandbox could not be set up ({exc}); not run.\n")
        return 126
    if namespaced:
        return run_as_init(argv[2:])
    try:  # noqa: SIM105
        os.setsid()  # no controlling terminal (unless the agent already made a new session)
    except OSError:
        pass
    for sig in PYTHON_IGNORES:
        signal.signal(sig, signal.SIG_DFL)
    try:
        os.execvp(argv[2], argv[2:])
    except OSError as exc:
        sys.stderr.write(f"acp-server: cannot run {argv[2]}: {exc.strerror}\n")
        return 127


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
