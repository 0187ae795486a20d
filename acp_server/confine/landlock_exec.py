"""Run a command under Landlock: the sandbox where bubblewrap is not installed (Linux >= 5.13).

Started as a script (`python -I -S landlock_exec.py POLICY -- ARGV...`), so it imports nothing
of the package (but `launch.py` from its own folder) and costs only a bare interpreter's start:
it reads the policy (JSON: the directories that may be written, the paths that stay
unreadable, whether the network is on), confines itself, and runs the command, which inherits
every restriction and can lift none:

- Landlock: reading everything but the hidden paths and /dev (of which only the standard
  nodes: null, zero, full, random, urandom, tty), writing the writable directories; TCP bind
  and connect refused when the network is off (ABI 4); abstract unix sockets and signals to
  processes outside the sandbox refused (ABI 6).
- no capabilities: as root the bounding, permitted, effective, inheritable and ambient sets
  are emptied, with no-new-privileges, so root inside is an ordinary owner of its files (no
  mounts, no other processes' memory or environment, no network configuration).
- the seccomp filter of `seccomp.py` (compiled by the agent and given in the policy): no unix
  sockets, no UDP, MPTCP or raw IP when the network is off, no TIOCSTI, no io_uring, no
  kernel keyrings.
- a PID and a mount namespace where the kernel gives them (as root; as a user where user
  namespaces are allowed), with an empty /dev/shm of its own and `.git` bound read-only: the
  launcher waits outside while a first process inside runs the command in a new session, and
  when the command ends, or the launcher is ended, the kernel ends every process left in the
  namespace, `setsid` ones included. Where none can be had, the command runs in place of the
  launcher, in a new session where possible, without /dev/shm, and a process that leaves its
  group (`setsid`) can outlive it.

Landlock only ever allows, so a hidden path is kept unreadable by granting reading on each of
its siblings, level by level down from `/`, never on a directory above it; directories stay
listable everywhere (names, not contents). A writable root that holds a hidden path (a session
in HOME) is granted the same way, level by level from the root: its other entries are
writable, but no new entry can be made, removed or renamed in the folders on the way down to a
hidden path (the root included), which Landlock cannot grant without granting it in the
hidden folder too. Exit status 126 with a line on stderr when the kernel refuses any of this:
the command never runs less confined than asked.
"""

from __future__ import annotations

import ctypes
import json
import os
import signal
import sys
from collections.abc import Iterable

if __name__ != "__main__":
    from acp_server.confine import launch
else:  # run as a script (-I): nothing of the package is importable, but its own folder is
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    launch = __import__("launch")

# Syscall numbers are the same on x86_64 and the generic table (aarch64, riscv).
CREATE_RULESET, ADD_RULE, RESTRICT_SELF = 444, 445, 446
CREATE_RULESET_VERSION = 1
RULE_PATH_BENEATH, RULE_NET_PORT = 1, 2
PR_SET_NO_NEW_PRIVS = 38

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


class RulesetAttr(ctypes.Structure):
    _fields_ = [("handled_access_fs", ctypes.c_uint64), ("handled_access_net", ctypes.c_uint64)]


class ScopedRulesetAttr(ctypes.Structure):  # ABI 6: with `scoped`
    _fields_ = [*RulesetAttr._fields_, ("scoped", ctypes.c_uint64)]


class PathBeneathAttr(ctypes.Structure):
    _pack_ = 1
    _fields_ = [("allowed_access", ctypes.c_uint64), ("parent_fd", ctypes.c_int32)]


_libc = ctypes.CDLL(None, use_errno=True)
_libc.syscall.restype = ctypes.c_long


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
    return _around("/", hidden)


def writable(root: str, hidden: Iterable[str]) -> list[str]:
    """The paths to grant every right on so that `root` can be changed except the hidden paths
    in it: `root` itself when it holds none; else, level by level down to each hidden path, the
    other entries of each folder on the way. Those folders themselves get no right: a right on a
    folder holds for all beneath it, so one that let a new file be made at the root's top level
    would also let one be made, removed or linked in `~/.ssh`. Nothing of a root that lies in
    a hidden path."""
    hidden_set = {os.path.normpath(path) for path in hidden}
    if any(_within(root, path) for path in hidden_set):
        return []
    return _around(root, hidden_set) if any(_within(p, root) for p in hidden_set) else [root]


