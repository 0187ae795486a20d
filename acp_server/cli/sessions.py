"""`acp-server sessions`: the stored sessions, listed, or one exported as a readable transcript.

    acp-server sessions [--cwd DIR] [--limit N]
    acp-server sessions export ID [--format markdown|json] [-o FILE]

The list is a table, newest first. The export is the session as Markdown (the conversation as
the editor showed it) or JSON (the session, its history and the replayed updates); `export`
renders both, this module only parses the arguments, opens the store and reports errors.

A command for people at a terminal: it prints to stdout and never runs inside the server.
The store is `<data dir>/sessions.sqlite3` (`$ACP_SERVER_DATA_DIR`, or the user data directory).
"""

from __future__ import annotations

import argparse
import io
import json
import os
import shutil
import sqlite3
import sys
from collections.abc import Iterable
from pathlib import Path
from typing import TextIO

from acp_server.cli.export import local_time, render_json, render_markdown
from acp_server.settings import store_path
from acp_server.store.database import SessionRow, Store

DEFAULT_LIMIT = 50
PROG = "acp-server sessions"
LIST_USAGE = "list [--cwd DIR] [--limit N]"
EXPORT_USAGE = "export ID [--format markdown|json] [-o FILE]"


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog=PROG,
        usage=f"{PROG} [list] [--cwd DIR] [--limit N]\n       {PROG} {EXPORT_USAGE}",
        description="List the stored sessions (newest first), or export one as a transcript.",
        epilog=f"The sessions are kept in {store_path()} (set ACP_SERVER_DATA_DIR to use "
        "another directory).",
    )
    _list_options(parser)
    sub = parser.add_subparsers(dest="action", metavar="ACTION")
    # Each subcommand names itself: argparse would otherwise build its name from the parent's
    # two-line usage and print that twice, garbled, in every error.
    listing = sub.add_parser(
        "list",
        prog=f"{PROG} list",
        usage=f"{PROG} {LIST_USAGE}",
        help="list the stored sessions (the default)",
    )
    _list_options(listing)
    export = sub.add_parser(
        "export",
        prog=f"{PROG} export",
        usage=f"{PROG} {EXPORT_USAGE}",
        help="write one session's transcript as Markdown or JSON",
        description="Write one session's transcript as Markdown or JSON.",
    )
    export.add_argument("session_id", metavar="ID", help="the session id (see the list)")
    export.add_argument(
        "--format",
        choices=["markdown", "json"],
        default="markdown",
        help="markdown (default): a readable transcript; json: the session, its history and "
        "the replayed updates",
    )
    export.add_argument(
        "-o", "--output", metavar="FILE", type=Path, help="write to FILE instead of stdout"
    )
    return parser


def _list_options(parser: argparse.ArgumentParser) -> None:
    # Suppressed defaults, so `sessions --cwd X list` keeps X (a subparser's defaults would win).
    parser.add_argument(
        "--cwd",
        metavar="DIR",
        default=argparse.SUPPRESS,
        help="only the sessions whose directory is DIR",
    )
    parser.add_argument(
        "--limit",
        metavar="N",
        type=_positive,
        default=argparse.SUPPRESS,
        help=f"show at most N sessions (default {DEFAULT_LIMIT})",
    )


