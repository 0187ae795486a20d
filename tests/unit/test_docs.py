"""The README and the manual in docs/: every relative link leads somewhere, the index links
every page, the README stays short, and its Quick start shows exactly what CI runs."""

from __future__ import annotations

import re
from pathlib import Path

from tests.support.doclinks import anchors, broken, links

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"
README_LIMIT = 8 * 1024


def markdown_files() -> list[Path]:
    return [ROOT / "README.md", *sorted(DOCS.glob("*.md"))]


def test_every_relative_link_resolves() -> None:
    assert broken(markdown_files()) == []


def test_the_index_links_every_page() -> None:
    index = (DOCS / "index.md").read_text(encoding="utf-8")
    linked = {target.partition("#")[0] for target in links(index)}
    pages = {p.name for p in DOCS.glob("*.md")} - {"index.md"}
    assert pages and pages <= linked, f"not linked from docs/index.md: {sorted(pages - linked)}"
    assert "docs/index.md" in {t.partition("#")[0] for t in links(_readme())}


def test_the_readme_is_short() -> None:
    size = len(_readme().encode("utf-8"))
    assert size <= README_LIMIT, f"README.md is {size:,} bytes; move detail into docs/"


def test_the_quick_start_shows_what_ci_runs() -> None:
    quick = _readme()[_readme().index("## Quick start") :]
    quick = quick[: quick.index("\n## ", 3)]
    blocks = re.findall(r"```sh\n(.*?)\n```", quick, re.S)
    assert len(blocks) == 2, "the Quick start shows two commands: try it, and run the tests"
    install = (ROOT / "scripts" / "install-test-deps").read_text("utf-8")
    ci = (ROOT / ".ci" / "run").read_text("utf-8")
    for part in blocks[0].split("&&"):
        part = part.strip()
        if " install " in part:
            assert part in install, f"scripts/install-test-deps does not run {part!r}"
    assert blocks[1].strip() in ci, ".ci/run does not run the Quick start's test command"


def _readme() -> str:
    return (ROOT / "README.md").read_text(encoding="utf-8")


# --- the checker, on files written for the test ------------------------------------------------


def test_a_broken_link_and_a_missing_heading_are_found(tmp_path: Path) -> None:
    (tmp_path / "a.md").write_text(
        "# Top\n\n## Two words\n\nSee [b](b.md#there), [here](#two-words), [web](https://x.y)\n"
        "and [gone](missing.md), [nowhere](b.md#nowhere).\n\n```md\n[in code](ignored.md)\n```\n"
        "`[inline](ignored.md)`\n",
        encoding="utf-8",
    )
    (tmp_path / "b.md").write_text("# There\n", encoding="utf-8")
    assert broken([tmp_path / "a.md", tmp_path / "b.md"]) == [
        "a.md: missing.md (no such file)",
        "a.md: b.md#nowhere (no such heading)",
    ]


def test_anchors_follow_githubs_rules() -> None:
    text = "# Choosing a model\n## `run` on a terminal\n## Sessions\n## Sessions\n## A, b & c!\n"
    assert anchors(text) == {
        "choosing-a-model",
        "run-on-a-terminal",
        "sessions",
        "sessions-1",
        "a-b--c",
    }


def test_the_architecture_map_names_every_folder_and_module() -> None:
    entries = _map_entries((DOCS / "architecture.md").read_text(encoding="utf-8"))
    package = ROOT / "acp_server"
    folders = {p.parent for p in package.rglob("*") if p.suffix in (".py", ".md", ".json")}
    named = {"acp_server" if not f else f"acp_server/{f}" for f in entries}
    assert named == {str(f.relative_to(ROOT)) for f in folders}, "folders in the map"
    for folder in folders:
        text = entries[str(folder.relative_to(package)) if folder != package else ""]
        for path in folder.iterdir():
            if path.suffix in (".py", ".md", ".json") and path.stem != "__init__":
                name = path.name if path.suffix != ".py" else path.stem
                assert re.search(rf"(?<![\w/]){re.escape(name)}(?!\w)", text), (
                    f"docs/architecture.md's map does not name {path.relative_to(ROOT)}"
                )


def _map_entries(text: str) -> dict[str, str]:
    """The map's folders (relative to acp_server/, "" for the package) -> what it says of them."""
    block = text[text.index("```\nacp_server/") + 4 :]
    block = block[: block.index("```")]
    entries: dict[str, str] = {}
    top = current = ""
    for line in block.splitlines():
        folder = re.match(r"^( {0,2})([\w]+)/ ", line)
        if folder and folder.group(2) != "acp_server":
            indent, name = folder.groups()
            top = name if not indent else top
            current = name if not indent else f"{top}/{name}"
        elif folder:
            current = ""
        entries[current] = entries.get(current, "") + line + "\n"
    return entries
