"""The grep tool over a real temporary tree, by ripgrep and by Python alike: matches and their
locations, options, binary and huge files, the cap, and what models ask for (context lines,
files_only, multiline, patterns only Python's re takes)."""

from __future__ import annotations

import contextlib
import os
import threading
import time
from pathlib import Path

import pytest

from acp_server.tools.base import ToolFailure
from acp_server.tools.search.glob import GREP
from tests.support.search_engines import SAMPLE, Harness, tree


@pytest.fixture
def h(tmp_path: Path, engine: str) -> Harness:
    tree(tmp_path, SAMPLE)
    return Harness(tmp_path)


async def test_grep_finds_lines_and_reports_locations(h: Harness) -> None:
    out = await h.run(GREP, pattern=r"def \w+")
    assert out.text.splitlines() == [
        "src/app.py:1: def main():",
        "src/util/helper.py:1: def helper():",
    ]
    assert out.locations == [
        {"path": str(h.cwd / "src/app.py"), "line": 1},
        {"path": str(h.cwd / "src/util/helper.py"), "line": 1},
    ]
    assert h.permits[0].paths == (h.cwd,)


async def test_grep_skips_tool_directories_and_honors_options(h: Harness) -> None:
    out = await h.run(GREP, pattern="main", ignore_case=True, glob="*.{md,yml}")
    assert out.text.splitlines() == ["docs/README.md:1: # Main docs"]
    hidden = await h.run(GREP, pattern="main", glob="*.yml", include_hidden=True)
    assert hidden.text == ".github/ci.yml:1: main: true"
    scoped = await h.run(GREP, pattern="main", path="src", glob="web/*.ts")
    assert scoped.text == "src/web/index.ts:1: export const main = 1;"


async def test_grep_a_single_file(h: Harness) -> None:
    out = await h.run(GREP, pattern="return", path="src/util/helper.py")
    assert out.text == "src/util/helper.py:2:     return 42"


async def test_a_path_inside_the_project_that_is_not_there_searches_all_of_it(h: Harness) -> None:
    """Seen on Qwen2.5-Coder-1.5B: a file pattern (`src/**/*.ts`) or a guessed file
    (`src/main.rs`) as `path`; with a bare "Not found" it told the user to run grep himself."""
    for made_up in ("src/**/*.ts", "src/main.rs"):
        out = await h.run(GREP, pattern=r"def \w+", path=made_up)
        assert out.text.splitlines() == [
            f"[{made_up} does not exist (`path` is one file or folder; a file pattern goes in "
            "`glob`): searched the whole working directory instead.]",
            "src/app.py:1: def main():",
            "src/util/helper.py:1: def helper():",
        ]
        assert out.ok and out.locations and out.locations[0]["path"] == str(h.cwd / "src/app.py")
    with pytest.raises(ToolFailure, match=r"^Not found: /nonexistent-acp-test$"):
        await h.run(GREP, pattern="main", path="/nonexistent-acp-test")  # outside: no guessing


async def test_grep_invalid_regex_is_a_failure_with_the_reason(h: Harness) -> None:
    with pytest.raises(
        ToolFailure, match=r"Invalid regular expression '\(unclosed': .*(unclosed|missing \))"
    ):
        await h.run(GREP, pattern="(unclosed")


async def test_grep_skips_binary_and_huge_files(h: Harness) -> None:
    tree(
        h.cwd,
        {
            "bin/blob.dat": b"needle\x00\x01\x02",
            "bin/big.txt": b"needle\n" + b"x" * (2 * 1024 * 1024),
            "bin/ok.txt": "needle\n",
        },
    )
    out = await h.run(GREP, pattern="needle", path="bin")
    assert out.text == "bin/ok.txt:1: needle"
    with pytest.raises(ToolFailure, match="binary"):
        await h.run(GREP, pattern="needle", path="bin/blob.dat")


async def test_grep_stops_at_max_results(h: Harness) -> None:
    tree(h.cwd, {"many.txt": "hit\n" * 50})
    out = await h.run(GREP, pattern="hit", path="many.txt", max_results=10)
    lines = out.text.splitlines()
    assert lines[:10] == [f"many.txt:{n}: hit" for n in range(1, 11)]
    assert len(lines) == 11 and "Stopped after 10 matches" in lines[-1]
    assert out.locations is not None and len(out.locations) == 10
    exact = await h.run(GREP, pattern="hit", path="many.txt", max_results=50)
    assert "Stopped" not in exact.text


async def test_grep_cuts_long_lines_and_anchors_work_in_crlf_files(h: Harness) -> None:
    tree(h.cwd, {"long.txt": "start " + "y" * 1000 + "\n", "win.txt": b"a\r\nfoo\r\nb\r\n"})
    long_line = (await h.run(GREP, pattern="^start", path="long.txt")).text
    assert long_line == "long.txt:1: start " + "y" * 294 + "…"
    assert (await h.run(GREP, pattern="^foo$", path="win.txt")).text == "win.txt:2: foo"


async def test_grep_no_match(h: Harness) -> None:
    out = await h.run(GREP, pattern="zebra", path="src")
    first, note = out.text.splitlines()
    assert out.ok and first == "No matches for `zebra` in src/."
    assert "binary files" in note and "include_hidden" in note and "include_ignored" in note
    assert out.locations is None


