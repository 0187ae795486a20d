"""The attacks of issue 29's findings 2, 5 and 9 against a confined command, run through
`sandbox.wrap` under bubblewrap and under Landlock as the suite's user (root here: dev
containers and CI run as root). Each attack is harmless if it succeeds (it mounts a tmpfs
on a folder of the test, sets the loopback's MTU to its own value, writes a uniquely named
file in /dev/shm) and is undone by the test.
"""

from __future__ import annotations

import os
import pty
import shlex
import socket
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from acp_server.confine import sandbox
from acp_server.confine.sandbox import Level, Mechanism, Policy
from tests.support.policies import made, removed_policies  # noqa: F401 (autouse)
from tests.unit.test_confine_sandbox import available

REQUIRED = os.environ.get("ACP_REQUIRE_SANDBOX") == "1"
PY = shlex.quote(sys.executable)


@pytest.fixture(params=["bubblewrap", "landlock"])
def how(request: pytest.FixtureRequest) -> Mechanism:
    mechanism: Mechanism = request.param
    if not available(mechanism):
        if REQUIRED:
            pytest.fail(f"{mechanism} is not available on this machine")
        pytest.skip(f"{mechanism} is not available on this machine")
    return mechanism


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    home = tmp_path / "home"
    (home / ".ssh").mkdir(parents=True)
    (home / ".ssh" / "id_ed25519").write_text("PRIVATE KEY\n", encoding="utf-8")
    monkeypatch.setenv("HOME", str(home))
    return home


@pytest.fixture
def project(tmp_path: Path) -> Path:
    path = tmp_path / "project"
    path.mkdir()
    return path


def policy(level: Level, project: Path) -> Policy:
    return made(level, (project,))


def run(
    command: str,
    rules: Policy,
    how: Mechanism,
    cwd: Path,
    env: dict[str, str] | None = None,
    **popen: object,
) -> tuple[int, str]:
    argv = sandbox.wrap(["/bin/sh", "-c", command], rules, how)
    full = sandbox.environment(rules, {**os.environ, **(env or {})})
    done = subprocess.run(
        argv,
        cwd=cwd,
        env=full,
        capture_output=True,
        text=True,
        timeout=30,
        **popen,  # type: ignore[call-overload]
    )
    return done.returncode, done.stdout + done.stderr


def python(code: str) -> str:
    return f"{PY} -c {shlex.quote(code)}"


# --- finding 2: root keeps nothing -----------------------------------------------------------


def test_no_capability_is_left_inside(how: Mechanism, home: Path, project: Path) -> None:
    code, out = run(
        "grep -E '^Cap(Eff|Prm|Bnd|Amb)' /proc/self/status",
        policy("read-only", project),
        how,
        project,
    )
    assert code == 0, out
    values = dict(line.split(":") for line in out.strip().splitlines())
    assert {k: v.strip() for k, v in values.items()} == {
        k: "0000000000000000" for k in ("CapEff", "CapPrm", "CapBnd", "CapAmb")
    }, out


def test_mounts_cannot_be_changed(how: Mechanism, home: Path, project: Path) -> None:
    target = project / "m"
    target.mkdir()
    key = home / ".ssh" / "id_ed25519"
    command = f"mount -t tmpfs none {target}; echo mount=$?; umount -l {home}/.ssh; cat {key}; " + (
        "mount -o remount,rw /; echo remount=$?" if how == "bubblewrap" else ""
    )
    try:
        _, out = run(command, policy("workspace-write", project), how, project)
    finally:
        subprocess.run(["umount", "-l", str(target)], capture_output=True, check=False)
    assert "mount=0" not in out and "remount=0" not in out and "PRIVATE KEY" not in out, out


