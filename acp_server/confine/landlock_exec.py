"""Run a command under Landlock: the sandbox where bubblewrap is not installed (Linux >= 5.13).

Started as a script (`python -I -S landlock_exec.py POLICY -- ARGV...`), so it imports nothing
of the package and costs only a bare interpreter's start: it reads the policy (JSON: the
directories that may be written, the paths that stay unreadable, whether TCP is allowed),
restricts itself with no-new-privileges and a Landlock ruleset, and replaces itself with the
command, which inherits the restriction and cannot lift it.

Landlock only ever allows, so a hidden path is kept unreadable by granting reading on each of
its siblings, level by level down from `/`, never on a directory above it; directories stay
listable everywhere (names, not contents). A writable root that holds a hidden path (a session
in HOME) is granted the same way, level by level from the root: its other entries are
writable, but no new entry can be made, removed or renamed in the folders on the way down to a
hidden path (the root included), which Landlock cannot grant without granting it in the
hidden folder too. TCP bind and connect are refused when the network is
off (ABI 4 and later; UDP is not covered by Landlock). Exit status 126 with a line on stderr
when the kernel refuses the sandbox: the command never runs unrestricted.
"""

from __future__ import annotations

import ctypes
import json
import os
import sys
from collections.abc import Iterable

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
READ = EXECUTE | READ_FILE | READ_DIR


class RulesetAttr(ctypes.Structure):
    _fields_ = [("handled_access_fs", ctypes.c_uint64), ("handled_access_net", ctypes.c_uint64)]


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
    rules = [("/", READ_DIR)] + [(path, read) for path in readable(hidden)]
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
    """Restrict this process (and what it executes) to `policy`; OSError when it cannot."""
    version = abi()
    if version < 1:
        raise OSError(0, "this kernel has no Landlock")
    handled = fs_rights(version)
    network = bool(policy.get("network"))
    net = 0 if network or version < 4 else BIND_TCP | CONNECT_TCP
    attr = RulesetAttr(handled, net)
    ruleset = int(_libc.syscall(CREATE_RULESET, ctypes.byref(attr), ctypes.sizeof(attr), 0))
    if ruleset < 0:
        raise OSError(ctypes.get_errno(), "landlock_create_ruleset")
    try:
        read = READ | (IOCTL_DEV if version >= 5 else 0)
        for path, access in path_rules(policy, read, handled):
            _add_rule(ruleset, path, access)
        if _libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
            raise OSError(ctypes.get_errno(), "prctl(PR_SET_NO_NEW_PRIVS)")
        if _libc.syscall(RESTRICT_SELF, ruleset, 0) < 0:
            raise OSError(ctypes.get_errno(), "landlock_restrict_self")
    finally:
        os.close(ruleset)


# --- version-control folders read-only (vcs_guard.py) -----------------------------------------
CLONE_NEWNS, CLONE_NEWUSER = 0x00020000, 0x10000000
MS_RDONLY, MS_NOSUID, MS_NODEV, MS_NOEXEC = 1, 2, 4, 8
MS_REMOUNT, MS_BIND, MS_REC, MS_PRIVATE = 32, 4096, 16384, 1 << 18


def read_only_binds(paths: list[str]) -> bool:
    """Bind each of `paths` read-only over itself, in a mount namespace of this process's own
    (inside a user namespace of its own when not root): what Landlock cannot say, that `.git`
    stays read-only in a writable root. Landlock then forbids the command to unmount them, and a
    mount point cannot be renamed or removed. False where the kernel refuses a namespace or a
    mount (a container without the right, user namespaces turned off): the command then runs
    with the folders writable, and the agent's own git (own_git.py) is what still holds."""
    if not paths:
        return True
    if not (os.geteuid() == 0 and _libc.unshare(CLONE_NEWNS) == 0) and not _own_user():
        return False
    try:
        _mount(None, "/", MS_REC | MS_PRIVATE)  # nothing of this reaches the host's mounts
        for path in paths:
            _mount(path, path, MS_BIND | MS_REC)
            kept = os.statvfs(path).f_flag & (MS_NOSUID | MS_NODEV | MS_NOEXEC)  # locked ones
            _mount(None, path, MS_BIND | MS_REMOUNT | MS_RDONLY | kept)
    except OSError:
        return False
    return True


def _own_user() -> bool:
    """A user namespace (and a mount namespace in it) where this process has the same ids as
    outside, so that files keep their owners; False where the kernel refuses it."""
    uid, gid = os.getuid(), os.getgid()
    if _libc.unshare(CLONE_NEWNS | CLONE_NEWUSER) != 0:
        return False
    try:
        for name, text in (("setgroups", "deny"), ("uid_map", f"{uid} {uid} 1"),
                           ("gid_map", f"{gid} {gid} 1")):  # fmt: skip
            with open(f"/proc/self/{name}", "w", encoding="ascii") as out:
                out.write(text)
    except OSError:
        return False
    return True


def _mount(source: str | None, target: str, flags: int) -> None:
    src = source.encode() if source is not None else None
    if _libc.mount(src, target.encode(), None, ctypes.c_ulong(flags), None) != 0:
        raise OSError(ctypes.get_errno(), f"mount {target}")


def main(argv: list[str]) -> int:
    if len(argv) < 3 or argv[1] != "--":
        sys.stderr.write("usage: landlock_exec.py POLICY_JSON -- COMMAND [ARGS...]\n")
        return 2
    try:
        policy = json.loads(argv[0])
        read_only_binds(policy.get("read_only", []))  # before Landlock: it forbids mounting
        restrict(policy)
    except (OSError, ValueError) as exc:
        sys.stderr.write(f"acp-server: the sandbox could not be set up ({exc}); not run.\n")
        return 126
    try:
        os.execvp(argv[2], argv[2:])
    except OSError as exc:
        sys.stderr.write(f"acp-server: cannot run {argv[2]}: {exc.strerror}\n")
        return 127


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
