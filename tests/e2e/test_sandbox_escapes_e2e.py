"""Issue 29's findings 2, 5 and 9 over the real wire: a command the model runs in the sandbox
(no prompt) tries to read the agent's own environment through /proc, to reach docker.sock and
the user's ssh-agent, and to leave a `setsid` process behind; under bubblewrap and Landlock,
as root (the suite's user here) and as an ordinary user the suite makes
(tests/support/unprivileged.py).
"""

from __future__ import annotations

import json
import os
import shlex
import signal
import socket
import sys
import threading
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.test_background_e2e import until_gone
from tests.e2e.test_sandbox_e2e import results
from tests.e2e.test_tools_e2e import call, open_session, run_prompt
from tests.support.fake_editor import FakeEditor
from tests.support.unprivileged import User, unprivileged
from tests.unit.test_confine_sandbox import available

Start = Callable[..., Any]
REQUIRED = os.environ.get("ACP_REQUIRE_SANDBOX") == "1"
SECRET = "acp-fake-29-" + uuid.uuid4().hex


@pytest.fixture(params=["bubblewrap", "landlock"])
def how(request: pytest.FixtureRequest) -> str:
    mechanism: str = request.param
    if not available(mechanism):  # type: ignore[arg-type]
        if REQUIRED:
            pytest.fail(f"{mechanism} is not available on this machine")
        pytest.skip(f"{mechanism} is not available on this machine")
    return mechanism


@pytest.fixture(params=["root", "user"])
def who(request: pytest.FixtureRequest) -> User | None:
    """None: the suite's own user (root here); else the ordinary user."""
    if request.param == "root":
        if os.geteuid() != 0:
            pytest.skip("the suite does not run as root here")
        return None
    return unprivileged()


class Place:
    """Where one test's server lives: HOME, the project and the scripted backend's rounds, in
    a folder the server's user owns."""

    def __init__(self, who: User | None, tmp_path: Path) -> None:
        self.who = who
        self.base = who.folder("esc") if who is not None else tmp_path
        self.home = self.base / "home"
        self.project = self.base / "project"
        for folder in (self.home, self.project):
            folder.mkdir()
        self.python = who.python if who is not None else sys.executable
        if who is not None:
            who.own(self.home, self.project)

    def script(self, rounds: list[dict[str, Any]]) -> Path:
        path = self.base / f"script-{uuid.uuid4().hex}.json"
        path.write_text(json.dumps(rounds), encoding="utf-8")
        path.chmod(0o644)
        return path

    async def start(self, server_factory: Start, rounds: list[dict[str, Any]], **env: str) -> Any:
        extra = {
            "ACP_SERVER_SANDBOX_WITH": env.pop("how"),
            "ACP_SERVER_SANDBOX": env.pop("level", "workspace-write"),
            **env,
        }
        args = ("--script", str(self.script(rounds)))
        if self.who is None:
            env_all = {
                "HOME": str(self.home),
                "ACP_SERVER_DATA_DIR": str(self.base / "data"),
                **extra,
            }
            return await server_factory(*args, env=env_all)
        user_env = self.who.env(self.home, extra)
        return await server_factory(*args, env=user_env, as_user=self.who)


async def one_command(server: Any, project: Path) -> tuple[str, str]:
    editor = FakeEditor(fs=False, terminal=False)
    session = await open_session(server, editor, project)
    stop, frames = await run_prompt(server, session)
    assert stop == "end_turn"
    assert editor.permission_requests == []  # it ran in the sandbox, without asking
    (done,) = results(frames).values()  # keyed by the command as shown: keys are redacted
    return done


async def test_the_agents_environment_cannot_be_read_through_proc(
    server_factory: Start, tmp_path: Path, how: str, who: User | None
) -> None:
    """The key is in the agent's environment, not in the command's (a key variable is
    removed from it): the command looks for it in every process's /proc/<pid>/environ."""
    place = Place(who, tmp_path)
    command = (
        f'for f in /proc/[0-9]*/environ; do grep -q {SECRET} "$f" 2>/dev/null && '
        'echo "LEAKED $f"; done; echo searched'
    )
    rounds = [call("run_command", command=command), {"text": "Tried."}]
    server = await place.start(server_factory, rounds, how=how, ANTHROPIC_API_KEY=SECRET)
    _, text = await one_command(server, place.project)
    assert SECRET in Path(f"/proc/{server.proc.pid}/environ").read_text(errors="replace")
    assert "searched" in text and "LEAKED" not in text, text


class UnixListener:
    def __init__(self, path: Path) -> None:
        self.server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.server.bind(str(path))
        path.chmod(0o777)  # anyone may connect: only the sandbox may stand in the way
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


@pytest.fixture
def sockets(tmp_path: Path) -> Iterator[Callable[[Path], tuple[Path, Path]]]:
    made: list[UnixListener] = []

    def make(folder: Path) -> tuple[Path, Path]:
        run = folder / "run"
        run.mkdir()
        run.chmod(0o755)
        docker, agent = run / "docker.sock", run / "agent.sock"
        made.extend([UnixListener(docker), UnixListener(agent)])
        return docker, agent

    yield make
    for listener in made:
        listener.close()


@pytest.mark.parametrize("level", ["read-only", "workspace-net"])
async def test_docker_sock_and_the_ssh_agent_are_out_of_reach(
    server_factory: Start,
    tmp_path: Path,
    how: str,
    who: User | None,
    level: str,
    sockets: Callable[[Path], tuple[Path, Path]],
) -> None:
    place = Place(who, tmp_path)
    docker, agent = sockets(place.base)
    code = (
        "import socket, sys\nfor path in sys.argv[1:]:\n"
        "    try:\n        s = socket.socket(socket.AF_UNIX); s.connect(path); print(s.recv(10))\n"
        "    except OSError as e:\n        print(path, e)"
    )
    # The agent's SSH_AUTH_SOCK is not passed on (the allowlisted environment), but its path
    # is easily found (/tmp/ssh-*/agent.*): the command names it.
    command = f"{shlex.quote(place.python)} -c {shlex.quote(code)} {docker} {agent}"
    rounds = [call("run_command", command=command), {"text": "Tried."}]
    server = await place.start(
        server_factory, rounds, how=how, level=level, SSH_AUTH_SOCK=str(agent)
    )
    _, text = await one_command(server, place.project)
    assert "reached" not in text and str(agent) in text, text


async def test_a_setsid_child_does_not_outlive_its_command_or_the_agent(
    server_factory: Start, tmp_path: Path, how: str, who: User | None
) -> None:
    place = Place(who, tmp_path)
    token = f"acp-escapee-{uuid.uuid4().hex}"
    command = f"setsid sh -c 'sleep 60; : {token}' > /dev/null 2>&1 < /dev/null & sleep 0.3"
    rounds = [call("run_command", command=command), {"text": "Started."}]
    server = await place.start(server_factory, rounds, how=how)
    try:
        status, _ = await one_command(server, place.project)
        assert status == "completed"
        after_the_command = await until_gone(token, 5)
        server.proc.send_signal(signal.SIGKILL)  # the agent ends without cleaning up
        after_the_agent = await until_gone(token, 5)
    finally:
        from tests.e2e.test_background_e2e import processes_running

        for pid in processes_running(token):
            os.kill(pid, signal.SIGKILL)
    assert after_the_command == [] and after_the_agent == []
