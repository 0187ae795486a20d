"""Relative links in Markdown files: which of them lead nowhere.

A link is `[text](target)` outside code (fenced blocks and inline code are skipped). Absolute
URLs (`http:`, `https:`, `mailto:`) are not followed. A relative target must name a file or
folder that exists, relative to the linking file; a `#fragment` must name a heading of the
target (GitHub's anchors: lower case, punctuation dropped, spaces as hyphens).
"""

from __future__ import annotations

import re
from pathlib import Path

_FENCE = re.compile(r"^(```|~~~).*?^\1", re.S | re.M)
_INLINE = re.compile(r"`[^`\n]*`")
_LINK = re.compile(r"(?<!!)\[[^\]\n]*\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)")
_HEADING = re.compile(r"^#{1,6}\s+(.+?)\s*#*\s*$", re.M)
_EXTERNAL = ("http://", "https://", "mailto:")


def anchors(markdown: str) -> set[str]:
    """The anchors GitHub gives the headings of `markdown` (repeats get -1, -2, …)."""
    found: set[str] = set()
    for heading in _HEADING.findall(_FENCE.sub("", markdown)):
        text = re.sub(r"[`*_]|\[([^\]]*)\]\([^)]*\)", r"\1", heading).strip().lower()
        slug = re.sub(r"[^\w\- ]", "", text).replace(" ", "-")
        candidate, n = slug, 0
        while candidate in found:
            n += 1
            candidate = f"{slug}-{n}"
        found.add(candidate)
    return found


def links(markdown: str) -> list[str]:
    """Every link target outside code."""
    return _LINK.findall(_INLINE.sub("", _FENCE.sub("", markdown)))


def broken(files: list[Path]) -> list[str]:
    """`file: target (why)` for each relative link of `files` that leads nowhere."""
    problems = []
    for path in files:
        text = path.read_text(encoding="utf-8")
        for target in links(text):
            if target.startswith(_EXTERNAL):
                continue
            name, _, fragment = target.partition("#")
            where = (path.parent / name).resolve() if name else path
            if not where.exists():
                problems.append(f"{path.name}: {target} (no such file)")
            elif (
                fragment
                and where.suffix == ".md"
                and fragment not in anchors(where.read_text("utf-8"))
            ):
                problems.append(f"{path.name}: {target} (no such heading)")
    return problems