def test_the_parent_process_environment_is_unreadable(
    how: Mechanism, home: Path, project: Path
) -> None:
    """A stand-in for the agent, holding a key in its environment, runs the command; the
    command reads /proc/<stand-in>/environ."""
    rules = policy("workspace-write", project)
    argv = sandbox.wrap(["/bin/sh", "-c", 'cat "/proc/$AGENT_PID/environ"'], rules, how)
    agent = (
        "import os, subprocess, sys; os.environ['AGENT_PID'] = str(os.getpid()); "
        "sys.exit(subprocess.run(sys.argv[1:]).returncode)"
    )
    env = {**os.environ, "FAKE_API_KEY": "sk-fake-29-environ", "TMPDIR": str(rules.tmp)}
    done = subprocess.run(
        [sys.executable, "-c", agent, *argv], cwd=project, env=env, capture_output=True, timeout=30
    )
    assert b"sk-fake-29-environ" not in done.stdout + done.stderr
    assert done.returncode != 0


def test_no_keystrokes_can_be_typed_into_a_terminal(
    how: Mechanism, home: Path, project: Path
) -> None:
    """TIOCSTI on a terminal the command holds (a pty the test opens; as root, any terminal)."""
    master, slave = pty.openpty()
    try:
        attack = "import fcntl, termios; fcntl.ioctl(0, termios.TIOCSTI, b'x'); print('typed')"
        code, out = run(
            python(attack), policy("workspace-write", project), how, project, stdin=slave
        )
    finally:
        os.close(slave)
        os.close(master)
    assert code != 0 and "typed" not in out, out


def test_the_host_network_cannot_be_configured(how: Mechanism, home: Path, project: Path) -> None:
    """Setting the loopback's MTU to the value it has needs CAP_NET_ADMIN and changes nothing."""
    mtu = Path("/sys/class/net/lo/mtu").read_text().strip()
    _, out = run(
        f"ip link set lo mtu {mtu} && echo configured",
        policy("workspace-net", project),
        how,
        project,
    )
    assert "configured" not in out, out


def test_dev_shm_of_the_host_is_not_writable(how: Mechanism, home: Path, project: Path) -> None:
    name = Path("/dev/shm") / f"acp-test-{uuid.uuid4().hex}"
    try:
        run(f"echo x > {name}", policy("workspace-write", project), how, project)
        assert not name.exists()
    finally:
        name.unlink(missing_ok=True)


# --- finding 5: no network means none ----------------------------------------------------------


@pytest.fixture
def udp_listener() -> Iterator[tuple[int, list[bytes]]]:
    server = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    server.bind(("127.0.0.1", 0))
    server.settimeout(0.2)
    got: list[bytes] = []
    stop = threading.Event()

    def serve() -> None:
        while not stop.is_set():
            try:
                got.append(server.recv(100))
            except OSError:
                continue

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    yield server.getsockname()[1], got
    stop.set()
    thread.join(2)
    server.close()


@pytest.fixture
def tcp_listener() -> Iterator[int]:
    server = socket.create_server(("127.0.0.1", 0))
    port = server.getsockname()[1]

    def serve() -> None:
        while True:
            try:
                conn, _ = server.accept()
            except OSError:
                return
            with conn:
                conn.sendall(b"reached")

    threading.Thread(target=serve, daemon=True).start()
    yield port
    server.close()


def test_mptcp_and_udp_do_not_leave_when_the_network_is_off(
    how: Mechanism,
    home: Path,
    project: Path,
    tcp_listener: int,
    udp_listener: tuple[int, list[bytes]],
) -> None:
    udp_port, received = udp_listener
    mptcp = (
        "import socket; s = socket.socket(socket.AF_INET, socket.SOCK_STREAM, 262); "
        f"s.settimeout(5); s.connect(('127.0.0.1', {tcp_listener})); print(s.recv(10))"
    )
    udp = (
        "import socket; s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); "
        f"s.sendto(b'leaked', ('127.0.0.1', {udp_port})); print('sent')"
    )
    for level in ("read-only", "workspace-write"):
        rules = policy(level, project)
        _, out = run(f"{python(mptcp)}; {python(udp)}", rules, how, project)
        assert "reached" not in out, (level, out)
    time.sleep(0.3)
    assert received == []


class UnixListener:
    """A unix socket server (pathname or abstract) answering "reached" to each connection."""

    def __init__(self, address: str | bytes) -> None:
        self.server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.server.bind(address)
        self.server.listen()
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self.server.accept()
            except OSError:
                return
            with conn:
                conn.sendall(b"reached")

    def close(self) -> None:
        self.server.close()


