"""run_command: exit status, output, timeouts and cancellation never leave a process running,
both as a local subprocess and through a (fake, but really spawning) client terminal."""

from __future__ import annotations

import asyncio
import os
import signal
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from acp_server import schemas
from acp_server.editor_api import NoEditor
from acp_server.permissions import Permit
from acp_server.tools.base import ToolContext, ToolFailure, ToolOutcome
from acp_server.tools.commands.shell import OUTPUT_BYTE_LIMIT, RUN_COMMAND

HAS_PROC = Path("/proc/self/stat").exists()
needs_proc = pytest.mark.skipif(not HAS_PROC, reason="process checks read /proc")


class Harness:
    """A ToolContext whose emits, permits and client calls land in one ordered log."""

    def __init__(self, cwd: Path, client: Any = None) -> None:
        self.log: list[tuple[str, Any]] = []
        self.permits: list[Permit] = []
        self.ctx = ToolContext(
            call_id="call-1",
            cwd=cwd,
            roots=(cwd,),
            client=client if client is not None else NoEditor(),
            emit=lambda update: self.log.append(("emit", update)),
            permit=self._permit,
        )
        if client is not None:
            client.log = self.log

    async def _permit(self, permit: Permit) -> None:
        self.permits.append(permit)
        self.log.append(("permit", permit))

    async def run(self, **args: Any) -> ToolOutcome:
        return await RUN_COMMAND.run(args, self.ctx)

    def emitted(self) -> list[dict[str, Any]]:
        return [item for kind, item in self.log if kind == "emit"]


class Terminal:
    def __init__(self, proc: asyncio.subprocess.Process, limit: int) -> None:
        self.proc = proc
        self.limit = limit
        self.output = b""
        assert proc.stdout is not None
        self.pump = asyncio.ensure_future(self._pump(proc.stdout))

    async def _pump(self, stream: asyncio.StreamReader) -> None:
        while chunk := await stream.read(65536):
            self.output += chunk

    async def kill(self) -> None:
        """SIGKILL the group, reap the shell, and give the rest of the group time to die."""
        if self.proc.returncode is None:
            os.killpg(self.proc.pid, signal.SIGKILL)
        await self.proc.wait()
        for _ in range(100):
            if not HAS_PROC or not group_running(self.proc.pid):
                return
            await asyncio.sleep(0.01)

    def status(self) -> dict[str, Any]:
        code = self.proc.returncode
        assert code is not None
        if code < 0:
            return {"exitCode": None, "signal": signal.Signals(-code).name}
        return {"exitCode": code, "signal": None}


class TerminalClient(NoEditor):
    """Implements the terminal methods by spawning local processes, as an editor would."""

    can_terminal = True

    def __init__(self) -> None:
        self.log: list[tuple[str, Any]] = []
        self.terminals: dict[str, Terminal] = {}
        self.created: list[str] = []
        self.released: list[str] = []
        self.envs: list[list[dict[str, str]]] = []

    async def create_terminal(
        self,
        command: str,
        args: list[str],
        cwd: str,
        output_byte_limit: int,
        env: list[dict[str, str]],
    ) -> str:
        self.log.append(("create", (command, args, cwd, output_byte_limit)))
        self.envs.append(env)
        proc = await asyncio.create_subprocess_exec(
            command,
            *args,
            cwd=cwd,
            env={**os.environ, **{v["name"]: v["value"] for v in env}},
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.STDOUT,
            start_new_session=True,
        )
        terminal_id = f"term-{len(self.created) + 1}"
        self.terminals[terminal_id] = Terminal(proc, output_byte_limit)
        self.created.append(terminal_id)
        return terminal_id

    async def terminal_output(self, terminal_id: str) -> dict[str, Any]:
        self.log.append(("output", terminal_id))
        term = self.terminals[terminal_id]
        if term.proc.returncode is not None:
            await term.pump
        data = term.output[-term.limit :]
        reply: dict[str, Any] = {
            "output": data.decode("utf-8", "replace"),
            "truncated": len(data) < len(term.output),
        }
        if term.proc.returncode is not None:
            reply["exitStatus"] = term.status()
        return reply

    async def wait_for_terminal_exit(self, terminal_id: str) -> dict[str, Any]:
        self.log.append(("wait", terminal_id))
        term = self.terminals[terminal_id]
        await term.proc.wait()
        return term.status()

    async def kill_terminal(self, terminal_id: str) -> None:
        self.log.append(("kill", terminal_id))
        await self.terminals[terminal_id].kill()

    async def release_terminal(self, terminal_id: str) -> None:
        self.log.append(("release", terminal_id))
        term = self.terminals.pop(terminal_id)
        await term.kill()
        await term.pump
        self.released.append(terminal_id)

    def calls(self) -> list[str]:
        return [kind for kind, _ in self.log if kind not in ("emit", "permit")]