def _around(top: str, hidden: Iterable[str]) -> list[str]:
    """The entries to grant beneath `top` so that the hidden paths in it, and the folders on
    the way to them, get nothing: the other entries of each of those folders."""
    hidden_set = {os.path.normpath(path) for path in hidden if _within(path, top)}
    above = {top}
    for path in hidden_set:
        path = os.path.dirname(path)
        while _within(path, top) and path != top:
            above.add(path)
            path = os.path.dirname(path)
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


def _within(path: str, folder: str) -> bool:
    """Whether `path` is `folder` or lies beneath it (both normalised, absolute)."""
    return path == folder or path.startswith(folder.rstrip("/") + "/")


def path_rules(policy: dict[str, object], read: int, full: int) -> list[tuple[str, int]]:
    """Every (path, rights) rule of `policy`: listing everywhere, reading all but the hidden
    paths, every right in the writable roots but on the hidden paths and the folders above
    them. Hidden paths and roots are taken as they really are (symlinks resolved) as well as
    named: Landlock's rules hold for the file, whatever name reaches it."""
    named = [str(p) for p in policy.get("hidden", [])]  # type: ignore[attr-defined]
    hidden = sorted({os.path.normpath(p) for p in named} | {os.path.realpath(p) for p in named})
    rules = [("/", READ_DIR)] + [(path, read) for path in readable([*hidden, "/dev"])]
    rules += [(path, READ_FILE | WRITE_FILE | TRUNCATE | (read & IOCTL_DEV)) for path in DEVICES]
    for root in policy.get("writable", []):  # type: ignore[attr-defined]
        real = os.path.realpath(str(root))
        rules += [(path, full) for path in writable(real, hidden)]
    return rules


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


def restrict(policy: dict[str, object]) -> None:
    """Restrict this process (and what it executes) to `policy`'s files and TCP, abstract unix
    sockets and signals to its own; OSError when it cannot."""
    version = abi()
    if version < 1:
        raise OSError(0, "this kernel has no Landlock")
    handled = fs_rights(version)
    net = 0 if policy.get("network") or version < 4 else BIND_TCP | CONNECT_TCP
    attr: ctypes.Structure = RulesetAttr(handled, net)
    if version >= 6:
        attr = ScopedRulesetAttr(handled, net, SCOPE_ABSTRACT_UNIX_SOCKET | SCOPE_SIGNAL)
    ruleset = int(_libc.syscall(CREATE_RULESET, ctypes.byref(attr), ctypes.sizeof(attr), 0))
    if ruleset < 0:
        raise OSError(ctypes.get_errno(), "landlock_create_ruleset")
    try:
        read = READ | (IOCTL_DEV if version >= 5 else 0)
        for path, access in path_rules(policy, read, handled):
            _add_rule(ruleset, path, access)
        if launch.prctl(launch.PR_SET_NO_NEW_PRIVS, 1) != 0:
            raise OSError(ctypes.get_errno(), "prctl(PR_SET_NO_NEW_PRIVS)")
        if _libc.syscall(RESTRICT_SELF, ruleset, 0) < 0:
            raise OSError(ctypes.get_errno(), "landlock_restrict_self")
    finally:
        os.close(ruleset)


def confine(policy: dict[str, object]) -> bool:
    """Everything of the module's doc but running the command, in this process; True when the
    command is to run in a new PID namespace (`launch.run_as_init`)."""
    launch.prctl(launch.PR_SET_PDEATHSIG, signal.SIGKILL)  # its starter ended: so does it
    pid_namespace, mount_namespace = launch.namespaces()
    read_only = [str(p) for p in policy.get("read_only", [])]  # type: ignore[attr-defined]
    launch.read_only_binds(read_only, mount_namespace)  # before Landlock: it forbids mounting
    if mount_namespace and launch.private_shm():
        writable = [*policy.get("writable", []), "/dev/shm"]  # type: ignore[misc]
        policy = {**policy, "writable": writable}
    restrict(policy)
    launch.drop_capabilities()
    launch.install_filter(policy, abi())
    return pid_namespace


def main(argv: list[str]) -> int:
    if len(argv) < 3 or argv[1] != "--":
        sys.stderr.write("usage: landlock_exec.py POLICY_JSON -- COMMAND [ARGS...]\n")
        return 2
    try:
        pid_namespace = confine(json.loads(argv[0]))
    except (OSError, ValueError) as exc:
        sys.stderr.write(f"acp-server: the sandbox could not be set up ({exc}); not run.\n")
        return 126
    if pid_namespace:
        return launch.run_as_init(argv[2:])
    return launch.run_in_place(argv[2:])


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
