"""The grep tool: find lines (or files) by regular expression, the way a model asks for it.

ripgrep does the search where it is available (`grep_rg.py`), Python otherwise, and Python also
takes a pattern only its `re` understands (look-around, backreferences). Both leave out what
the ignore rules and hidden names say unless the call asks for them (`ignore.py`), never
follow links, skip binary files and files over 2 MiB, and stop at `max_results`. Paths in the
output are relative to the session's working directory, so the model can pass them straight
to read_file or edit_file; a search that finds nothing says what it did not look at.
"""

from __future__ import annotations

import dataclasses
import os
import re
import stat
from collections.abc import Callable
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
from acp_server.tools.search.grep_engine import (
    GrepQuery,
    GrepResult,
    Hit,
    grep_python,
    not_searchable,
    python_regex,
)
from acp_server.tools.search.grep_rg import RegexRejected, grep_rg
from acp_server.tools.search.ignore import Scope
from acp_server.tools.search.rg import rg_binary
from acp_server.tools.search.walk import in_thread, pattern_regex, segment_regex

GREP_DEFAULT_RESULTS = 200
GREP_MAX_RESULTS = 2000
GREP_LINE_CHARS = 300
MODEL_MAX_CHARS = 60_000
SHOW_MAX_CHARS = 8_000
MAX_LOCATIONS = 10
_CLASS = re.compile(r"\[(?:\\.|[^\]])*\]")  # a character class, like `[^\n]`


def short(value: Any, limit: int = 60) -> str:
    text = str(value)
    return text if len(text) <= limit else text[: limit - 1] + "…"


def shown_dir(path: Path, ctx: ToolContext) -> str:
    shown = shown_path(path, ctx)
    return shown + "/" if path.is_dir() and not shown.endswith("/") else shown


def scope_of(args: dict[str, Any], *patterns: str) -> Scope:
    """The call's switches; a pattern naming a hidden file or folder asks for hidden ones."""
    named = any(part.startswith(".") for p in patterns for part in p.split("/") if part)
    hidden = bool(args.get("include_hidden")) or named
    return Scope(hidden=hidden, ignored=bool(args.get("include_ignored")))


def _present_grep(args: dict[str, Any], ctx: ToolContext) -> Presentation:
    pattern = args.get("pattern")
    title = f"Search for `{short(pattern)}`" if isinstance(pattern, str) else "Search files"
    path = arg_path(args, ctx)
    if path is not None:
        title += f" in {shown_dir(path, ctx)}"
    if isinstance(args.get("glob"), str) and args["glob"]:
        title += f" ({short(args['glob'])})"
    return Presentation(title, [{"path": str(path)}] if path else [])


def _query(args: dict[str, Any]) -> GrepQuery:
    pattern = str(args["pattern"])
    multiline = bool(args.get("multiline"))
    if not multiline and "\\n" in _CLASS.sub("", pattern):  # `[^\n]` is fine: no line break
        raise ToolFailure("The pattern matches a line break: set multiline to true for that.")
    glob = args.get("glob") if isinstance(args.get("glob"), str) and args["glob"] else None
    if glob is not None and "\0" in glob:
        raise ToolFailure("The glob holds a NUL character, which no file name can: remove it.")
    type_glob, path_filter = _name_filter(glob)
    limit = min(max(int(args.get("max_results") or GREP_DEFAULT_RESULTS), 1), GREP_MAX_RESULTS)
    return GrepQuery(
        pattern=pattern,
        ignore_case=bool(args.get("ignore_case")),
        multiline=multiline,
        before=int(args.get("before") or 0),
        after=int(args.get("after") or 0),
        files_only=bool(args.get("files_only")),
        limit=limit,
        scope=scope_of(args, glob or ""),
        type_glob=type_glob,
        path_filter=path_filter,
    )


def _name_filter(glob: str | None) -> tuple[str | None, Callable[[str], bool] | None]:
    """A name pattern rg can prefilter with, and the exact test on the path below the base: on
    the name alone for `*.py`, on the whole relative path for patterns with '/'."""
    if glob is None:
        return None, None
    if "/" in glob:
        segments = [s for s in glob.split("/") if s]
        regex = pattern_regex(segments)
        last = segments[-1] if segments and "**" not in segments[-1] else None
        return last, lambda rel: regex.fullmatch(rel) is not None
    name = re.compile(segment_regex(glob))
    return glob, lambda rel: name.fullmatch(rel.rsplit("/", 1)[-1]) is not None


async def _grep(args: dict[str, Any], ctx: ToolContext) -> ToolOutcome:
    query = _query(args)
    if rg_binary() is None:
        python_regex(query)  # a bad pattern fails before anything is asked or walked
    base = arg_path(args, ctx) or ctx.cwd
    await ctx.permit(Permit(paths=(base,)))
    missing = None
    if not base.exists():
        if base == ctx.cwd or not base.is_relative_to(ctx.cwd):
            raise ToolFailure(f"Not found: {base}")
        missing, base = base, ctx.cwd
        await ctx.permit(Permit(paths=(base,)))
    if base.is_file() and (reason := not_searchable(base)):
        raise ToolFailure(reason)
    result = await search(base, query)
    result.hits.sort(key=lambda h: (str(h.path), h.line))  # rg's threads finish in any order
    outcome = _grep_outcome(result, query, base, ctx)
    if missing is not None:
        outcome = _searched_instead(outcome, missing, ctx)
    hits = [h for h in result.hits if h.match][:MAX_LOCATIONS]
    locations = [{"path": str(h.path), **({"line": h.line} if h.line else {})} for h in hits]
    return dataclasses.replace(outcome, locations=locations or None)