def group_running(pgid: int) -> bool:
    """Any non-zombie process in the group (this sandbox's init does not reap orphans)."""
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry}/stat").read_bytes()
        except OSError:
            continue
        fields = stat[stat.rfind(b")") + 2 :].split()
        if int(fields[2]) == pgid and fields[0] not in (b"Z", b"X"):
            return True
    return False


async def wait_for_file(path: Path) -> int:
    """The pid a command wrote to `path` once it exists."""
    for _ in range(500):
        if path.exists() and path.read_text().strip():
            return int(path.read_text())
        await asyncio.sleep(0.01)
    raise AssertionError(f"{path} never appeared")


# A command that leaves a background process in its group and blocks in the foreground.
SPAWNS_GROUP = "echo $$ > pgid; sleep 30 & echo $! > bg; sleep 30"


# --- local subprocess ------------------------------------------------------------------------


async def test_exit_zero_captures_stdout_and_stderr(tmp_path: Path) -> None:
    h = Harness(tmp_path)
    outcome = await h.run(command="echo hello; echo oops >&2")
    assert outcome.ok
    assert outcome.text == "Exit code 0\nhello\noops"
    assert outcome.content is not None and len(outcome.content) == 1
    shown = outcome.content[0]["content"]["text"]
    assert shown == "Exit code 0\n```\nhello\noops\n```"
    assert outcome.raw_output == {"exitCode": 0, "signal": None, "timedOut": False}


async def test_nonzero_exit_is_not_ok(tmp_path: Path) -> None:
    outcome = await Harness(tmp_path).run(command="echo failing; exit 3")
    assert not outcome.ok
    assert outcome.text.startswith("Exit code 3\nfailing")


async def test_no_output_is_said(tmp_path: Path) -> None:
    outcome = await Harness(tmp_path).run(command="true")
    assert outcome.text == "Exit code 0\n(no output)"


async def test_killed_by_signal(tmp_path: Path) -> None:
    outcome = await Harness(tmp_path).run(command="kill -9 $$")
    assert not outcome.ok
    assert outcome.text.startswith("Killed by signal SIGKILL")


async def test_long_output_keeps_the_end(tmp_path: Path) -> None:
    outcome = await Harness(tmp_path).run(command="seq 1 40000; echo the-error >&2")
    assert outcome.text.startswith("Exit code 0\n[… output truncated")
    assert outcome.text.endswith("39999\n40000\nthe-error")
    assert "\n1\n2\n3\n" not in outcome.text
    assert len(outcome.text) < OUTPUT_BYTE_LIMIT


async def test_cut_inside_a_utf8_character_is_clean(tmp_path: Path) -> None:
    # 3-byte characters: the 64 KiB cut lands inside one unless skipped over.
    outcome = await Harness(tmp_path).run(
        command="i=0; while [ $i -lt 300 ]; do printf '€%.0s' $(seq 100); i=$((i+1)); done"
    )
    assert "\ufffd" not in outcome.text
    assert outcome.text.endswith("€€€")


async def test_output_with_fences_stays_fenced(tmp_path: Path) -> None:
    outcome = await Harness(tmp_path).run(command="printf '```\\ncode\\n```\\n'")
    assert outcome.content is not None
    shown = outcome.content[0]["content"]["text"]
    assert shown.splitlines()[1] == "````" and shown.endswith("\n````")


async def test_pagers_are_off(tmp_path: Path) -> None:
    outcome = await Harness(tmp_path).run(command="echo $PAGER $GIT_PAGER $TERM")
    assert outcome.text == "Exit code 0\ncat cat dumb"


async def test_permit_gets_the_exact_command_and_resolved_cwd(tmp_path: Path) -> None:
    (tmp_path / "sub").mkdir()
    h = Harness(tmp_path)
    command = "printf '%s\\n' \"a  b\" | tr a A && pwd"
    outcome = await h.run(command=command, cwd="sub")
    assert h.permits == [Permit(command=command, cwd=tmp_path / "sub")]
    assert outcome.text == f"Exit code 0\nA  b\n{tmp_path / 'sub'}"


