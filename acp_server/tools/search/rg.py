"""Running ripgrep for grep and glob: finding the binary, its arguments, and its output stream.

ripgrep walks and searches a tree many times faster than Python can, and it already honours
the ignore rules `ignore.py` describes; the `ripgrep` package ships its binary. `rg` is looked
for there first, then on PATH; `ACP_SERVER_RG` names another binary, or `off` for the
pure-Python search. Output is read in chunks as it comes and the process is killed as soon as
the caller has enough or is cancelled, so a capped or cancelled search never waits for rg.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import os
import signal
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from acp_server.tools.base import ToolFailure
from acp_server.tools.search.ignore import BUILT_IN_IGNORED, NEVER, Scope, git_root, global_excludes

RG_ENV = "ACP_SERVER_RG"
CHUNK = 1 << 16
MAX_FILE_BYTES = 2 * 1024 * 1024


def rg_binary() -> str | None:
    """The ripgrep binary to run, or None for the pure-Python search."""
    return _find(os.environ.get(RG_ENV, "").strip(), os.environ.get("PATH", ""))


@functools.lru_cache(maxsize=8)
def _find(setting: str, search_path: str) -> str | None:
    if setting.lower() == "off":
        return None
    if setting:
        return setting
    import shutil  # here: with bz2 and lzma it costs ~2 ms

    return _packaged() or shutil.which("rg", path=search_path)


def _packaged() -> str | None:
    """The `rg` the `ripgrep` package installed (into its environment's scripts folder)."""
    from importlib import metadata  # ~10 ms: at the first search, not with the tools

    try:
        files = metadata.distribution("ripgrep").files or []
    except metadata.PackageNotFoundError:
        return None
    for entry in files:
        if entry.name in ("rg", "rg.exe"):
            path = Path(str(entry.locate()))
            if path.is_file():
                return str(path)
    return None


def scope_args(root: Path, scope: Scope, type_glob: str | None = None) -> list[str]:
    """The arguments that make rg leave out what `ignore.Rules` leaves out."""
    args = ["--no-config", "--color=never", "--null", "--crlf", "--path-separator=/"]
    args += [f"--glob=!{name}" for name in NEVER]
    if scope.hidden:
        args.append("--hidden")
    if scope.ignored:
        args.append("--no-ignore")
    else:
        # rg reads the global excludes itself, but without GIT_CONFIG_GLOBAL: git's answer is ours.
        args.append("--no-ignore-global")
        excludes = global_excludes(root) if git_root(root) else None
        if excludes is not None:
            args.append(f"--ignore-file={excludes}")
        args += [f"--glob=!{name}/" for name in sorted(BUILT_IN_IGNORED)]
    if type_glob:
        args += [f"--type-add=pick:{type_glob}", "--type=pick"]
        if not scope.hidden:
            args.append("--glob=!.*")  # a type match would otherwise let hidden files in
    return args


@dataclass
class Run:
    """What one rg run left behind besides the records it handed over."""

    errors: list[str] = field(default_factory=list)
    stopped: bool = False  # the caller had enough before rg finished
    code: int | None = None


async def stream(
    cmd: list[str], cwd: Path, take: Callable[[bytes], bool], sep: bytes = b"\n"
) -> Run:
    """Run `cmd` in `cwd`, hand each `sep`-ended record of its output (each chunk as it comes,
    for an empty `sep`) to `take` until it says False; the process is killed when the caller
    stops early or is cancelled."""
    try:
        proc = await asyncio.create_subprocess_exec(
            *cmd,
            cwd=cwd,
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
        )
    except OSError as exc:
        raise ToolFailure(
            f"Cannot run ripgrep ({cmd[0]}): {exc.strerror or exc}. Set {RG_ENV} to the path of "
            f"an rg binary, or to `off` to search without it."
        ) from exc
    assert proc.stdout is not None and proc.stderr is not None
    errors = asyncio.ensure_future(proc.stderr.read())
    run = Run()
    done = False
    try:
        run.stopped = not await _feed(proc.stdout, take, sep)
        done = not run.stopped
    finally:
        if not done:
            _kill(proc.pid)
        run.code = await proc.wait()
        raw = await errors
    run.errors = [line for line in raw.decode("utf-8", "replace").splitlines() if line.strip()]
    return run


def _kill(pid: int) -> None:
    """Kill rg. Not `proc.kill()`: that polls first, and a poll that reaps the exited process
    leaves asyncio's own wait to report a wrong exit status."""
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, getattr(signal, "SIGKILL", signal.SIGTERM))


async def _feed(out: asyncio.StreamReader, take: Callable[[bytes], bool], sep: bytes) -> bool:
    """Hand records to `take`; False when it asked to stop."""
    pending = b""
    while chunk := await out.read(CHUNK):
        if not sep:
            if not take(chunk):
                return False
            continue
        *records, pending = (pending + chunk).split(sep)
        for record in records:
            if not take(record):
                return False
    return not pending or take(pending)
