"""`doctor`'s sandbox line names the protections in force (confine/protections.py): how root is
disarmed, how the network is kept off, unix sockets, leftover processes, the environment."""

from __future__ import annotations

import pytest

from acp_server.confine.sandbox import Mechanism
from acp_server.doctor.local import sandbox_check


@pytest.mark.parametrize("how", ["bubblewrap", "landlock", "seatbelt"])
def test_the_sandbox_line_names_what_keeps_a_command_in(
    how: Mechanism, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ACP_SERVER_SANDBOX_WITH", how)
    check = sandbox_check("workspace-write", {})
    assert check.status == "ok"
    assert check.line.startswith(f"Sandbox workspace-write, kept by {how}")
    for named in ("root ", "network off", "unix sockets refused", "leftover processes",
                  "environment: "):  # fmt: skip
        assert named in check.line, (named, check.line)
    on = sandbox_check("workspace-net", {})
    assert "network on" in on.line and "unix sockets refused" in on.line


def test_what_keeps_the_network_off_is_said_per_mechanism(monkeypatch: pytest.MonkeyPatch) -> None:
    lines = {}
    for how in ("bubblewrap", "landlock"):
        monkeypatch.setenv("ACP_SERVER_SANDBOX_WITH", how)
        lines[how] = sandbox_check("read-only", {}).line
    assert "namespace of its own" in lines["bubblewrap"] and "seccomp" in lines["bubblewrap"]
    assert "seccomp" in lines["landlock"] and "without capabilities" in lines["landlock"]


def test_off_and_a_level_that_cannot_be_kept_name_no_protection(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("ACP_SERVER_SANDBOX_WITH", "none")
    assert "unix sockets" not in sandbox_check("workspace-write", {}).line
    assert "unix sockets" not in sandbox_check("off", {}).line