async def test_denied_command_does_not_run(tmp_path: Path) -> None:
    h = Harness(tmp_path)

    async def deny(permit: Permit) -> None:
        raise ToolFailure("denied")

    h.ctx.permit = deny
    with pytest.raises(ToolFailure, match="denied"):
        await h.run(command="touch ran")
    assert not (tmp_path / "ran").exists()


async def test_missing_cwd_fails_clearly(tmp_path: Path) -> None:
    with pytest.raises(ToolFailure, match=r"directory .*nowhere does not exist"):
        await Harness(tmp_path).run(command="true", cwd="nowhere")
    (tmp_path / "file").write_text("x")
    with pytest.raises(ToolFailure, match="is not a directory"):
        await Harness(tmp_path).run(command="true", cwd=str(tmp_path / "file"))


@needs_proc
async def test_timeout_stops_the_whole_group(tmp_path: Path) -> None:
    started = time.monotonic()
    outcome = await Harness(tmp_path).run(command=SPAWNS_GROUP, timeout_seconds=0.3)
    assert time.monotonic() - started < 2
    assert not outcome.ok
    assert outcome.text.startswith("Timed out after 0.3 s")
    assert outcome.raw_output == {"exitCode": None, "signal": "SIGTERM", "timedOut": True}
    assert not group_running(int((tmp_path / "pgid").read_text()))


@needs_proc
async def test_background_leftovers_are_stopped_when_the_command_ends(tmp_path: Path) -> None:
    started = time.monotonic()
    outcome = await Harness(tmp_path).run(command="echo $$ > pgid; sleep 30 & echo done")
    assert time.monotonic() - started < 2
    assert outcome.ok and outcome.text.endswith("done")
    assert not group_running(int((tmp_path / "pgid").read_text()))


@needs_proc
async def test_cancel_kills_and_reaps_the_group(tmp_path: Path) -> None:
    task = asyncio.ensure_future(Harness(tmp_path).run(command=SPAWNS_GROUP))
    pgid = await wait_for_file(tmp_path / "pgid")
    await wait_for_file(tmp_path / "bg")
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert not group_running(pgid)
    assert not Path(f"/proc/{pgid}").exists()  # the shell, our child, was reaped


# --- client terminal -------------------------------------------------------------------------


async def test_terminal_runs_via_sh_and_is_released(tmp_path: Path) -> None:
    client = TerminalClient()
    h = Harness(tmp_path, client)
    outcome = await h.run(command="echo hi; exit 4")
    assert not outcome.ok
    assert outcome.text == "Exit code 4\nhi"
    assert outcome.content == [{"type": "terminal", "terminalId": "term-1"}]
    kind, (command, args, cwd, limit) = h.log[1]
    assert (kind, cwd, limit) == ("create", str(tmp_path), 65536)
    # Through keep_env.py, which leaves the editor's environment to the allowlist.
    assert command == sys.executable and args[2].endswith("keep_env.py")
    assert args[args.index("--") + 1 :] == ["/bin/sh", "-c", "echo hi; exit 4"]
    assert client.calls() == ["create", "wait", "output", "release"]
    assert client.released == client.created == ["term-1"]
    assert h.ctx.terminals == []


async def test_terminal_gets_pagers_off(tmp_path: Path) -> None:
    client = TerminalClient()
    outcome = await Harness(tmp_path, client).run(command="echo $PAGER $GIT_PAGER")
    assert outcome.text == "Exit code 0\ncat cat"
    assert client.envs[0][:2] == [
        {"name": "PAGER", "value": "cat"},
        {"name": "GIT_PAGER", "value": "cat"},
    ]


async def test_terminal_content_is_emitted_before_waiting(tmp_path: Path) -> None:
    h = Harness(tmp_path, TerminalClient())
    outcome = await h.run(command="echo ok")
    assert outcome.ok
    kinds = [kind for kind, _ in h.log]
    assert kinds[:4] == ["permit", "create", "emit", "wait"]
    assert h.emitted() == [
        {
            "sessionUpdate": "tool_call_update",
            "toolCallId": "call-1",
            "status": "in_progress",
            "content": [{"type": "terminal", "terminalId": "term-1"}],
        }
    ]


async def test_terminal_output_truncated_by_client_is_said(tmp_path: Path) -> None:
    h = Harness(tmp_path, TerminalClient())
    outcome = await h.run(command="seq 1 30000")
    assert outcome.ok
    assert "[… output truncated" in outcome.text
    assert outcome.text.endswith("\n30000")


