"""The sandbox commands run in: what a command the model runs may write, read and reach.

Levels (the configuration file's `sandbox`, `ACP_SERVER_SANDBOX`, `--sandbox`):

| level             | writes                                   | network | secrets (~/.ssh, …) |
| ----------------- | ---------------------------------------- | ------- | ------------------- |
| `off`             | anywhere the user can (as before)        | yes     | readable            |
| `read-only`       | nowhere (a private temp dir only)        | no      | hidden              |
| `workspace-write` | the session's roots and a private tmp    | no      | hidden              |
| `workspace-net`   | the session's roots and a private tmp    | yes     | hidden              |

Secrets (`confine.secrets`: credential files, shell history, the agent's own data, logs and
keys) are hidden at every confined level, also when a root contains them (a session whose
folder is HOME), and under their real path as well as the one named.

How: bubblewrap when it is installed (the whole filesystem bound read-only, the roots and the
private temp dir bound writable, then the secrets covered by empty read-only ones, a fresh
network namespace when the network is off), else Landlock (`landlock_exec`, Linux 5.13+),
else on macOS a sandbox-exec profile. With none of them, or on a Linux kernel without seccomp
filters, a level other than `off` cannot be kept: `mechanism` is None, the session says so
once, and every command asks as it did before the sandbox.

Root is no way out, and no network means none (issue 29): under both Linux mechanisms a
command has no capabilities (bubblewrap: a user namespace, `--cap-drop ALL`; Landlock: every
set emptied by the launcher), only the standard device nodes, no /proc entry of the agent's
it may read, and the seccomp filter of `seccomp` (no unix sockets, so no docker.sock or
ssh-agent; no UDP, MPTCP or raw IP under Landlock with the network off; no TIOCSTI, io_uring
or keyrings); bubblewrap's PID namespace, and the Landlock launcher's where the kernel gives
one, end whatever the command leaves behind with it. `protections` names them for `doctor`.

In a writable root the version-control folders (`.git`, `.hg`, `.jj`) stay read-only
(`vcs_guard`): what is in them decides what the user's own git runs. The agent's own git runs
in the read-only level (`own_git`).

A sandbox confines; it does not judge: a command inside it can still delete or rewrite files
of the project, use up the machine, or print the project's secrets into its output.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from acp_server.confine import scratch, vcs_guard
from acp_server.confine.secrets import hidden_paths, make_agent_folders

Level = Literal["off", "read-only", "workspace-write", "workspace-net"]
LEVELS: tuple[Level, ...] = ("off", "read-only", "workspace-write", "workspace-net")
DEFAULT_LEVEL: Level = "workspace-write"
Mechanism = Literal["bubblewrap", "landlock", "seatbelt"]
SANDBOX_ENV = "ACP_SERVER_SANDBOX"
_LANDLOCK = Path(__file__).with_name("landlock_exec.py")
# What a denied write or connection prints: bubblewrap's read-only binds, Landlock's EACCES,
# a network namespace with nothing but loopback, a name that cannot be resolved there.
_DENIED_WRITE = re.compile(r"Read-only file system|Permission denied|Operation not permitted")
_DENIED_NET = re.compile(
    r"Network is unreachable|Connection refused|Temporary failure in name resolution|"
    r"Could not resolve host|Name or service not known|nodename nor servname|"
    r"Permission denied.*(connect|socket)|(connect|socket).*Permission denied",
    re.IGNORECASE,
)
_VCS_PATH = re.compile(r"(^|[/\s'\"])\.(git|hg|jj)([/\s'\":]|$)", re.MULTILINE)


@dataclass(frozen=True)
class Policy:
    """What one session's commands may do."""

    level: Level
    writable: tuple[Path, ...]  # the session's roots
    hidden: tuple[Path, ...]  # secrets: unreadable and unwritable inside, roots or not
    tmp: Path  # the private temp dir (TMPDIR inside)

    @property
    def network(self) -> bool:
        return self.level in ("off", "workspace-net")

    @property
    def confined(self) -> bool:
        return self.level != "off"


def parse_level(value: str, source: str) -> Level:
    """A level by name; ValueError saying what the choices are."""
    for level in LEVELS:
        if value.strip().lower() == level:
            return level
    raise ValueError(f"{source}: {value!r} is not a sandbox level; use one of {', '.join(LEVELS)}")


