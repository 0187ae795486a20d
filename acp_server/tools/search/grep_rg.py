"""grep through ripgrep: the arguments for a query, and its output read back into hits.

rg prints `path NUL line:text` for a matching line and `path NUL line-text` for a context line
(`--null` keeps any path unambiguous); with files_only it prints NUL-ended paths. Reading stops,
and rg is killed, at the first match past the limit.
"""

from __future__ import annotations

import asyncio
import re
from dataclasses import dataclass
from pathlib import Path

from acp_server.tools.search.grep_engine import MAX_FILE_BYTES, GrepQuery, GrepResult, Hit
from acp_server.tools.search.rg import scope_args, stream

_LINE = re.compile(rb"(\d+)([:-])")
_ESCAPE_OR_NUL = re.compile(r"\\.|\x00", re.DOTALL)
MAX_COLUMNS = 1000  # longer lines arrive as a preview; the tool shows 300 characters anyway


class RegexRejected(Exception):
    """rg could not compile the pattern: the message says why."""


@dataclass
class _Reader:
    base: Path
    query: GrepQuery
    result: GrepResult
    matches: int = 0

    def take(self, record: bytes) -> bool:
        """One record of rg's output; False once the limit is passed."""
        if self.query.files_only:
            return self._add(Hit(self.base / record.decode("utf-8", "surrogateescape"), 0, ""))
        name, sep, rest = record.partition(b"\0")
        found = _LINE.match(rest) if sep else None
        if found is None:
            return True  # `--` between context groups
        text = rest[found.end() :].decode("utf-8", "replace").rstrip("\r")
        path = self.base / name.decode("utf-8", "surrogateescape")
        return self._add(Hit(path, int(found[1]), text, found[2] == b":"))

    def _add(self, hit: Hit) -> bool:
        filtered = self.query.path_filter
        if filtered is not None and not filtered(hit.path.relative_to(self.base).as_posix()):
            return True
        if hit.match:
            if self.matches == self.query.limit:
                self.result.cut = True
                return False
            self.matches += 1
        self.result.hits.append(hit)
        return True


def rg_args(base: Path, query: GrepQuery) -> list[str]:
    """rg's arguments (after the binary) for `query`, run in `base`'s folder."""
    args = scope_args(base, query.scope, query.type_glob)
    args += ["--line-number", "--with-filename", "--no-heading"]
    args += [f"--max-filesize={MAX_FILE_BYTES}", f"--max-columns={MAX_COLUMNS}"]
    args.append("--max-columns-preview")
    if query.ignore_case:
        args.append("--ignore-case")
    if query.multiline:
        args.append("--multiline")
    if query.before:
        args.append(f"--before-context={query.before}")
    if query.after:
        args.append(f"--after-context={query.after}")
    if query.files_only:
        args.append("--files-with-matches")
    return [*args, f"--regexp={_nul_spelled(query.pattern)}", "--"]


def _nul_spelled(pattern: str) -> str:
    """`pattern` with each NUL written as rg's `\\x00` (a NUL cannot travel in an argument).
    Escapes are read whole: an escaped NUL (backslash, NUL) is a NUL too, where a plain
    replacement would leave a backslash and the text "x00"; an escaped backslash stays one."""
    return _ESCAPE_OR_NUL.sub(lambda m: "\\x00" if m[0] in ("\0", "\\\0") else m[0], pattern)


async def grep_rg(rg: str, base: Path, query: GrepQuery) -> GrepResult:
    """Matching lines (or files) under `base`, a file or a directory, up to the limit."""
    folder, target = (base, ".") if base.is_dir() else (base.parent, base.name)
    result = GrepResult()
    reader = _Reader(folder, query, result)
    sep = b"\0" if query.files_only else b"\n"
    args = await asyncio.to_thread(rg_args, folder, query)  # it may ask git for the excludes
    run = await stream([rg, *args, target], folder, reader.take, sep)
    if run.code == 2 and not run.stopped:
        problem = _regex_problem(run.errors)
        if problem is not None:
            raise RegexRejected(problem)
    if not run.stopped:
        result.unreadable = sum(1 for line in run.errors if line.startswith("rg: "))
    return result


def _regex_problem(errors: list[str]) -> str | None:
    """rg's reason for rejecting the pattern, when that is what its errors say."""
    if not any("regex" in line for line in errors[:2]):
        return None
    reasons = [line.removeprefix("error: ") for line in errors if line.startswith("error: ")]
    return reasons[-1] if reasons else errors[-1]