def connect_unix(address: str) -> str:
    return (
        python(
            "import socket, sys; s = socket.socket(socket.AF_UNIX); s.settimeout(5); "
            "a = sys.argv[1]; s.connect(('\\0' + a[1:]) if a.startswith('@') else a); "
            "print(s.recv(10))"
        )
        + f" {shlex.quote(address)}"
    )


@pytest.mark.parametrize("level", ["read-only", "workspace-write", "workspace-net"])
def test_unix_sockets_of_the_host_are_out_of_reach(
    how: Mechanism, home: Path, project: Path, tmp_path: Path, level: Level
) -> None:
    """docker.sock and an ssh-agent stand in a folder the command can read; an abstract
    socket has no folder at all."""
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    docker, agent = str(run_dir / "docker.sock"), str(run_dir / "agent.sock")
    abstract = f"@acp-test-{uuid.uuid4().hex}"
    listeners = [
        UnixListener(docker),
        UnixListener(agent),
        UnixListener(b"\0" + abstract[1:].encode()),
    ]
    try:
        rules = policy(level, project)
        command = "; ".join(connect_unix(a) for a in (docker, '"$SSH_AUTH_SOCK"', abstract))
        command = command.replace(shlex.quote('"$SSH_AUTH_SOCK"'), '"$SSH_AUTH_SOCK"')
        _, out = run(command, rules, how, project, env={"SSH_AUTH_SOCK": agent})
    finally:
        for listener in listeners:
            listener.close()
    assert "reached" not in out, out


def test_a_socketpair_still_works_inside(how: Mechanism, home: Path, project: Path) -> None:
    """What shells, Python and git use between their own processes is left alone."""
    code = "import socket; a, b = socket.socketpair(); a.sendall(b'ok'); print(b.recv(2).decode())"
    status, out = run(python(code), policy("workspace-write", project), how, project)
    assert status == 0 and out.strip() == "ok", out


def test_a_closed_pipe_still_ends_a_command_inside(how: Mechanism, project: Path) -> None:
    """SIGPIPE is not left ignored by the launcher's interpreter: `yes` ends quietly."""
    status, out = run("yes | head -1", policy("workspace-write", project), how, project)
    assert status == 0 and out == "y\n", out


def test_multiprocessing_still_works_inside(how: Mechanism, project: Path) -> None:
    """Its locks and queues are POSIX semaphores in /dev/shm: a private one inside (under
    Landlock where a mount namespace can be made: as root here)."""
    code = "import multiprocessing as m; q = m.Queue(); q.put('ok'); print(q.get())"
    status, out = run(python(code), policy("workspace-write", project), how, project)
    assert status == 0 and out.strip() == "ok", out


# --- finding 9: nothing outlives the command's end -----------------------------------------


def running(token: str) -> list[str]:
    found = []
    for entry in os.listdir("/proc"):
        try:
            cmdline = Path(f"/proc/{entry}/cmdline").read_bytes()
            state = Path(f"/proc/{entry}/stat").read_bytes().rsplit(b")", 1)[1].split()[0]
        except (OSError, IndexError):
            continue
        if token.encode() in cmdline and state != b"Z":
            found.append(entry)
    return found


def test_a_setsid_child_does_not_outlive_the_command(
    how: Mechanism, home: Path, project: Path
) -> None:
    token = f"acp-escapee-{uuid.uuid4().hex}"
    sleeper = python("import sys, time; time.sleep(60)") + f" {token}"
    rules = policy("workspace-write", project)
    argv = sandbox.wrap(
        ["/bin/sh", "-c", f"setsid {sleeper} > /dev/null 2>&1 & sleep 0.5"], rules, how
    )
    env = sandbox.environment(rules, dict(os.environ))
    proc = subprocess.Popen(argv, cwd=project, env=env, start_new_session=True)
    try:
        proc.wait(timeout=30)
        deadline = time.monotonic() + 5
        while running(token) and time.monotonic() < deadline:
            time.sleep(0.05)
        left = running(token)
    finally:
        for pid in running(token):
            os.kill(int(pid), 9)
    assert left == []
