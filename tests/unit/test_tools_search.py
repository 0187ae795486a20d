"""Search tools: glob and grep over a real temporary tree, by ripgrep and by Python alike, and
their schemas."""

from __future__ import annotations

import asyncio
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from jsonschema import Draft202012Validator

from acp_server import schemas
from acp_server.editor_api import NoEditor
from acp_server.permissions import Permit
from acp_server.tools.base import Tool, ToolContext, ToolFailure, ToolOutcome
from acp_server.tools.search import GLOB, GREP
from acp_server.tools.walk import in_thread, pattern_regex, split_pattern


@dataclass
class Harness:
    cwd: Path
    permits: list[Permit] = field(default_factory=list)
    updates: list[dict[str, Any]] = field(default_factory=list)

    def context(self) -> ToolContext:
        async def permit(request: Permit) -> None:
            self.permits.append(request)

        return ToolContext("call_1", self.cwd, (self.cwd,), NoEditor(), self.updates.append, permit)

    async def run(self, tool: Tool, **args: Any) -> ToolOutcome:
        return await tool.run(args, self.context())


def tree(root: Path, files: dict[str, str | bytes]) -> None:
    for rel, body in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(body, bytes):
            path.write_bytes(body)
        else:
            path.write_text(body)


@pytest.fixture
def h(tmp_path: Path, engine: str) -> Harness:
    tree(
        tmp_path,
        {
            "setup.py": "import os\n",
            "src/app.py": "def main():\n    return helper()\n",
            "src/util/helper.py": "def helper():\n    return 42\n",
            "src/web/index.ts": "export const main = 1;\n",
            "src/web/view.tsx": "const Main = () => null;\n",
            "docs/README.md": "# Main docs\n",
            ".github/ci.yml": "main: true\n",
            ".git/config.py": "main = 1\n",
            "node_modules/pkg/index.py": "main = 1\n",
            ".venv/lib/site.py": "main = 1\n",
            "src/__pycache__/app.py": "main = 1\n",
        },
    )
    return Harness(tmp_path)


# -- glob --------------------------------------------------------------------------------------


async def test_glob_recursive_skips_tool_directories(h: Harness) -> None:
    out = await h.run(GLOB, pattern="**/*.py")
    assert out.text.splitlines() == ["setup.py", "src/app.py", "src/util/helper.py"]
    assert h.permits[0].paths == (h.cwd,)


async def test_glob_without_double_star_stays_at_its_depth(h: Harness) -> None:
    assert (await h.run(GLOB, pattern="*.py")).text == "setup.py"
    assert (await h.run(GLOB, pattern="src/*.py")).text == "src/app.py"
    assert (await h.run(GLOB, pattern="*/*")).text.splitlines() == [
        "docs/README.md",
        "src/app.py",
        "src/util/",
        "src/web/",
    ]


async def test_glob_matches_folders_at_any_depth(h: Harness) -> None:
    assert (await h.run(GLOB, pattern="**/util")).text == "src/util/"
    assert (await h.run(GLOB, pattern="**/w*")).text == "src/web/"
    tree(h.cwd, {"odd.py/inner.txt": ""})
    assert (await h.run(GLOB, pattern="**/*.py")).text.splitlines() == [
        "odd.py/",
        "setup.py",
        "src/app.py",
        "src/util/helper.py",
    ]


async def test_glob_from_a_base_path_gives_cwd_relative_paths(h: Harness) -> None:
    out = await h.run(GLOB, pattern="**/*.{ts,tsx}", path="src")
    assert out.text.splitlines() == ["src/web/index.ts", "src/web/view.tsx"]
    assert h.permits[0].paths == (h.cwd / "src",)


async def test_glob_literal_prefix_narrows_the_walk_and_the_permission(h: Harness) -> None:
    out = await h.run(GLOB, pattern="src/util/**")
    assert out.text == "src/util/helper.py"
    assert h.permits[0].paths == (h.cwd / "src" / "util",)
    absolute = await h.run(GLOB, pattern=f"{h.cwd}/docs/*.md")
    assert absolute.text == "docs/README.md"


async def test_glob_caps_results_and_says_how_many(h: Harness) -> None:
    tree(h.cwd, {f"many/f{i:04}.txt": "" for i in range(520)})
    out = await h.run(GLOB, pattern="many/*.txt")
    lines = out.text.splitlines()
    assert len(lines) == 501 and lines[0] == "many/f0000.txt" and lines[499] == "many/f0499.txt"
    assert "520 matches" in lines[-1]


async def test_glob_no_match_and_missing_base(h: Harness) -> None:
    assert (await h.run(GLOB, pattern="**/*.rs")).text.startswith("No files match **/*.rs")
    with pytest.raises(ToolFailure, match="Directory not found"):
        await h.run(GLOB, pattern="*.py", path="missing")


def test_pattern_pieces() -> None:
    assert split_pattern("src/lib/**/*.py") == ("src/lib", ["**", "*.py"])
    assert split_pattern("/abs/x/*.py") == ("/abs/x", ["*.py"])
    assert split_pattern("a.py") == ("", ["a.py"])
    regex = pattern_regex(["**", "test_[a-c]?.py"])
    assert regex.fullmatch("test_b1.py") and regex.fullmatch("x/y/test_a2.py")
    assert not regex.fullmatch("test_d1.py") and not regex.fullmatch("test_a/1.py")
    assert pattern_regex(["[!a]*"]).fullmatch("b.txt")
    assert not pattern_regex(["[!a]*"]).fullmatch("a.txt")


