"""An "always allow" for a command outside the sandbox must not become "always run anything"
(issue 29, finding 6), through the real console script under bubblewrap and Landlock.

The attack: `make` outside the sandbox is allowed (with "always", if offered); a command in the
sandbox, which runs without a question, rewrites the Makefile to print the SSH key; `make`
outside again. It must ask again, and the first request must not offer "always" at all. A
rule file written by an older version (an "always allow `make …`") must not allow it either.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from acp_server.permissions import RuleStore
from tests.e2e.test_sandbox_e2e import REQUIRED, environment
from tests.e2e.test_tools_e2e import call, open_session, run_prompt
from tests.support.fake_editor import FakeEditor
from tests.unit.test_confine_sandbox import available

Start = Callable[..., Any]
MAKEFILE = "all:\n\t@echo built\n"
OUTSIDE = {"outside_sandbox": True, "reason": "make writes to the build cache in HOME"}


@pytest.fixture(params=["bubblewrap", "landlock"])
def how(request: pytest.FixtureRequest) -> str:
    if shutil.which("make") is None:
        pytest.skip("make is not installed")
    if not available(request.param):
        if REQUIRED:
            pytest.fail(f"{request.param} is not available on this machine")
        pytest.skip(f"{request.param} is not available on this machine")
    return str(request.param)


def always_if_offered(params: dict[str, Any]) -> str:
    """The user who says "always" whenever they can."""
    kinds = {o["kind"] for o in params["options"]}
    return "allow_always" if "allow_always" in kinds else "allow_once"


async def test_the_makefile_attack_asks_again(
    server_factory: Start, script: Any, tmp_path: Path, how: str
) -> None:
    project = tmp_path / "project"
    project.mkdir()
    (project / "Makefile").write_text(MAKEFILE, encoding="utf-8")
    env, home = environment(tmp_path, "workspace-write", how)
    key = home / ".ssh" / "id_ed25519"
    rewrite = f"printf 'all:\\n\\t@cat {key}\\n' > Makefile"
    rounds = [
        call("run_command", command="make", **OUTSIDE),
        call("run_command", command=rewrite),  # in the sandbox: no question
        call("run_command", command="make", **OUTSIDE),
        {"text": "Done."},
    ]
    answers: list[Callable[[dict[str, Any]], str]] = [always_if_offered, lambda _: "reject_once"]
    editor = FakeEditor(fs=False, terminal=False, choose=lambda p: answers.pop(0)(p))
    server = await server_factory("--script", str(script(rounds)), env=env)
    session = await open_session(server, editor, project)
    stop, frames = await run_prompt(server, session)
    assert stop == "end_turn"
    assert "@cat" in (project / "Makefile").read_text()  # the rewrite ran, in the sandbox
    asked = [r["toolCall"]["rawInput"]["command"] for r in editor.permission_requests]
    assert asked == ["make", "make"]  # the second run outside asked again
    first = editor.permission_requests[0]
    assert [o["kind"] for o in first["options"]] == ["allow_once", "reject_once", "reject_always"]
    assert "only be allowed once" in json.dumps(first["toolCall"]["content"])
    assert "PRIVATE KEY" not in json.dumps(frames)


async def test_a_saved_rule_from_an_older_version_does_not_allow_it(
    server_factory: Start, script: Any, tmp_path: Path, how: str
) -> None:
    project = tmp_path / "project"
    project.mkdir()
    (project / "Makefile").write_text(MAKEFILE, encoding="utf-8")
    env, _ = environment(tmp_path, "workspace-write", how)
    rules = RuleStore(project, Path(env["ACP_SERVER_DATA_DIR"])).path
    rules.parent.mkdir(parents=True)
    old = {"effect": "execute", "pattern": "make", "allow": True}
    rules.write_text(json.dumps({"project": str(project), "rules": [old]}), encoding="utf-8")
    rounds = [
        call("run_command", command="make"),  # in the sandbox: runs, as before
        call("run_command", command="make", **OUTSIDE),
        {"text": "Done."},
    ]
    editor = FakeEditor(fs=False, terminal=False, choose=lambda params: "reject_once")
    server = await server_factory("--script", str(script(rounds)), env=env)
    session = await open_session(server, editor, project)
    stop, frames = await run_prompt(server, session)
    assert stop == "end_turn"
    assert [r["toolCall"]["rawInput"]["command"] for r in editor.permission_requests] == ["make"]
    assert "built" in json.dumps(frames)  # the sandboxed one ran