def key_store() -> Path:
    """Where the agent keeps the keys `acp-server login` stores: its configuration folder
    (`ACP_SERVER_CONFIG`'s file when that names one)."""
    named = os.environ.get("ACP_SERVER_CONFIG", "").strip()
    if named:
        return Path(named).expanduser()
    base = os.environ.get("XDG_CONFIG_HOME", "").strip() or "~/.config"
    return Path(base).expanduser() / "acp-server"


def policy_for(level: Level, roots: tuple[Path, ...], key_store: Path | None) -> Policy:
    """The policy of a session with these roots (a private temp dir made for it). Every secret
    that exists is hidden (`secrets.hidden_paths`, and `key_store`), inside a root too; the
    agent's own folders are made first where missing (`secrets.make_agent_folders`)."""
    if level != "off":
        make_agent_folders()
    hidden = list(hidden_paths())
    if key_store is not None and os.path.lexists(key_store) and key_store not in hidden:
        hidden.append(key_store)
    tmp = scratch.make()  # locked while it exists; the first one sweeps killed servers' away
    writable = () if level == "read-only" else tuple(roots)
    return Policy(level, writable, tuple(hidden), tmp)


def mechanism() -> Mechanism | None:
    """The way this machine can confine a command: bubblewrap, Landlock, sandbox-exec, or
    None. Checked once per process (bubblewrap by really starting it: a kernel without user
    namespaces refuses it, ~8 ms); a caller while `start_probe`'s thread checks waits for its
    answer."""
    with _FOUND_LOCK:
        if not _FOUND:
            _FOUND.append(_find())
        return _FOUND[0]


def start_probe() -> None:
    """Check `mechanism()` in a thread of its own, once: started when a session opens, so
    that its first turn, which tells the user when commands cannot be confined, finds the
    answer there instead of waiting for bubblewrap to start (a prompt sent at once after
    `session/new` waited ~8 ms). The thread spends that time waiting for bubblewrap to
    exit, not holding the interpreter."""
    global _PROBE
    with _PROBE_LOCK:
        if _PROBE is None and not _FOUND:
            _PROBE = threading.Thread(target=mechanism, name="sandbox-probe", daemon=True)
            _PROBE.start()


_FOUND: list[Mechanism | None] = []  # the answer, once known
_FOUND_LOCK = threading.Lock()
_PROBE: threading.Thread | None = None
_PROBE_LOCK = threading.Lock()


def _find() -> Mechanism | None:
    import shutil

    if sys.platform.startswith("linux"):
        from acp_server.confine import seccomp
        from acp_server.confine.landlock_exec import abi

        # Without a seccomp filter, unix sockets (docker.sock, the ssh-agent) stay reachable
        # under both: no level is kept, and commands ask (kernels have had filters since 3.5).
        if not seccomp.works():
            return None
        bwrap = shutil.which("bwrap")
        if bwrap and _bwrap_works(bwrap):
            return "bubblewrap"
        if abi() >= 1:
            return "landlock"
    if sys.platform == "darwin" and Path("/usr/bin/sandbox-exec").exists():
        return "seatbelt"
    return None


def _bwrap_works(bwrap: str) -> bool:
    try:
        done = subprocess.run(
            [*_bwrap_base(bwrap), "--unshare-net", "--", "/bin/true"],
            capture_output=True,
            timeout=5,
            check=False,
        )
    except (OSError, subprocess.SubprocessError):
        return False
    return done.returncode == 0


def wrap(argv: list[str], policy: Policy, how: Mechanism) -> list[str]:
    """`argv` run inside the sandbox `how` keeps to `policy`."""
    if how == "bubblewrap":
        return [*_bwrap(policy), "--", *argv]
    if how == "landlock":
        rules = {
            "writable": [str(p) for p in (*policy.writable, policy.tmp)],
            "hidden": [str(p) for p in policy.hidden],
            "network": policy.network,
            "read_only": [str(p) for p in vcs_guard.protected(policy.writable)],
            "seccomp": _landlock_filter(policy.network),
        }
        return [sys.executable, "-I", "-S", str(_LANDLOCK), json.dumps(rules), "--", *argv]
    return ["/usr/bin/sandbox-exec", "-p", _seatbelt(policy), *argv]


