"""The sandbox on this machine: what a confined command may write, read and reach, under
bubblewrap and under Landlock alike (each where the machine has it; CI installs bubblewrap
and requires both: ACP_REQUIRE_SANDBOX=1)."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from acp_server.confine import sandbox
from acp_server.confine.landlock_exec import abi, readable
from acp_server.confine.sandbox import Level, Mechanism, Policy
from tests.support.policies import made, removed_policies  # noqa: F401 (autouse)

REQUIRED = os.environ.get("ACP_REQUIRE_SANDBOX") == "1"


def available(how: Mechanism) -> bool:
    if how == "bubblewrap":
        bwrap = shutil.which("bwrap")
        return bwrap is not None and sandbox._bwrap_works(bwrap)
    return abi() >= 1


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
    """A HOME with a secret in ~/.ssh."""
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


def run(command: str, policy: Policy, how: Mechanism, cwd: Path) -> tuple[int, str]:
    argv = sandbox.wrap(["/bin/sh", "-c", command], policy, how)
    env = sandbox.environment(policy, dict(os.environ))
    done = subprocess.run(argv, cwd=cwd, env=env, capture_output=True, text=True, timeout=30)
    return done.returncode, done.stdout + done.stderr


def policy(level: Level, project: Path) -> Policy:
    return made(level, (project,))


def test_workspace_write_writes_the_project_and_its_temp_dir_only(
    how: Mechanism, home: Path, project: Path, tmp_path: Path
) -> None:
    rules = policy("workspace-write", project)
    code, out = run('echo in > inside.txt && echo t > "$TMPDIR/t"', rules, how, project)
    assert code == 0, out
    assert (project / "inside.txt").read_text() == "in\n" and (rules.tmp / "t").exists()
    for target in (tmp_path / "outside.txt", home / "x.txt"):
        code, out = run(f"echo out > {target}", rules, how, project)
        assert code != 0 and not target.exists(), out
        note = sandbox.blocked_note(out, False, rules)
        assert note is not None and "blocked by the sandbox" in note and "outside_sandbox" in note
    sandbox.cleanup(rules)
    assert not rules.tmp.exists()


def test_secrets_are_unreadable_inside(how: Mechanism, home: Path, project: Path) -> None:
    rules = policy("workspace-write", project)
    code, out = run(f"cat {home}/.ssh/id_ed25519", rules, how, project)
    assert code != 0 and "PRIVATE KEY" not in out
    code, out = run("cat /etc/hostname >/dev/null && echo readable", rules, how, project)
    assert code == 0 and "readable" in out, out  # the rest of the system still reads


def test_read_only_writes_nothing(how: Mechanism, home: Path, project: Path) -> None:
    rules = policy("read-only", project)
    code, out = run("echo x > inside.txt", rules, how, project)
    assert code != 0 and not (project / "inside.txt").exists(), out


@pytest.fixture
def listener() -> Iterator[int]:
    """A TCP server on 127.0.0.1 that answers one byte to whoever connects."""
    server = socket.create_server(("127.0.0.1", 0))
    server.settimeout(10)
    port = server.getsockname()[1]

    def serve() -> None:
        while True:
            try:
                conn, _ = server.accept()
            except OSError:
                return
            with conn:
                conn.sendall(b"!")

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    yield port
    server.close()


CONNECT = (
    "python3 -c \"import socket; s=socket.create_connection(('127.0.0.1', {port}), 5); "
    "print('got', s.recv(1))\""
)


def test_the_network_is_off_unless_the_level_allows_it(
    how: Mechanism, home: Path, project: Path, listener: int
) -> None:
    command = CONNECT.format(port=listener)
    code, out = run(command, policy("workspace-write", project), how, project)
    assert code != 0 and "got" not in out, out
    note = sandbox.blocked_note(out, False, policy("workspace-write", project))
    assert note is not None and "network" in note
    code, out = run(command, policy("workspace-net", project), how, project)
    assert code == 0 and "got b'!'" in out, out


def test_off_wraps_nothing_and_notes_nothing(project: Path) -> None:
    rules = policy("off", project)
    assert not rules.confined and rules.network
    assert sandbox.blocked_note("Permission denied", False, rules) is None


def test_a_successful_command_is_never_called_blocked(project: Path) -> None:
    rules = policy("workspace-write", project)
    assert sandbox.blocked_note("Read-only file system", True, rules) is None
    assert sandbox.blocked_note("tests failed: 3", False, rules) is None


def test_levels_are_named_and_a_wrong_one_says_the_choices() -> None:
    assert sandbox.parse_level(" Read-Only ", "--sandbox") == "read-only"
    with pytest.raises(ValueError, match="off, read-only, workspace-write, workspace-net"):
        sandbox.parse_level("strict", "ACP_SERVER_SANDBOX")


def test_landlock_grants_everything_but_the_hidden_paths(tmp_path: Path) -> None:
    (tmp_path / "home" / ".ssh").mkdir(parents=True)
    (tmp_path / "home" / "code").mkdir()
    (tmp_path / "home" / ".bashrc").write_text("")
    (tmp_path / "home" / "back").symlink_to(tmp_path / "home")  # a way round to ~/.ssh
    grants = set(readable([str(tmp_path / "home" / ".ssh")]))
    assert (
        str(tmp_path / "home" / "code") in grants and str(tmp_path / "home" / ".bashrc") in grants
    )
    assert not any(
        g == str(tmp_path / "home" / ".ssh") or g.startswith(str(tmp_path / "home" / ".ssh") + "/")
        for g in grants
    )
    assert not any(
        Path(g) in (tmp_path / "home").parents or g == str(tmp_path / "home") for g in grants
    )
    assert str(tmp_path / "home" / "back") not in grants
    assert "/usr" in grants


def test_the_probe_in_the_background_and_a_caller_meanwhile_get_one_answer() -> None:
    """`start_probe` checks in a thread; a caller that asks meanwhile waits for that answer
    rather than starting bubblewrap again, and a second start starts nothing."""
    found, probe = list(sandbox._FOUND), sandbox._PROBE
    sandbox._FOUND.clear()
    sandbox._PROBE = None
    try:
        sandbox.start_probe()
        thread = sandbox._PROBE
        assert thread is not None and thread.name == "sandbox-probe"
        answers: list[Mechanism | None] = []
        askers = [threading.Thread(target=lambda: answers.append(sandbox.mechanism()))
                  for _ in range(2)]  # fmt: skip
        for asker in askers:
            asker.start()
        for asker in askers:
            asker.join(10)
        thread.join(10)
        sandbox.start_probe()
        assert sandbox._PROBE is thread  # once per process
        assert len(sandbox._FOUND) == 1
        assert answers == [sandbox._FOUND[0]] * 2 == [sandbox._find()] * 2
    finally:
        sandbox._FOUND[:] = found
        sandbox._PROBE = probe


def test_a_sandbox_not_yet_decided_calls_back_at_its_first_command(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """Before the machine's answer is known, the session's notice waits for the first command
    (`when_decided`: the latest callback, once), instead of starting bubblewrap at a turn's
    start."""
    monkeypatch.delenv(sandbox.MECHANISM_ENV, raising=False)
    found = list(sandbox._FOUND)
    sandbox._FOUND.clear()
    try:
        box = sandbox.Sandbox("workspace-write", (tmp_path,))
        assert not box.decided
        called: list[object] = []
        box.when_decided(lambda: called.append("replaced"))
        box.when_decided(lambda: called.append(("latest", box.unavailable())))
        how = box.how
        assert box.decided and called == [("latest", sandbox.describe("workspace-write", None)
                                           if how is None else None)]  # fmt: skip
        assert box.how == how and len(called) == 1
        assert sandbox.Sandbox("off", (tmp_path,)).decided
    finally:
        sandbox._FOUND[:] = found