async def test_a_file_name_that_matches_nothing_says_grep_searches_inside_files(h: Harness) -> None:
    """Seen on Qwen2.5-Coder-1.5B, asked how many lines data.txt has: it grepped for `data.txt`,
    got "No matches" and told the user to run a command himself."""
    (h.cwd / "data.txt").write_text("row 0\nrow 1\n")
    (h.cwd / "folder.d").mkdir()
    os.symlink("data.txt", h.cwd / "link.txt")
    hint = (
        "[`data.txt` is the name of a file here: grep searches inside files, not for their "
        "names. To see that file, call read_file; to find files by name, call glob.]"
    )
    for path in (None, "data.txt"):  # the folder holding it, or the file itself
        out = await h.run(GREP, pattern="data.txt", **({"path": path} if path else {}))
        assert out.ok and out.text.splitlines()[1] == hint
    for name in ("folder.d", "link.txt", "zebra.txt", "src/app.py", "../data.txt", "a\0b"):
        out = await h.run(GREP, pattern=name)
        assert "is the name of a file" not in out.text, name  # not a plain regular file here
    out = await h.run(GREP, pattern="row 0", path="data.txt")
    assert "is the name of a file" not in out.text  # it matched: nothing to say


async def test_a_nul_in_the_pattern_or_glob_is_an_answer_not_a_crash(h: Harness) -> None:
    """A NUL cannot be passed to rg as an argument (it raised ValueError: embedded null byte)."""
    out = await h.run(GREP, pattern="def\0main")
    assert out.ok and out.text.startswith("No matches for `def\0main`")
    with pytest.raises(ToolFailure, match=r"^The glob holds a NUL character"):
        await h.run(GREP, pattern="def", glob="*.py\0")
    # An escaped NUL is a NUL for both engines, not a backslash and the text "x00".
    (h.cwd / "esc.txt").write_text("a \\x00 b\n")
    out = await h.run(GREP, pattern="zz|\\\0")
    assert out.ok and out.text.startswith("No matches"), out.text
    assert (await h.run(GREP, pattern="zz|\\\\x00")).text.startswith("esc.txt:1:")  # the text


async def test_grep_context_lines_are_marked_and_grouped(h: Harness) -> None:
    tree(h.cwd, {"ctx.txt": "a\nb\nhit 1\nc\nd\ne\nf\nhit 2\ng\n"})
    out = await h.run(GREP, pattern="hit", path="ctx.txt", before=1, after=1)
    assert out.text.splitlines() == [
        "ctx.txt-2- b",
        "ctx.txt:3: hit 1",
        "ctx.txt-4- c",
        "--",
        "ctx.txt-7- f",
        "ctx.txt:8: hit 2",
        "ctx.txt-9- g",
    ]
    assert out.locations == [
        {"path": str(h.cwd / "ctx.txt"), "line": 3},
        {"path": str(h.cwd / "ctx.txt"), "line": 8},
    ]


async def test_grep_files_only_lists_each_file_once_and_caps(h: Harness) -> None:
    out = await h.run(GREP, pattern="return", files_only=True)
    assert out.text.splitlines() == ["src/app.py", "src/util/helper.py"]
    cut = await h.run(GREP, pattern="return", files_only=True, max_results=1)
    assert len(cut.text.splitlines()) == 2 and "Stopped after 1 files" in cut.text


async def test_grep_multiline_matches_across_lines(h: Harness) -> None:
    out = await h.run(GREP, pattern=r"def main\(\):\n\s+return", multiline=True)
    assert out.text.splitlines() == [
        "src/app.py:1: def main():",
        "src/app.py:2:     return helper()",
    ]
    with pytest.raises(ToolFailure, match="set multiline to true"):
        await h.run(GREP, pattern=r"main\(\):\n")


async def test_grep_takes_python_only_patterns(h: Harness) -> None:
    out = await h.run(GREP, pattern=r"(?<=def )help\w+")  # look-behind: rg has none
    assert out.text == "src/util/helper.py:1: def helper():"


async def test_a_class_without_line_breaks_needs_no_multiline(h: Harness) -> None:
    out = await h.run(GREP, pattern=r"def [^\n(]+\(", path="src/app.py")
    assert out.text == "src/app.py:1: def main():"


def test_a_fifo_in_the_project_is_passed_over_without_waiting(tmp_path: Path) -> None:
    """A FIFO made by a command: reading it would wait for a writer forever (the Python
    search runs where rg is missing). A timer ends such a wait, so a failure cannot hang."""
    from acp_server.tools.search.grep_engine import searchable_text

    fifo = tmp_path / "pipe.txt"
    os.mkfifo(fifo)
    writer = threading.Timer(5.0, _open_writer, (fifo,))
    writer.start()
    started = time.monotonic()
    try:
        assert searchable_text(fifo) is None
        assert time.monotonic() - started < 3.0
    finally:
        writer.cancel()


def _open_writer(fifo: Path) -> None:
    with contextlib.suppress(OSError):
        os.close(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK))
