"""Which instruction files are read, in which order, clipped how, read again when."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from acp_server.workspace import instructions
from acp_server.workspace.instructions import Reader, chain, clip, collect, project_root, render


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


def test_the_project_root_is_the_git_root_else_the_cwd(tmp_path: Path) -> None:
    (tmp_path / "repo" / ".git").mkdir(parents=True)
    deep = tmp_path / "repo" / "a" / "b"
    deep.mkdir(parents=True)
    assert project_root(deep) == tmp_path / "repo"
    write(tmp_path / "wt" / ".git", "gitdir: elsewhere\n")  # a worktree's .git is a file
    assert project_root(tmp_path / "wt") == tmp_path / "wt"
    (tmp_path / "plain").mkdir()
    assert project_root(tmp_path / "plain") in {tmp_path / "plain", *tmp_path.parents}


def test_chain_runs_from_the_root_down(tmp_path: Path) -> None:
    assert chain(tmp_path, tmp_path / "a" / "b") == [tmp_path, tmp_path / "a", tmp_path / "a/b"]
    assert chain(tmp_path / "x", tmp_path / "y") == [tmp_path / "y"]


def test_per_folder_the_first_name_that_exists_is_read(tmp_path: Path) -> None:
    write(tmp_path / "a" / "CLAUDE.md", "claude")
    write(tmp_path / "a" / ".cursorrules", "cursor")
    write(tmp_path / "b" / ".github" / "copilot-instructions.md", "copilot")
    write(tmp_path / "b" / ".rules", "rules")
    write(tmp_path / "c" / "AGENTS.md", "agents")
    write(tmp_path / "c" / "CLAUDE.md", "claude too")
    (tmp_path / "d" / "AGENTS.md").mkdir(parents=True)  # a folder of that name is no file
    write(tmp_path / "d" / "GEMINI.md", "gemini")
    folders = [("project", tmp_path / name) for name in "abcd"]
    assert [f.text for f in collect(Reader(), folders)] == ["claude", "copilot", "agents", "gemini"]


def test_a_file_is_given_once_and_in_the_order_of_its_sources(tmp_path: Path) -> None:
    write(tmp_path / "AGENTS.md", "root")
    write(tmp_path / "sub" / "AGENTS.md", "sub")
    sources = [("user", tmp_path / "sub"), ("project", tmp_path), ("nested", tmp_path / "sub")]
    found = collect(Reader(), sources)
    assert [(f.scope, f.text) for f in found] == [("user", "sub"), ("project", "root")]


def test_long_files_are_clipped_on_a_line_and_say_so(tmp_path: Path) -> None:
    line = "x" * 99 + "\n"
    write(tmp_path / "AGENTS.md", line * 400)  # 40,000 characters
    (found,) = collect(Reader(), [("project", tmp_path)])
    assert found.clipped and found.size == 40_000
    assert len(found.text) <= instructions.FILE_CHARS and found.text.endswith("x")
    text = render([found], tmp_path)
    assert "This file has 40,000 characters; only the first 15,999 are shown" in text
    assert clip("short", 10) == ("short", False)


def test_all_files_together_stay_within_the_total(tmp_path: Path) -> None:
    big = "y" * (instructions.FILE_CHARS + 10)
    folders = []
    for n in range(5):
        write(tmp_path / f"f{n}" / "AGENTS.md", big)
        folders.append(("project", tmp_path / f"f{n}"))
    found = collect(Reader(), folders)
    assert sum(len(f.text) for f in found) <= instructions.TOTAL_CHARS
    assert all(f.clipped for f in found)


def test_a_changed_file_is_read_again_an_unchanged_one_is_not(tmp_path: Path) -> None:
    path = write(tmp_path / "AGENTS.md", "first")
    reader = Reader()
    assert reader.read(path) == "first"
    path.write_text("second", encoding="utf-8")
    os.utime(path, ns=(1, 1))
    assert reader.read(path) == "second"
    path.write_text("SECOND", encoding="utf-8")  # the same size and time: not read again
    os.utime(path, ns=(1, 1))
    assert reader.read(path) == "second"
    path.unlink()
    assert reader.read(path) is None


def test_render_names_each_file_and_its_scope(tmp_path: Path) -> None:
    write(tmp_path / "AGENTS.md", "root rule\n")
    write(tmp_path / "src" / "AGENTS.md", "src rule\n")
    write(tmp_path / "cfg" / "AGENTS.md", "user rule\n")
    sources = [("user", tmp_path / "cfg"), ("project", tmp_path), ("nested", tmp_path / "src")]
    text = render(collect(Reader(), sources), tmp_path)
    assert text.startswith(instructions.HEADER)
    assert "## cfg/AGENTS.md (the user's instructions, for every project)\nuser rule" in text
    assert "## AGENTS.md (the project's instructions)\nroot rule" in text
    assert "## src/AGENTS.md (for files under src/)\nsrc rule" in text
    assert text.index("user rule") < text.index("root rule") < text.index("src rule")
    assert render([], tmp_path) == ""


def test_a_small_window_takes_a_share_of_it_for_the_files(tmp_path: Path) -> None:
    assert instructions.total_for(None) == instructions.TOTAL_CHARS
    assert instructions.total_for(10**6) == instructions.TOTAL_CHARS
    assert instructions.total_for(4096) == 3276  # a fifth of the window, ~4 characters a token
    write(tmp_path / "AGENTS.md", "rule\n" * 2000)
    (found,) = collect(Reader(), [("project", tmp_path)], instructions.total_for(4096))
    assert found.clipped and len(found.text) <= 3276


def test_a_cwd_the_system_cannot_look_at_has_no_git_root(tmp_path: Path) -> None:
    """Found by the structural fuzz: an editor's cwd with a name too long for the system made
    session/load fail with an internal error."""
    from acp_server.workspace.instructions import has_git, project_root

    too_long = tmp_path / ("é" * 300)
    assert not has_git(too_long)
    assert project_root(too_long) == too_long


def test_a_link_is_followed_only_inside_the_roots_and_out_of_secret_places(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    root, outside = tmp_path / "project", tmp_path / "elsewhere"
    key = write(tmp_path / "home" / ".ssh" / "id_ed25519", "KEY")
    write(root / "docs" / "rules.md", "shared rule\n")
    write(outside / "rules.md", "outside rule\n")
    (root / "AGENTS.md").symlink_to(root / "docs" / "rules.md")  # inside: read
    (root / "a").mkdir()
    (root / "a" / "AGENTS.md").symlink_to(outside / "rules.md")
    write(root / "a" / "CLAUDE.md", "fallback rule\n")
    (root / "b").mkdir()
    (root / "b" / "AGENTS.md").symlink_to(key)
    sources = [("project", root), ("nested", root / "a"), ("nested", root / "b")]
    found = collect(Reader((root, tmp_path / "home")), sources)
    read = {f.path.relative_to(root).as_posix(): f.text for f in found if not f.skipped}
    skipped = {f.path.relative_to(root).as_posix(): f.skipped for f in found if f.skipped}
    assert read == {"AGENTS.md": "shared rule\n", "a/CLAUDE.md": "fallback rule\n"}
    assert skipped == {
        "a/AGENTS.md": f"it leads to {outside / 'rules.md'}, outside the project",
        "b/AGENTS.md": f"it leads to {key}, where keys and credentials are kept",
    }
    text = render(found, root)
    assert "[a/AGENTS.md was not read: it leads to" in text and "KEY" not in text


def test_the_users_own_file_may_link_out_of_the_project_but_not_to_a_key(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HOME", str(tmp_path))
    key = write(tmp_path / ".ssh" / "id_ed25519", "KEY")
    write(tmp_path / "dotfiles" / "AGENTS.md", "my rule\n")
    (tmp_path / "cfg").mkdir()
    (tmp_path / "cfg" / "AGENTS.md").symlink_to(tmp_path / "dotfiles" / "AGENTS.md")
    (tmp_path / "cfg2").mkdir()
    (tmp_path / "cfg2" / "AGENTS.md").symlink_to(key)
    found = collect(
        Reader((tmp_path / "project",)), [("user", tmp_path / "cfg"), ("user", tmp_path / "cfg2")]
    )
    assert [(f.text, f.skipped[:10]) for f in found] == [("my rule\n", ""), ("", "it leads t")]


def test_a_fifo_named_agents_md_is_skipped_without_waiting(tmp_path: Path) -> None:
    os.mkfifo(tmp_path / "AGENTS.md")  # made by a sandboxed command; no writer ever comes
    write(tmp_path / "CLAUDE.md", "claude\n")
    found = collect(Reader((tmp_path,)), [("project", tmp_path)])
    assert [(f.path.name, bool(f.skipped), f.text) for f in found] == [
        ("AGENTS.md", True, ""),
        ("CLAUDE.md", False, "claude\n"),
    ]
    assert "FIFO" in found[0].skipped