def _positive(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a whole number of at least 1, got {text!r}")
    return value


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if isinstance(sys.stdout, io.TextIOWrapper):
        sys.stdout.reconfigure(errors="replace")  # a title must not crash an ASCII terminal
    try:
        if args.action == "export":
            return export(args.session_id, args.format, args.output)
        return list_sessions(getattr(args, "cwd", None), getattr(args, "limit", None))
    except BrokenPipeError:  # `acp-server sessions | head`
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return 0
    except sqlite3.Error as exc:
        return _fail(f"cannot read the session store {store_path()}: {exc}")


def _fail(message: str) -> int:
    print(f"{PROG}: {message}", file=sys.stderr)
    return 1


def _open(path: Path) -> Store | None:
    """The store, or None when there is none yet (never creates one just to read it)."""
    return Store(path) if path.is_file() else None


# ----- list ------------------------------------------------------------------------------------


def list_sessions(cwd: str | None, limit: int | None, out: TextIO | None = None) -> int:
    out = out or sys.stdout
    limit = limit or DEFAULT_LIMIT
    path = store_path()
    store = _open(path)
    if store is None:
        print(f"No stored sessions: {path} does not exist yet.", file=out)
        print("Sessions are saved there once an editor starts one.", file=out)
        return 0
    try:
        wanted = _directory(cwd) if cwd is not None else None
        rows = store.list(cwd=wanted, limit=limit + 1, prompted_only=True)
        if not rows and wanted is not None and os.path.realpath(wanted) != wanted:
            wanted = os.path.realpath(wanted)  # the editor may have sent the resolved path
            rows = store.list(cwd=wanted, limit=limit + 1, prompted_only=True)
        shown = [(row, store.message_count(row.id)) for row in rows[:limit]]
    finally:
        store.close()
    where = f" for {wanted}" if wanted is not None else ""
    if not shown:
        print(f"No stored sessions{where} in {path}.", file=out)
        return 0
    width = shutil.get_terminal_size().columns if out.isatty() else None
    print(table(shown, width), file=out)
    count = f"{len(shown)} session" + ("s" if len(shown) != 1 else "")
    more = "; more exist, see --limit" if len(rows) > limit else ""
    print(f"\n{count}{where} in {path}, newest first{more}.", file=out)
    return 0


def _directory(text: str) -> str:
    """Absolute and normalized like the `cwd` the server stores (symlinks kept)."""
    return os.path.normpath(os.path.abspath(os.path.expanduser(text)))


def _home(path: str) -> str:
    home = os.path.expanduser("~")
    if home not in ("", "/") and (path == home or path.startswith(home + os.sep)):
        return "~" + path[len(home) :]
    return path


def table(rows: Iterable[tuple[SessionRow, int]], width: int | None = None) -> str:
    """The sessions as aligned columns; the title is cut to fit `width` when given."""
    header = ("ID", "UPDATED", "MESSAGES", "CWD", "TITLE")
    lines = [
        (row.id, local_time(row.updated_at), str(count), _home(row.cwd), row.title or "(untitled)")
        for row, count in rows
    ]
    widths = [max(len(r[i]) for r in [header, *lines]) for i in range(4)]
    right = (False, False, True, False)

    def fmt(cells: tuple[str, ...]) -> str:
        head = [
            c.rjust(w) if r else c.ljust(w) for c, w, r in zip(cells, widths, right, strict=False)
        ]
        text = "  ".join([*head, cells[4]])
        fits = max(width, sum(widths) + 8 + 12) if width is not None else len(text)
        return (text if len(text) <= fits else text[: fits - 1] + "…").rstrip()

    return "\n".join(fmt(cells) for cells in [header, *lines])


# ----- export ----------------------------------------------------------------------------------


def export(session_id: str, fmt: str, output: Path | None) -> int:
    path = store_path()
    store = _open(path)
    if store is None:
        return _fail(f"unknown session {session_id!r}: there is no session store at {path}.")
    try:
        row = store.get(session_id)
        if row is None:
            return _fail(
                f"unknown session {session_id!r}: it is not in {path} (or it was deleted). "
                f"Run `{PROG}` to see the stored sessions."
            )
        if fmt == "json":
            text = json.dumps(render_json(row, store), ensure_ascii=False, indent=2)
        else:
            text = render_markdown(row, store)
    finally:
        store.close()
    if output is None:
        sys.stdout.write(text + "\n")
        return 0
    try:
        output.write_text(text + "\n", encoding="utf-8")
    except OSError as exc:
        return _fail(f"cannot write {output}: {exc.strerror or exc}")
    print(f"Wrote the {fmt} transcript of {session_id} to {output}.", file=sys.stderr)
    return 0