@needs_proc
async def test_terminal_timeout_kills_then_reads_then_releases(tmp_path: Path) -> None:
    client = TerminalClient()
    h = Harness(tmp_path, client)
    outcome = await h.run(command=SPAWNS_GROUP, timeout_seconds=0.3)
    assert not outcome.ok
    assert outcome.text.startswith("Timed out after 0.3 s")
    assert client.calls() == ["create", "wait", "kill", "output", "release"]
    assert h.ctx.terminals == []
    assert not group_running(int((tmp_path / "pgid").read_text()))


@needs_proc
async def test_terminal_cancel_kills_and_releases(tmp_path: Path) -> None:
    client = TerminalClient()
    h = Harness(tmp_path, client)
    task = asyncio.ensure_future(h.run(command=SPAWNS_GROUP))
    pgid = await wait_for_file(tmp_path / "pgid")
    while not h.emitted():  # the tool has the id once it announced the terminal
        await asyncio.sleep(0.01)
    assert h.ctx.terminals == ["term-1"]
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert client.calls() == ["create", "wait", "kill", "release"]
    assert client.released == ["term-1"]
    assert h.ctx.terminals == []
    assert not group_running(pgid)


async def test_cancel_while_creating_still_releases(tmp_path: Path) -> None:
    class SlowCreate(TerminalClient):
        async def create_terminal(
            self,
            command: str,
            args: list[str],
            cwd: str,
            output_byte_limit: int,
            env: list[dict[str, str]],
        ) -> str:
            await asyncio.sleep(0.1)
            return await super().create_terminal(command, args, cwd, output_byte_limit, env)

    client = SlowCreate()
    h = Harness(tmp_path, client)
    task = asyncio.ensure_future(h.run(command="sleep 30"))
    await asyncio.sleep(0.02)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert client.released == client.created == ["term-1"]
    assert h.ctx.terminals == []


# --- presentation and schema -----------------------------------------------------------------


def test_title_is_the_command(tmp_path: Path) -> None:
    ctx = Harness(tmp_path).ctx
    present = RUN_COMMAND.present
    assert present({"command": "git status"}, ctx).title == "Run `git status`"
    assert present({"command": "git status"}, ctx).locations == []
    long = present({"command": "x" * 200}, ctx).title
    assert len(long) < 100 and long.endswith("…`")
    assert present({"command": "make\nmake test"}, ctx).title == "Run `make …`"
    assert present({"command": "echo `date`"}, ctx).title == "Run `` echo `date` ``"
    assert present({}, ctx).title == "Run a command"


def test_schema_accepts_and_rejects() -> None:
    name = "tools/run_command.json"
    assert schemas.problems(name, {"command": "ls", "cwd": "src", "timeout_seconds": 5}) == []
    assert schemas.problems(name, {"command": "ls", "shell": "bash"}) != []
    assert schemas.problems(name, {"command": "ls", "timeout_seconds": 5000}) != []
    assert schemas.problems(name, {}) == ["`command` is required"]


# --- the agent's keys ------------------------------------------------------------------------

KEY = "sk-test-" + "5" * 24


async def test_commands_do_not_get_the_agents_keys(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    monkeypatch.setenv("ANTHROPIC_API_KEY", KEY + "x")
    outcome = await Harness(tmp_path).run(command="env")
    assert outcome.ok and "PATH=" in outcome.text
    assert KEY not in outcome.text
    assert "OPENAI_API_KEY" not in outcome.text and "ANTHROPIC_API_KEY" not in outcome.text


async def test_editor_terminals_keep_only_the_allowlist_of_the_editors_environment(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A terminal inherits the editor's environment, and terminal/create can only set
    variables: the command line starts with keep_env.py, which drops the agent's keys and every
    other variable not on the allowlist, and keeps the ones we set."""
    monkeypatch.setenv("OPENAI_API_KEY", KEY)  # the fake editor's terminals inherit ours
    monkeypatch.setenv("GITHUB_TOKEN", KEY + "gh")
    monkeypatch.setenv("LANG", "C.UTF-8")
    client = TerminalClient()
    outcome = await Harness(tmp_path, client).run(command="env")
    assert KEY not in outcome.text and "GITHUB_TOKEN" not in outcome.text
    assert "LANG=C.UTF-8" in outcome.text and "PAGER=cat" in outcome.text
