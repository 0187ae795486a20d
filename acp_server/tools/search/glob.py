"""The glob tool: find files and directories by name pattern.

ripgrep lists the files where it is available (`rg.py`), a Python walk otherwise (`walk.py`);
both leave out what the ignore rules and hidden names say unless the call asks for them
(`ignore.py`: a pattern that names a hidden folder, like `.github/**`, asks for it), and never
follow links. Directories are matched too (those holding listed files, with rg). Paths in the
output are relative to the session's working directory, so the model can pass them straight
to read_file or edit_file.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

from acp_server.permissions import Permit
from acp_server.tools.base import (
    Presentation,
    Tool,
    ToolContext,
    ToolFailure,
    ToolOutcome,
    arg_path,
    clip,
    shown_path,
    text_content,
)
from acp_server.tools.search.grep import (
    GREP as GREP,  # the tool list takes both search tools from here
)
from acp_server.tools.search.grep import (
    MODEL_MAX_CHARS,
    SHOW_MAX_CHARS,
    not_listed,
    scope_of,
    short,
    shown_dir,
)
from acp_server.tools.search.ignore import Scope
from acp_server.tools.search.rg import rg_binary, scope_args, stream
from acp_server.tools.search.walk import (
    GLOB_MAX_COLLECTED,
    find_matches,
    in_thread,
    pattern_regex,
    split_pattern,
)

GLOB_MAX_SHOWN = 500


def _present_glob(args: dict[str, Any], ctx: ToolContext) -> Presentation:
    pattern = args.get("pattern")
    title = f"Find {short(pattern)}" if isinstance(pattern, str) and pattern else "Find files"
    path = arg_path(args, ctx)
    if path is None:
        return Presentation(title)
    return Presentation(f"{title} in {shown_dir(path, ctx)}", [{"path": str(path)}])


async def _glob(args: dict[str, Any], ctx: ToolContext) -> ToolOutcome:
    base = arg_path(args, ctx) or ctx.cwd
    prefix, segments = split_pattern(str(args["pattern"]))
    root = ctx.resolve(os.path.join(base, prefix)) if prefix else base
    if not segments:
        raise ToolFailure("The pattern names no files; give one such as **/*.py.")
    await ctx.permit(Permit(paths=(root,)))
    if not root.is_dir():
        raise ToolFailure(f"Directory not found: {root}")
    scope = scope_of(args, *segments)
    rg = rg_binary() if any("**" in s for s in segments) else None
    if rg is None:  # a walk of a few levels is quick, and sees folders rg does not list
        found, total = await in_thread(lambda stop: find_matches(root, segments, stop, scope))
    else:
        found, total = await glob_rg(rg, root, segments, scope)
    prefix = _shown_prefix(root, ctx)
    shown = sorted(prefix + rel for rel in found)[:GLOB_MAX_SHOWN]
    return _glob_outcome(shown, total, str(args["pattern"]), root, ctx, scope)


async def glob_rg(rg: str, root: Path, segments: list[str], scope: Scope) -> tuple[list[str], int]:
    """Like `walk.find_matches` for a `**` pattern, from the files `rg --files` lists and the
    folders above them."""
    regex = pattern_regex(segments)
    # No name prefilter: folders must be seen too. Off the loop: it may ask git for the excludes.
    args = await asyncio.to_thread(scope_args, root, scope)
    chunks: list[bytes] = []

    def take(chunk: bytes) -> bool:
        chunks.append(chunk)
        return True

    run = await stream([rg, "--files", *args, "."], root, take, b"")
    listing = b"".join(chunks)
    if run.code == 2 and not listing.strip(b"\0"):
        raise ToolFailure(f"Cannot list {root}: {run.errors[-1] if run.errors else 'rg failed'}")
    test, tail = regex.fullmatch, _literal_tail(segments[-1])
    # Cut on the bytes first: of tens of thousands of names only those ending with the tail
    # are decoded (decoding and splitting the whole listing took as long again as a tenth of
    # rg's own run). Every name starts with "./" (rg lists `.`).
    end = tail.encode("utf-8", "surrogateescape")
    names = listing.split(b"\0")
    found = [f for f in _decoded(n for n in names if n.endswith(end)) if test(f)]
    if not tail or end + b"/" in listing:  # else no folder can match: none need be listed
        files = list(_decoded(names))
        found += [d + "/" for d in _folders(files) if d.endswith(tail) and test(d)]
    return found[:GLOB_MAX_COLLECTED], len(found)


def _decoded(names: Iterable[bytes]) -> Iterator[str]:
    """rg's names, without their "./", as text (undecodable bytes kept as surrogates)."""
    for name in names:
        if name:
            yield name.decode("utf-8", "surrogateescape").removeprefix("./")


def _literal_tail(segment: str) -> str:
    """The end of a pattern segment after its last wildcard: every match ends with it."""
    cut = max(segment.rfind(c) for c in "*?[]{}")
    return segment[cut + 1 :]


def _folders(files: list[str]) -> set[str]:
    """Every folder above a listed file (paths relative to the root, without the root)."""
    parents = {f.rpartition("/")[0] for f in files}
    parents.discard("")
    out = set(parents)
    for folder in parents:
        cut = folder.rfind("/")
        while cut > 0 and folder[:cut] not in out:
            out.add(folder[:cut])
            cut = folder.rfind("/", 0, cut)
    return out


def _shown_prefix(root: Path, ctx: ToolContext) -> str:
    """What goes before a path relative to `root` to show it relative to the cwd (once for all
    matches: thousands of Path objects would cost more than rg's whole listing)."""
    if root == ctx.cwd:
        return ""
    shown = shown_path(root, ctx)
    return shown.rstrip("/") + "/"


def _glob_outcome(
    shown: list[str], total: int, pattern: str, root: Path, ctx: ToolContext, scope: Scope
) -> ToolOutcome:
    if not shown:
        text = f"No files match {pattern} under {shown_dir(root, ctx)}. {not_listed(scope)}"
        return ToolOutcome(text, content=[text_content(text)])
    lines = list(shown)
    if total > len(lines):
        lines.append(
            f"[{total} matches; only the first {len(lines)} (by path) are shown. "
            "Narrow the pattern or the path to see the rest.]"
        )
    text = "\n".join(lines)
    return ToolOutcome(
        clip(text, MODEL_MAX_CHARS, "matches"),
        content=[text_content(clip(text, SHOW_MAX_CHARS, "matches"))],
    )


GLOB = Tool(
    name="glob",
    description=(
        "Find files and directories by name pattern, e.g. `**/*.py` (any depth), `src/*.ts`, "
        "`**/test_*.{py,pyi}`. `path` is the directory to search from (default: the working "
        "directory). Returns matching paths sorted by path, relative to the working "
        f"directory (directories end with '/'); at most {GLOB_MAX_SHOWN}. Skips hidden and "
        ".gitignored files (unless include_hidden / include_ignored); does not follow links."
    ),
    kind="search",
    effect="read",
    present=_present_glob,
    run=_glob,
)
