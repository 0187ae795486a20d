"""Ignore rules and hidden names, as grep and glob see them with ripgrep and with Python alike:
nested .gitignore files and negation, .ignore, .git/info/exclude, the user's global excludes
(found through GIT_CONFIG_GLOBAL, or git's default under XDG_CONFIG_HOME), hidden files, and the
switches that bring them back."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from acp_server.tools.search.glob import GLOB, GREP
from acp_server.tools.search.ignore import Rules, Scope, global_excludes
from tests.support.search_engines import Harness, tree

VISIBLE = ["keep.log", "src/app.py", "sub/deeper/local.txt", "sub/main.txt"]
IGNORED = [
    "build/out.py",  # .gitignore: build/
    "debug.log",  # .gitignore: *.log (keep.log is re-included by !keep.log)
    "sub/local.txt",  # sub/.gitignore: local.txt (sub/deeper/.gitignore re-includes its own)
    "vendor/lib.py",  # .ignore: vendor/
    "excluded.txt",  # .git/info/exclude
    "notes.secret",  # the global excludes file named by GIT_CONFIG_GLOBAL
    "node_modules/pkg/index.js",  # left out even without a rule
]
HIDDEN = [".env", ".hidden/x.txt"]


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, engine: str) -> Harness:
    home, root = tmp_path / "home", tmp_path / "project"
    root.mkdir()
    subprocess.run(["git", "init", "-q", str(root)], check=True)
    files: dict[str, str | bytes] = {name: "needle\n" for name in VISIBLE + IGNORED + HIDDEN}
    files |= {
        ".gitignore": "build/\n*.log\n!keep.log\n",
        "sub/.gitignore": "local.txt\n",
        "sub/deeper/.gitignore": "!local.txt\n",
        ".ignore": "vendor/\n",
    }
    tree(root, files)
    (root / ".git" / "info").mkdir(exist_ok=True)
    (root / ".git" / "info" / "exclude").write_text("excluded.txt\n")
    tree(home, {"global-ignore": "*.secret\n", "gitconfig": "[core]\n"})
    (home / "gitconfig").write_text(f"[core]\n\texcludesFile = {home / 'global-ignore'}\n")
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(home / "xdg"))
    monkeypatch.setenv("GIT_CONFIG_GLOBAL", str(home / "gitconfig"))
    monkeypatch.setenv("GIT_CONFIG_NOSYSTEM", "1")
    return Harness(root)


async def grep_files(h: Harness, **args: object) -> list[str]:
    out = await h.run(GREP, pattern="needle", files_only=True, max_results=2000, **args)
    return sorted(line for line in out.text.splitlines() if not line.startswith("["))


async def test_grep_leaves_out_ignored_and_hidden_files(project: Harness) -> None:
    assert await grep_files(project) == VISIBLE


async def test_glob_leaves_out_ignored_and_hidden_files(project: Harness) -> None:
    out = await project.run(GLOB, pattern="**/*.*")
    files = [line for line in out.text.splitlines() if not line.endswith("/")]
    assert files == VISIBLE


async def test_the_switches_bring_back_ignored_and_hidden_files(project: Harness) -> None:
    assert await grep_files(project, include_ignored=True) == sorted(VISIBLE + IGNORED)
    assert await grep_files(project, include_hidden=True) == sorted(VISIBLE + HIDDEN)
    everything = await grep_files(project, include_hidden=True, include_ignored=True)
    assert everything == sorted(VISIBLE + IGNORED + HIDDEN)  # and never .git's own files
    glob = await project.run(GLOB, pattern="**/*.py", include_ignored=True)
    assert glob.text.splitlines() == ["build/out.py", "src/app.py", "vendor/lib.py"]


async def test_a_pattern_naming_a_hidden_folder_asks_for_it(project: Harness) -> None:
    assert (await project.run(GLOB, pattern=".hidden/**")).text == ".hidden/x.txt"
    out = await project.run(GREP, pattern="needle", glob="**/.env")
    assert out.text == ".env:1: needle"


async def test_rules_above_the_search_root_still_apply(project: Harness) -> None:
    out = await project.run(GREP, pattern="needle", path="sub", files_only=True)
    assert out.text.splitlines() == ["sub/deeper/local.txt", "sub/main.txt"]


async def test_a_search_started_inside_an_ignored_folder_looks_at_it(project: Harness) -> None:
    tree(project.cwd, {"build/deep/more.log": "needle\n", "build/deep/more.py": "needle\n"})
    out = await project.run(GREP, pattern="needle", path="build", files_only=True)
    assert out.text.splitlines() == ["build/deep/more.py", "build/out.py"]  # *.log still applies
    listed = await project.run(GLOB, pattern="build/**/*.py")
    assert listed.text.splitlines() == ["build/deep/more.py", "build/out.py"]


async def test_the_default_global_excludes_file_under_xdg_config_home(
    project: Harness, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    (tmp_path / "home" / "gitconfig").write_text("[user]\n\tname = x\n")  # no excludesFile
    tree(tmp_path / "home" / "xdg", {"git/ignore": "main.txt\n"})
    assert global_excludes(project.cwd / "sub") == tmp_path / "home/xdg/git/ignore"
    found = await grep_files(project)
    assert "sub/main.txt" not in found and "notes.secret" in found


async def test_git_rules_apply_only_inside_a_repository(tmp_path: Path, engine: str) -> None:
    tree(tmp_path, {".gitignore": "*.txt\n", ".ignore": "*.md\n", "a.txt": "x", "b.md": "x"})
    tree(tmp_path, {"c.py": "x"})
    out = await Harness(tmp_path).run(GLOB, pattern="**/*")
    assert out.text.splitlines() == ["a.txt", "c.py"]  # .ignore applies anywhere


def test_rules_decide_by_the_deepest_folder_and_by_negation(tmp_path: Path) -> None:
    tree(tmp_path, {".git/HEAD": "", ".gitignore": "*.gen\n!keep.gen\n", "a/.gitignore": "x\n"})
    rules = Rules(tmp_path, Scope())
    assert rules.skips(tmp_path / "b.gen", False)
    assert not rules.skips(tmp_path / "keep.gen", False)
    assert not rules.skips(tmp_path / "x", False)  # a/.gitignore speaks only below a/
    assert rules.skips(tmp_path / ".hidden", True) and rules.skips(tmp_path / ".git", True)
    assert not Rules(tmp_path, Scope(hidden=True)).skips(tmp_path / ".hidden", True)