def _bwrap_base(bwrap: str) -> list[str]:
    """What every bubblewrap sandbox has: the filesystem read-only, a /dev of the standard
    nodes only (its /dev/shm private), a /proc of its own PID namespace (the agent's
    environment is not in it), a user namespace and no capabilities even as root (nothing
    can be unmounted or remounted, none regained: the bounding set is empty too), ended with
    the agent. No `--new-session`: the seccomp filter refuses TIOCSTI itself, and a command in
    a session of its own is out of the agent's process group, so a stop reached bubblewrap
    alone, and one sent while bubblewrap was setting up left the sandbox running."""
    return [bwrap, "--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc", "--unshare-pid",
            "--unshare-user", "--cap-drop", "ALL", "--die-with-parent"]  # fmt: skip


def _bwrap(policy: Policy) -> list[str]:
    import shutil

    args = _bwrap_base(shutil.which("bwrap") or "bwrap")
    for root in policy.writable:
        args += ["--bind", str(root), str(root)]
    args += vcs_guard.bwrap_args(policy.writable)  # .git, .hg, .jj read-only again
    args += ["--bind", str(policy.tmp), str(policy.tmp)]
    args += _bwrap_hide(policy.hidden)
    if not policy.network:
        args.append("--unshare-net")  # with only a loopback of its own, IP of any kind is local
    args += ["--seccomp", "3", "--setenv", "TMPDIR", str(policy.tmp)]
    # bubblewrap reads the filter from a descriptor: the shell opens it from the agent's
    # sealed copy (nothing can change it) and becomes bubblewrap. An editor's terminal,
    # which only runs an argv, can do the same.
    from acp_server.confine.seccomp import program, sealed_copy

    return ["/bin/sh", "-c", 'exec "$@" 3< "$0"', sealed_copy(program(ip="all")), *args]


def _landlock_filter(network: bool) -> str:
    """The Landlock launcher's seccomp filter, compiled here (in hex) so that it need not
    compile it at each command."""
    from acp_server.confine.landlock_exec import abi
    from acp_server.confine.launch import ip_rule
    from acp_server.confine.seccomp import program

    return program(ip=ip_rule(network, abi()), unix=False).hex()


def _bwrap_hide(hidden: tuple[Path, ...]) -> list[str]:
    """bubblewrap's arguments covering each secret, after the writable binds so that a root
    that contains one (a session in HOME) does not uncover it: a folder by an empty read-only
    tmpfs, a file by /dev/null bound read-only. Both names of a secret reached through a
    symlink are in `hidden`; a mount over either covers the same file."""
    args: list[str] = []
    for secret in hidden:
        if os.path.isdir(secret):
            args += ["--tmpfs", str(secret), "--remount-ro", str(secret)]
        elif os.path.exists(secret):  # a dangling link hides nothing
            args += ["--ro-bind", "/dev/null", str(secret)]
    return args


def _seatbelt(policy: Policy) -> str:
    """A sandbox-exec profile (macOS): read everything but the secrets, write the roots."""
    writes = " ".join(f'(subpath "{p}")' for p in (*policy.writable, policy.tmp))
    hidden = " ".join(f'(subpath "{p}")' for p in policy.hidden)
    allowed = f'(require-any {writes} (literal "/dev/null"))'
    rules = ["(version 1)", "(allow default)", f"(deny file-write* (require-not {allowed}))"]
    rules += vcs_guard.seatbelt_rules(policy.writable)
    if hidden:  # after the roots' writes: a root holding a secret does not uncover it
        rules.append(f"(deny file-read* file-write* {hidden})")
    # Unix sockets (the Docker daemon, the ssh-agent, launchd's services): none, but with the
    # network on the system's name resolution, which is one (a later rule wins).
    rules.append('(deny network-outbound (remote unix-socket (path-regex #"^/")))')
    if not policy.network:
        rules.append("(deny network-outbound (remote ip))")
    else:
        rules.append('(allow network-outbound (remote unix-socket (path-literal '
                     '"/private/var/run/mDNSResponder")))')  # fmt: skip
    return "\n".join(rules)


def environment(policy: Policy, env: dict[str, str]) -> dict[str, str]:
    """A confined command's environment: its temp files go to the private dir."""
    return {**env, "TMPDIR": str(policy.tmp)} if policy.confined else env


