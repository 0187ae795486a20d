"""confine.files: a checked path is opened with no link followed, by openat2 and by the
step-by-step walk (the fallback where the kernel has no openat2), and written atomically."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from acp_server.confine import files, secrets


@pytest.fixture(params=["openat2", "walk"])
def way(request: pytest.FixtureRequest) -> Iterator[str]:
    """Both ways of opening; the walk is what a kernel without openat2 (or a seccomp filter
    that refuses it, as container runtimes do) gets."""
    saved = dict(files._state)
    if request.param == "walk":
        files._openat2_call()
        files._state["call"] = None
    elif files._openat2_call() is None:
        pytest.skip("this kernel has no openat2")
    yield request.param
    files._state.clear()
    files._state.update(saved)


def test_a_regular_file_is_read(tmp_path: Path, way: str) -> None:
    (tmp_path / "a.txt").write_bytes(b"hello\n")
    assert files.read_bytes(tmp_path / "a.txt", 100) == b"hello\n"


@pytest.mark.parametrize("link_at", ["file", "folder"])
def test_a_link_anywhere_on_the_way_is_refused(tmp_path: Path, way: str, link_at: str) -> None:
    (tmp_path / "real").mkdir()
    (tmp_path / "real" / "a.txt").write_text("secret\n")
    if link_at == "file":
        (tmp_path / "real" / "b.txt").symlink_to(tmp_path / "real" / "a.txt")
        path = tmp_path / "real" / "b.txt"
    else:
        (tmp_path / "via").symlink_to(tmp_path / "real")
        path = tmp_path / "via" / "a.txt"
    with pytest.raises(files.Refused, match="without following a link"):
        files.read_bytes(path, 100)


def test_what_is_not_a_regular_file_is_refused_without_waiting(tmp_path: Path, way: str) -> None:
    os.mkfifo(tmp_path / "pipe")  # no writer: a blocking open would wait forever
    with pytest.raises(files.Refused, match="FIFO"):
        files.read_bytes(tmp_path / "pipe", 100)
    with pytest.raises(files.Refused, match="is a directory"):
        files.read_bytes(tmp_path, 100)
    if os.path.exists("/dev/null"):
        with pytest.raises(files.Refused, match="device"):
            files.read_bytes(Path("/dev/null"), 100)
    with pytest.raises(files.Missing):
        files.read_bytes(tmp_path / "nope", 100)


def test_the_size_is_checked_before_reading(tmp_path: Path, way: str) -> None:
    with open(tmp_path / "big", "wb") as f:
        f.truncate(10 * 1024 * 1024)
    with pytest.raises(files.Refused, match=r"10\.0 MB, more than the 1\.0 MB"):
        files.read_bytes(tmp_path / "big", 1024 * 1024)


def test_a_write_replaces_a_link_swapped_in_at_the_name(tmp_path: Path, way: str) -> None:
    outside = tmp_path / "bashrc"
    outside.write_text("original\n")
    (tmp_path / "project").mkdir()
    (tmp_path / "project" / "notes.txt").symlink_to(outside)  # swapped in after the check
    files.write_atomic(tmp_path / "project" / "notes.txt", b"new\n")
    assert outside.read_text() == "original\n"
    assert not (tmp_path / "project" / "notes.txt").is_symlink()
    assert (tmp_path / "project" / "notes.txt").read_text() == "new\n"
    assert sorted(os.listdir(tmp_path / "project")) == ["notes.txt"]  # no temp file left


def test_a_write_keeps_the_permissions_and_makes_missing_folders(tmp_path: Path, way: str) -> None:
    script = tmp_path / "run.sh"
    script.write_text("old\n")
    script.chmod(0o751)
    files.write_atomic(script, b"new\n")
    assert (script.stat().st_mode & 0o777, script.read_text()) == (0o751, "new\n")
    files.write_atomic(tmp_path / "a" / "b" / "c.txt", b"deep\n")
    assert (tmp_path / "a" / "b" / "c.txt").read_text() == "deep\n"


def test_a_write_never_makes_folders_through_a_link(tmp_path: Path, way: str) -> None:
    (tmp_path / "outside").mkdir()
    (tmp_path / "project").mkdir()
    (tmp_path / "project" / "sub").symlink_to(tmp_path / "outside")
    with pytest.raises(files.Refused, match="without following a link"):
        files.write_atomic(tmp_path / "project" / "sub" / "new" / "x.txt", b"x")
    assert list((tmp_path / "outside").iterdir()) == []


def test_a_target_is_resolved_once_and_named_under_the_root_as_given(tmp_path: Path) -> None:
    (tmp_path / "var" / "home").mkdir(parents=True)
    (tmp_path / "home").symlink_to(tmp_path / "var" / "home")  # /home -> var/home
    root = tmp_path / "home"
    (root / "notes.txt").write_text("x")
    (root / "link.txt").symlink_to(root / "notes.txt")
    plain = files.target(root / "notes.txt", (root,))
    assert (plain.real, plain.shown) == (
        tmp_path / "var" / "home" / "notes.txt",
        root / "notes.txt",
    )
    assert not plain.through_link
    linked = files.target(root / "link.txt", (root,))
    assert linked.shown == root / "notes.txt" and linked.through_link


@pytest.mark.parametrize(
    ("name", "words"),
    [("n" * 300, "300 bytes long"), ("a\0b", "NUL byte"), ("é" * 130, "260 bytes long")],
)
def test_names_no_system_takes_are_refused_in_words(tmp_path: Path, name: str, words: str) -> None:
    with pytest.raises(files.Refused, match=words):
        files.target(tmp_path / name)


def test_secret_places_are_known(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "cfg"))
    monkeypatch.delenv("ACP_SERVER_CONFIG", raising=False)
    (tmp_path / ".ssh").mkdir()
    (tmp_path / "project").mkdir()
    (tmp_path / "project" / "key").symlink_to(tmp_path / ".ssh" / "id_ed25519")
    assert secrets.is_secret(tmp_path / ".ssh" / "id_ed25519")
    assert secrets.is_secret(tmp_path / "project" / "key")  # resolved
    assert secrets.is_secret(tmp_path / "cfg" / "acp-server" / "config.toml")
    assert not secrets.is_secret(tmp_path / "project" / "notes.txt")
