"""The glob tool over a real temporary tree, by ripgrep and by Python alike; both search tools'
schemas, titles, and how they treat links."""

from __future__ import annotations

import asyncio
import threading
from pathlib import Path
from typing import Any

import pytest
from jsonschema import Draft202012Validator

from acp_server import schemas
from acp_server.tools.base import Tool, ToolFailure
from acp_server.tools.search.glob import GLOB, GREP
from acp_server.tools.search.walk import in_thread, pattern_regex, split_pattern
from tests.support.search_engines import SAMPLE, Harness, tree


@pytest.fixture
def h(tmp_path: Path, engine: str) -> Harness:
    tree(tmp_path, SAMPLE)
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