def _searched_instead(outcome: ToolOutcome, missing: Path, ctx: ToolContext) -> ToolOutcome:
    """The search of the whole working directory, said to be that: a `path` inside it that
    does not exist is most often made up (small models copy `src/**/*.ts` from an example, or
    guess `src/main.rs`), and a bare "Not found" made them give up and tell the user to run
    grep."""
    note = (
        f"[{shown_path(missing, ctx)} does not exist (`path` is one file or folder; a file "
        "pattern goes in `glob`): searched the whole working directory instead.]"
    )
    text = f"{note}\n{outcome.text}"
    return dataclasses.replace(outcome, text=text, content=[text_content(text)])


async def search(base: Path, query: GrepQuery) -> GrepResult:
    """The search, by rg when there is one and it takes the pattern, by Python otherwise."""
    rg = rg_binary()
    if rg is not None:
        try:
            return await grep_rg(rg, base, query)
        except RegexRejected as exc:
            try:
                python_regex(query)
            except ToolFailure:
                raise ToolFailure(f"Invalid regular expression {query.pattern!r}: {exc}") from None
    return await in_thread(lambda stop: grep_python(base, query, stop))


def _grep_outcome(
    result: GrepResult, query: GrepQuery, base: Path, ctx: ToolContext
) -> ToolOutcome:
    notes = []
    if result.unreadable:
        what = "1 file" if result.unreadable == 1 else f"{result.unreadable} files"
        notes.append(f"[Not searched: {what} could not be read (no permission, or a read error).]")
    if not result.hits:
        if _names_a_file(base, query.pattern):
            notes.insert(0, FILE_NAMED.format(name=query.pattern))
        text = "\n".join([f"No matches for `{query.pattern}` in {shown_dir(base, ctx)}.", *notes])
        text += "\n[Not searched: binary files and files over 2 MiB.] " + not_listed(query.scope)
        return ToolOutcome(text, content=[text_content(text)])
    lines = _lines(result.hits, query, ctx)
    if result.cut:
        what = "files" if query.files_only else "matches"
        lines.append(
            f"[Stopped after {query.limit} {what}; there are more. Narrow the search with path, "
            "glob or a more specific pattern, or raise max_results.]"
        )
    text = "\n".join(lines + notes)
    return ToolOutcome(
        clip(text, MODEL_MAX_CHARS, "matches"),
        content=[text_content(clip(text, SHOW_MAX_CHARS, "matches"))],
    )


FILE_NAMED = (
    "[`{name}` is the name of a file here: grep searches inside files, not for their names. "
    "To see that file, call read_file; to find files by name, call glob.]"
)


def _names_a_file(base: Path, pattern: str) -> bool:
    """Whether the pattern that found nothing is the name of a regular file in `base` (or of
    `base` itself): a model that greps for `data.txt` is looking for the file, and a bare "No
    matches" made small models give up and tell the user to run a command. Only a plain name
    is looked up (no separators), with lstat, inside the folder the search was allowed in."""
    if (
        not pattern
        or len(pattern) > 255
        or pattern in (".", "..")
        or any(c in pattern for c in "/\\\0")
    ):
        return False
    try:
        if base.is_file():
            return base.name == pattern
        return stat.S_ISREG(os.lstat(base / pattern).st_mode)
    except (OSError, ValueError):
        return False


def _lines(hits: list[Hit], query: GrepQuery, ctx: ToolContext) -> list[str]:
    if query.files_only:
        return [shown_path(h.path, ctx) for h in hits]
    grouped = bool(query.before or query.after)
    lines: list[str] = []
    previous: Hit | None = None
    for hit in hits:
        gap = previous is not None and (previous.path != hit.path or hit.line > previous.line + 1)
        if grouped and gap:
            lines.append("--")
        mark = ":" if hit.match else "-"
        lines.append(f"{shown_path(hit.path, ctx)}{mark}{hit.line}{mark} {_cut_line(hit.text)}")
        previous = hit
    return lines


def not_listed(scope: Scope) -> str:
    """What a search left out by default and the switch that includes it ("" for none)."""
    left = []
    if not scope.hidden:
        left.append("hidden files (include_hidden)")
    if not scope.ignored:
        left.append("files ignored by .gitignore and the like (include_ignored)")
    return f"[Not shown: {' or '.join(left)}.]" if left else ""


def _cut_line(line: str) -> str:
    return line if len(line) <= GREP_LINE_CHARS else line[:GREP_LINE_CHARS] + "…"


GREP = Tool(
    name="grep",
    description=(
        "Search file contents for a regular expression (ripgrep syntax). `path` is a file or a "
        "directory (default: the working directory); `glob` filters file names (`*.py`, or "
        "`tests/**/*.py` for paths). Prints `path:line: text` per matching line, paths relative "
        f"to the working directory, at most `max_results` (default {GREP_DEFAULT_RESULTS}). "
        "Skips hidden and .gitignored files (unless include_hidden / include_ignored), binary "
        "files, files over 2 MiB; does not follow links."
    ),
    kind="search",
    effect="read",
    present=_present_grep,
    run=_grep,
)
