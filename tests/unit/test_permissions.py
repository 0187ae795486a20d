"""The permission table, rule scoping and path safety."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from acp_server.permissions import (
    Effect,
    Mode,
    Permissions,
    Permit,
    Rule,
    RuleStore,
    command_words,
    decide,
    rule_for,
)

# (mode, effect, where) -> verdict, written out from the documented table (README).
EXPECTED: dict[tuple[Mode, Effect, str], str] = {
    ("ask", "read", "in"): "allow",
    ("ask", "edit", "in"): "ask",
    ("ask", "execute", "in"): "ask",
    ("accept_edits", "read", "in"): "allow",
    ("accept_edits", "edit", "in"): "allow",
    ("accept_edits", "execute", "in"): "ask",
    ("plan", "read", "in"): "allow",
    ("plan", "edit", "in"): "deny",
    ("plan", "execute", "in"): "deny",
    ("bypass", "read", "in"): "allow",
    ("bypass", "edit", "in"): "allow",
    ("bypass", "execute", "in"): "allow",
    ("ask", "read", "out"): "ask",
    ("ask", "edit", "out"): "ask",
    ("ask", "execute", "out"): "ask",
    ("accept_edits", "read", "out"): "ask",
    ("accept_edits", "edit", "out"): "ask",
    ("accept_edits", "execute", "out"): "ask",
    ("plan", "read", "out"): "ask",
    ("plan", "edit", "out"): "deny",
    ("plan", "execute", "out"): "deny",
    ("bypass", "read", "out"): "ask",
    ("bypass", "edit", "out"): "ask",
    ("bypass", "execute", "out"): "ask",
    ("ask", "fetch", "web"): "ask",
    ("accept_edits", "fetch", "web"): "ask",
    ("plan", "fetch", "web"): "ask",  # reading a page changes nothing
    ("bypass", "fetch", "web"): "allow",
}


@pytest.fixture
def project(tmp_path: Path) -> tuple[Path, Path]:
    root = tmp_path / "project"
    outside = tmp_path / "elsewhere"
    (root / "src").mkdir(parents=True)
    outside.mkdir()
    return root, outside


def permit_for(effect: Effect, target: Path) -> Permit:
    if effect == "execute":
        return Permit(command="make test", cwd=target)
    if effect == "fetch":
        return Permit(url="https://docs.python.org/3/")
    return Permit(paths=(target / "file.txt",))


@pytest.mark.parametrize(("mode", "effect", "where"), sorted(EXPECTED))
def test_mode_table(project: tuple[Path, Path], mode: Mode, effect: Effect, where: str) -> None:
    root, outside = project
    target = root / "src" if where == "in" else outside
    got = decide(effect, permit_for(effect, target), mode, (root,), [])
    assert got.verdict == EXPECTED[(mode, effect, where)]


def test_think_always_runs(project: tuple[Path, Path]) -> None:
    root, _ = project
    for mode in ("ask", "accept_edits", "plan", "bypass"):
        assert decide("think", Permit(), mode, (root,), []).verdict == "allow"


def test_plan_refusal_explains_itself(project: tuple[Path, Path]) -> None:
    root, _ = project
    got = decide("edit", permit_for("edit", root), "plan", (root,), [])
    assert "Plan mode" in got.reason and "read-only" in got.reason


@pytest.mark.parametrize("mode", ["ask", "accept_edits", "plan", "bypass"])
def test_escapes_never_run_without_asking(project: tuple[Path, Path], mode: Mode) -> None:
    root, outside = project
    (root / "link").symlink_to(outside)
    sneaky = [
        root / "src" / ".." / ".." / "elsewhere" / "x.txt",
        root / "link" / "x.txt",
        outside / "x.txt",
        Path("/etc/passwd"),
    ]
    for path in sneaky:
        for effect in ("read", "edit"):
            verdict = decide(effect, Permit(paths=(path,)), mode, (root,), []).verdict
            assert verdict in ("ask", "deny"), (path, effect, mode)


def test_additional_roots_count_as_inside(project: tuple[Path, Path]) -> None:
    root, outside = project
    got = decide("edit", Permit(paths=(outside / "a",)), "accept_edits", (root, outside), [])
    assert got.verdict == "allow"


def test_always_allow_git_status_does_not_allow_other_commands(project: tuple[Path, Path]) -> None:
    root, _ = project
    rule = rule_for("execute", Permit(command="git status", cwd=root), True)
    assert rule == Rule("execute", "git status", True)

    def verdict(command: str) -> str:
        return decide("execute", Permit(command=command, cwd=root), "ask", (root,), [rule]).verdict

    assert verdict("git status") == "allow"
    assert verdict("git status --short") == "allow"
    for other in (
        "rm -rf /",
        "git push",
        "git statusx",
        "git status; rm -rf /",
        "git status && rm -rf .",
        "git status | sh",
        "git status > /etc/x",
        "git status $(rm -rf /)",
        "git status `rm -rf /`",
        "git status\nrm -rf /",
    ):
        assert verdict(other) == "ask", other


def test_rule_prefix_scoping() -> None:
    assert rule_for("execute", Permit(command="ls -la"), True) == Rule("execute", "ls", True)
    assert rule_for("execute", Permit(command="pytest tests/unit -q"), True) == Rule(
        "execute", "pytest", True
    )
    assert rule_for("execute", Permit(command="cd x && make"), True) is None
    assert command_words("echo 'a;b'") is None  # conservative: any operator character


def test_edit_rule_covers_one_tree(project: tuple[Path, Path]) -> None:
    root, _ = project
    rule = rule_for("edit", Permit(paths=(root / "src" / "a.py",)), True)
    assert rule is not None
    assert (
        decide("edit", Permit(paths=(root / "src" / "b.py",)), "ask", (root,), [rule]).verdict
        == "allow"
    )
    assert decide("edit", Permit(paths=(root / "README",)), "ask", (root,), [rule]).verdict == "ask"


@pytest.mark.parametrize("mode", ["ask", "accept_edits"])
def test_an_escalation_out_of_the_sandbox_is_never_remembered(
    project: tuple[Path, Path], mode: Mode
) -> None:
    """`make` outside the sandbox runs what the Makefile says, and a command in the sandbox
    may rewrite the Makefile without a question: no rule allows it, none is offered."""
    root, _ = project
    escalation = Permit(command="make test", cwd=root, escalation=True, reason="cache in HOME")
    assert rule_for("execute", escalation, True) is None
    assert rule_for("execute", escalation, False) == Rule("execute", "make test", False)
    saved = [Rule("execute", "make", True)]  # an older version's "always allow `make …`"
    assert decide("execute", escalation, mode, (root,), saved).verdict == "ask"
    plain = Permit(command="make test", cwd=root)  # with the sandbox off, the rule still counts
    assert decide("execute", plain, mode, (root,), saved).verdict == "allow"
    rejected = [Rule("execute", "make", False)]
    assert decide("execute", escalation, mode, (root,), rejected).verdict == "deny"


def test_reject_always_wins_even_in_bypass(project: tuple[Path, Path]) -> None:
    root, _ = project
    rule = Rule("execute", "rm", False)
    got = decide("execute", Permit(command="rm -rf build", cwd=root), "bypass", (root,), [rule])
    assert got.verdict == "deny"


def test_rules_are_saved_per_project(tmp_path: Path) -> None:
    data = tmp_path / "data"
    first = Permissions(RuleStore(tmp_path / "p1", data))
    first.remember(Rule("execute", "git status", True))
    again = Permissions(RuleStore(tmp_path / "p1", data))
    other = Permissions(RuleStore(tmp_path / "p2", data))
    assert again.rules == [Rule("execute", "git status", True)]
    assert other.rules == []
    assert oct(os.stat(first.store.path).st_mode)[-3:] in ("644", "600", "664")


def test_corrupt_rule_file_is_ignored(tmp_path: Path) -> None:
    store = RuleStore(tmp_path / "p", tmp_path / "data")
    store.path.parent.mkdir(parents=True)
    store.path.write_text("{not json", encoding="utf-8")
    assert Permissions(store).rules == []


def test_a_fetch_rule_covers_one_host() -> None:
    asked = Permit(url="https://Docs.Python.org/3/library/")
    rule = rule_for("fetch", asked, True)
    assert rule == Rule("fetch", "docs.python.org", True)
    assert rule.describe() == "fetches from docs.python.org"
    assert rule.matches("fetch", Permit(url="http://docs.python.org/2/"))
    assert not rule.matches("fetch", Permit(url="https://docs.python.org.evil.test/"))
    assert not rule.matches("execute", Permit(command="curl docs.python.org"))
    assert rule_for("fetch", Permit(url="not a url"), True) is None


@pytest.mark.parametrize("mode", ["ask", "accept_edits", "bypass"])
def test_a_secret_place_inside_the_project_still_asks(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, mode: Mode
) -> None:
    """A session whose folder is HOME: its ~/.ssh is inside the roots, and reading or editing
    it asks all the same, in every mode, whatever rule was remembered for the folder."""
    monkeypatch.setenv("HOME", str(tmp_path))
    (tmp_path / ".ssh").mkdir()
    key = tmp_path / ".ssh" / "id_ed25519"
    rules = [Rule("read", str(tmp_path), True), Rule("edit", str(tmp_path), True)]
    for effect in ("read", "edit"):
        verdict = decide(effect, Permit(paths=(key,)), mode, (tmp_path,), rules)
        assert verdict.verdict == "ask", (effect, verdict)
        assert "where keys are kept" in verdict.reason
    notes = tmp_path / "notes.txt"
    assert decide("read", Permit(paths=(notes,)), mode, (tmp_path,), []).verdict == "allow"