# -- grep --------------------------------------------------------------------------------------


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


async def test_cancelling_the_caller_stops_the_worker() -> None:
    started, stopped = threading.Event(), threading.Event()

    def work(stop: threading.Event) -> None:
        started.set()
        if stop.wait(5):
            stopped.set()

    task = asyncio.create_task(in_thread(work))
    while not started.is_set():
        await asyncio.sleep(0.001)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    await asyncio.to_thread(stopped.wait, 5)
    assert stopped.is_set()


# -- presentation and schemas ------------------------------------------------------------------


def test_titles(h: Harness) -> None:
    ctx = h.context()
    assert GLOB.present({"pattern": "**/*.py"}, ctx).title == "Find **/*.py"
    assert GLOB.present({"pattern": "*.ts", "path": "src"}, ctx).title == "Find *.ts in src/"
    assert GREP.present({"pattern": "foo", "path": "src"}, ctx).title == "Search for `foo` in src/"
    assert GREP.present({"pattern": "foo", "glob": "*.py"}, ctx).title == "Search for `foo` (*.py)"


@pytest.mark.parametrize("tool", [GLOB, GREP])
@pytest.mark.parametrize("args", [{}, {"pattern": 5, "path": []}, {"pattern": None, "glob": 1}])
def test_present_never_raises(h: Harness, tool: Tool, args: dict[str, Any]) -> None:
    assert tool.present(args, h.context()).title


CANONICAL: dict[str, tuple[dict[str, Any], dict[str, Any]]] = {
    "glob": ({"pattern": "**/*.py", "path": "src"}, {"pattern": ""}),
    "grep": (
        {"pattern": "TODO", "path": "src", "glob": "*.py", "ignore_case": True, "max_results": 50},
        {"pattern": "TODO", "max_results": 5000},
    ),
}


@pytest.mark.parametrize("name", sorted(CANONICAL))
def test_schema_accepts_canonical_args_and_rejects_bad_ones(name: str) -> None:
    schema = schemas.load(f"tools/{name}.json")
    Draft202012Validator.check_schema(schema)
    good, bad = CANONICAL[name]
    validator = Draft202012Validator(schema)
    assert validator.is_valid(good)
    assert not validator.is_valid(bad)
    assert not validator.is_valid({**good, "unknown": 1})


# -- links that lead out of the project --------------------------------------------------------


SECRET = "needle TOPSECRET"


@pytest.fixture
def linked(tmp_path: Path, engine: str) -> Harness:
    """A project with links: to a file and a directory outside it, to a file inside it, a
    dangling one and a loop; beside the project, the outside they lead to."""
    project, outside = tmp_path / "project", tmp_path / "outside"
    tree(project, {"src/a.py": "needle here\n"})
    tree(outside, {"secret.txt": SECRET + "\n", "deep/more.txt": SECRET + "\n"})
    (project / "leak.txt").symlink_to(outside / "secret.txt")
    (project / "outdir").symlink_to(outside)
    (project / "inner.txt").symlink_to(project / "src" / "a.py")
    (project / "dangling.txt").symlink_to(project / "missing.txt")
    (project / "loop.txt").symlink_to(project / "loop.txt")
    return Harness(project)


async def test_grep_never_follows_links_out_of_the_project(linked: Harness) -> None:
    out = await linked.run(GREP, pattern="needle")
    assert "TOPSECRET" not in out.text
    assert out.text.splitlines() == ["src/a.py:1: needle here"]  # links are not followed
    assert [p.paths for p in linked.permits] == [(linked.cwd,)]


async def test_grep_of_a_linked_file_asks_for_its_real_place(linked: Harness) -> None:
    out = await linked.run(GREP, pattern="needle", path="leak.txt")
    assert linked.permits[0].paths == (linked.cwd / "leak.txt",)  # resolved by the permission
    assert out.text == f"leak.txt:1: {SECRET}"  # the user allowed it (this harness allows all)


async def test_grep_where_the_user_allowed_keeps_out_links_that_lead_further(
    linked: Harness, tmp_path: Path
) -> None:
    outside = tmp_path / "outside"
    tree(tmp_path / "elsewhere", {"x.txt": "needle ELSEWHERE\n"})
    (outside / "away.txt").symlink_to(tmp_path / "elsewhere" / "x.txt")
    out = await linked.run(GREP, pattern="needle", path=str(outside))
    assert f"{outside}/secret.txt:1: {SECRET}" in out.text.splitlines()
    assert "ELSEWHERE" not in out.text


async def test_glob_does_not_list_or_follow_links(linked: Harness) -> None:
    out = await linked.run(GLOB, pattern="*")
    assert out.text.splitlines() == ["src/"]  # list_directory shows links, with their targets
    deep = await linked.run(GLOB, pattern="**/*.txt")
    assert "more.txt" not in deep.text and "secret" not in deep.text


async def test_glob_under_a_linked_directory_asks_for_its_real_place(linked: Harness) -> None:
    await linked.run(GLOB, pattern="outdir/**/*.txt")
    assert linked.permits[0].paths == (linked.cwd / "outdir",)  # outside once resolved


# -- what models ask grep for ------------------------------------------------------------------


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