def blocked_note(output: str, ok: bool, policy: Policy) -> str | None:
    """What to tell the model when a confined command failed the way the sandbox makes
    commands fail (a refused write, read or connection); None otherwise."""
    if ok or not policy.confined:
        return None
    net = not policy.network and _DENIED_NET.search(output)
    write = _DENIED_WRITE.search(output)
    if not (net or write):
        return None
    what = "a network connection" if net else "a write or read outside what it may touch"
    where = ", ".join(str(p) for p in policy.writable) or "nowhere (read-only)"
    vcs = (
        " (but not in their version-control folders, .git, .hg and .jj: committing, fetching "
        "or changing the repository's settings is done outside the sandbox)"
        if policy.writable and _VCS_PATH.search(output)
        else ""
    )
    return (
        f"This command may have been blocked by the sandbox ({policy.level}): it refused "
        f"{what}. Inside the sandbox commands may write only in {where}{vcs} and the temp dir "
        f"$TMPDIR{'' if policy.network else ', and have no network'}. If the command must do "
        "this, run it again with `outside_sandbox: true` and a `reason`: the user is asked."
    )


def cleanup(policy: Policy) -> None:
    """Remove the private temp dir (at session close)."""
    scratch.remove(policy.tmp)


def describe(level: Level, how: Mechanism | None) -> str:
    """One line for `doctor` and the session's notice: the level, and what keeps it."""
    if level == "off":
        return "Sandbox off: commands can do anything you can; each one asks first."
    if how is None and _named_mechanism() == "none":
        return (
            f"Sandbox {level} cannot be kept while {MECHANISM_ENV}=none switches it off: "
            f"every command asks first. Unset {MECHANISM_ENV} to let the sandbox run safe "
            "commands without asking."
        )
    if how is None:
        return (
            f"Sandbox {level} cannot be kept on this machine (no bubblewrap, no Landlock, no "
            "sandbox-exec): every command asks first. Install bubblewrap (e.g. apt install "
            "bubblewrap) to run safe commands without asking."
        )
    return f"Sandbox {level}, kept by {how}: commands that stay inside it run without asking."


class Sandbox:
    """One session's sandbox: made with the session, its private temp dir at the first
    command, removed with the session (`close`). `passed`: the variables the user lets
    commands see besides the allowlist (`command_env`), at every level."""

    def __init__(self, level: Level, roots: tuple[Path, ...], passed: tuple[str, ...] = ()) -> None:
        self.level = level
        self.passed = passed
        self._roots = roots
        self._policy: Policy | None = None
        self._on_decided: Callable[[], None] | None = None

    @property
    def how(self) -> Mechanism | None:
        if self.level == "off":
            return None
        how = forced_mechanism()
        if self._on_decided is not None:  # the first command: the machine's answer is known
            callback, self._on_decided = self._on_decided, None
            callback()
        return how

    @property
    def decided(self) -> bool:
        """Whether `how` is known without asking the machine now (`start_probe`)."""
        return self.level == "off" or bool(_FOUND) or _named_mechanism() is not None

    def when_decided(self, callback: Callable[[], None]) -> None:
        """Call `callback` once `how` is first worked out (a command is about to run);
        a later call replaces an earlier one not yet called."""
        self._on_decided = callback

    @property
    def active(self) -> bool:
        """Commands run confined: a level other than off, and a way to keep it."""
        return self.level != "off" and self.how is not None

    @property
    def policy(self) -> Policy:
        if self._policy is None:
            self._policy = policy_for(self.level, self._roots, key_store())
        return self._policy

    def argv(self, argv: list[str]) -> list[str]:
        how = self.how
        return wrap(argv, self.policy, how) if self.active and how is not None else argv

    def env(self, env: dict[str, str]) -> dict[str, str]:
        return environment(self.policy, env) if self.active else env

    def note(self, output: str, ok: bool) -> str | None:
        return blocked_note(output, ok, self.policy) if self.active else None

    def unavailable(self) -> str | None:
        """What to tell the user once when the level cannot be kept; None when it can."""
        return describe(self.level, None) if self.level != "off" and self.how is None else None

    def close(self) -> None:
        if self._policy is not None:
            cleanup(self._policy)


MECHANISM_ENV = "ACP_SERVER_SANDBOX_WITH"


def forced_mechanism() -> Mechanism | None:
    """`mechanism()`, unless ACP_SERVER_SANDBOX_WITH names one (bubblewrap, landlock) or none
    (`none`): to use Landlock where bubblewrap is installed, or to try the fallback."""
    named = _named_mechanism()
    if named is not None:
        return None if named == "none" else named  # type: ignore[return-value]
    return mechanism()


def _named_mechanism() -> str | None:
    named = os.environ.get(MECHANISM_ENV, "").strip().lower()
    return named if named in ("none", "bubblewrap", "landlock", "seatbelt") else None
