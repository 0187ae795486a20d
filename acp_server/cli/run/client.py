"""`acp-server run "prompt"`: a headless ACP client that starts a real server over pipes.

It is what an editor does, minus the editor: spawn `acp-server serve`, initialize, open a
session (or resume a stored one, `--session ID`: `session.py`), send one prompt and print
the streamed reply. The reply goes to stdout; thoughts, tool activity with diffs, notices and
failures go to stderr (`printer.py`), so `acp-server run … > answer.md` keeps only the
answer, and the exit status says whether there was one (the codes are below and in
`run --help`). Permission is asked on the terminal, or given by `--yes`, or refused when
nobody can be asked (`permission.py`).

A command line that cannot work (a `--model` that neither the built-in providers nor the
configuration file know, a configuration file with a mistake, a `--script` that cannot be read,
a `--cwd` that is not a directory) is refused before any server starts.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import signal
import sys
from pathlib import Path
from typing import Any

from acp_server.backends.scripted import ScriptError, load_script
from acp_server.cli.run.elicit import Questions
from acp_server.cli.run.permission import Permissions, choose_policy
from acp_server.cli.run.printer import DIM, Printer, is_terminal
from acp_server.cli.run.session import UnknownSession, initialize, open_session, prompt
from acp_server.errors import ConnectionClosed, RemoteError
from acp_server.wire.jsonrpc import Connection

EXIT_ANSWERED = 0  # the turn ended normally (stop reason end_turn)
EXIT_FAILED = 1  # the turn failed (model or agent), or the server did
EXIT_USAGE = 2  # the command line cannot work (argparse uses 2 too)
EXIT_STOPPED = 3  # stopped before finishing: max_tokens, max_turn_requests, refusal
EXIT_INTERRUPTED = 130  # Ctrl-C: the turn was cancelled


def run_headless(args: argparse.Namespace) -> int:
    problem = command_line_problem(args)
    if problem is not None:
        print(f"acp-server run: {problem}", file=sys.stderr)
        return EXIT_USAGE
    try:
        return asyncio.run(_run(args))
    except KeyboardInterrupt:
        print("\n[stopped: interrupted]", file=sys.stderr)
        return EXIT_INTERRUPTED


def command_line_problem(args: argparse.Namespace) -> str | None:
    """Why this command line cannot work, found before a server starts (None: it can)."""
    cwd: Path | None = args.cwd
    if cwd is not None and not cwd.is_dir():
        what = "is not a directory" if cwd.exists() else "does not exist"
        return f"--cwd {cwd} {what}: give the folder the agent should work in."
    given = getattr(args, "script", None)
    script = given or os.environ.get("ACP_SERVER_SCRIPT")
    if script:
        try:
            load_script(Path(script).expanduser().resolve())
        except ScriptError as exc:
            return str(exc) if given else f"ACP_SERVER_SCRIPT: {exc}"
        return None  # a script replaces the model: --model does not matter
    return model_problem(args)


def model_problem(args: argparse.Namespace) -> str | None:
    """Why the models named cannot be used, checked as `serve` checks them: against the
    built-in providers and those of the configuration file (`--config`, ACP_SERVER_CONFIG, or
    the usual place), which must itself be readable."""
    from acp_server.config.file import ConfigError, config_path, load_config
    from acp_server.models.catalogue import (
        MODEL_ENV,
        ModelChoiceError,
        build_catalogue,
        model_values,
    )

    given = getattr(args, "model", None)
    path, named = config_path(getattr(args, "config", None), os.environ)
    try:
        build_catalogue(
            model_values(given, os.environ), load_config(path, os.environ, must_exist=named)
        )
    except ConfigError as exc:
        return str(exc)
    except ModelChoiceError as exc:
        return str(exc) if given else f"{MODEL_ENV}: {exc}"
    return None


def exit_code(stop: str, failed: bool) -> int:
    if failed:
        return EXIT_FAILED
    if stop == "end_turn":
        return EXIT_ANSWERED
    return EXIT_INTERRUPTED if stop == "cancelled" else EXIT_STOPPED


def turn_failure(result: dict[str, Any]) -> str | None:
    """The message of a failed turn (`_meta.acpServer.turnFailed`), None if it did not fail."""
    meta = result.get("_meta")
    ours = meta.get("acpServer") if isinstance(meta, dict) else None
    failed = ours.get("turnFailed") if isinstance(ours, dict) else None
    if not isinstance(failed, dict):
        return None
    return str(failed.get("message") or "the turn failed")


def _server_argv(args: argparse.Namespace) -> list[str]:
    argv = [sys.executable, "-m", "acp_server", "serve"]
    for flag, attr in (
        ("--script", "script"),
        ("--max-turn-requests", "max_turn_requests"),
        ("--context-window", "context_window"),
        ("--sandbox", "sandbox"),
        ("--config", "config"),
    ):
        value = getattr(args, attr, None)
        if value is not None:
            path = attr in ("script", "config")  # files: the server may run elsewhere
            argv += [flag, str(Path(value).resolve()) if path else str(value)]
    for model in getattr(args, "model", None) or []:
        argv += ["--model", model]
    for flag, attr in (("--log-level", "log_level"), ("--log-file", "log_file")):
        if getattr(args, attr, None) is not None:
            argv += [flag, str(getattr(args, attr))]
    if getattr(args, "log_stderr", False):
        argv.append("--log-stderr")
    return argv


async def _run(args: argparse.Namespace) -> int:
    # The server runs in a session of its own, away from the terminal: Ctrl-C typed there
    # signals the terminal's whole foreground process group, and a server that got it too
    # would die mid-turn instead of answering the `session/cancel` that `run` sends.
    proc = await asyncio.create_subprocess_exec(
        *_server_argv(args),
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        limit=1 << 20,
        start_new_session=True,
    )
    assert proc.stdin is not None and proc.stdout is not None
    stdout = proc.stdout
    printer = Printer(sys.stdout, sys.stderr, cwd=args.cwd)
    policy = choose_policy(bool(getattr(args, "yes", False)), is_terminal(sys.stdin))
    permissions = Permissions(policy, printer)
    conn = Connection(
        lambda: stdout.read(1 << 20),
        proc.stdin,
        requests={
            "session/request_permission": permissions.answer,
            "elicitation/create": Questions(permissions).answer,
        },
        notifications={"session/update": printer.update},
    )
    reader = asyncio.create_task(conn.serve())
    try:
        session_id, result = await _converse(conn, args, permissions)
    except UnknownSession as exc:
        print(f"acp-server run: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except (RemoteError, ConnectionClosed) as exc:
        printer.finish(None)
        return _server_failed(exc)
    finally:
        await end_server(proc)
        reader.cancel()
    return _report(printer, result, session_id)


async def end_server(proc: asyncio.subprocess.Process, grace: float = 5) -> None:
    """Close the server's input and give it `grace` seconds to finish; then kill it. Either way wait
    until its end has been seen here: a server killed but not awaited would be reported
    after the event loop closed ("Event loop is closed" on a busy machine), and its pipes
    left open."""
    assert proc.stdin is not None
    proc.stdin.close()
    try:
        await asyncio.wait_for(proc.wait(), grace)
    except TimeoutError:
        proc.kill()
        await proc.wait()


async def _converse(
    conn: Connection, args: argparse.Namespace, permissions: Permissions
) -> tuple[str, dict[str, Any]]:
    """Initialize, open (or resume) the session, set the mode, send the prompt: its id and
    the prompt's result. Ctrl-C from then on cancels the turn instead of killing `run`; a
    second Ctrl-C does not wait for the server to answer the cancel (KeyboardInterrupt)."""
    await initialize(conn)
    session_id = await open_session(conn, args)
    if getattr(args, "mode", None):
        await conn.request("session/set_mode", {"sessionId": session_id, "modeId": args.mode})

    loop = asyncio.get_running_loop()

    def cancel() -> None:
        permissions.cancel()
        conn.notify("session/cancel", {"sessionId": session_id})
        loop.remove_signal_handler(signal.SIGINT)  # the next one interrupts run itself

    loop.add_signal_handler(signal.SIGINT, cancel)
    return session_id, await prompt(conn, session_id, args.prompt)


def _report(printer: Printer, result: dict[str, Any], session_id: str) -> int:
    """End the output and say how the turn ended and how to go on; the exit status."""
    failure = turn_failure(result)
    printer.finish(failure)
    stop = str(result.get("stopReason"))
    again = f"[session {session_id}] to go on: acp-server run --session {session_id} PROMPT"
    print(printer.style.paint(again, DIM), file=sys.stderr)
    tokens = tokens_line(result)
    if tokens:
        print(printer.style.paint(tokens, DIM), file=sys.stderr)
    if failure is not None:
        print(f"acp-server run: {failure}", file=sys.stderr)
    elif stop != "end_turn":
        print(f"[stopped: {stop}]", file=sys.stderr)
    return exit_code(stop, failure is not None)


def tokens_line(result: dict[str, Any]) -> str:
    """The turn's tokens and the share of input the provider's prompt cache served, this turn
    and this session ("" when the server reported none)."""
    usage = result.get("usage")
    if not isinstance(usage, dict) or not usage.get("inputTokens"):
        return ""
    meta = (
        result.get("_meta", {}).get("acpServer", {})
        if isinstance(result.get("_meta"), dict)
        else {}
    )
    session = meta.get("sessionUsage") if isinstance(meta, dict) else None
    line = f"[tokens: {usage['inputTokens']:,} in, {usage.get('outputTokens', 0):,} out; "
    line += f"read from the provider's cache: {_share(usage)} of the input this turn"
    if isinstance(session, dict) and session.get("inputTokens"):
        line += f", {_share(session)} this session"
    return line + "]"


def _share(usage: dict[str, Any]) -> str:
    return f"{100 * (usage.get('cachedReadTokens') or 0) / usage['inputTokens']:.0f} %"


def _server_failed(exc: RemoteError | ConnectionClosed) -> int:
    if isinstance(exc, RemoteError):
        message = f"the server answered with an error: {exc.message}"
    else:
        message = "the server stopped before it answered (run with --log-level debug to see why)."
    print(f"acp-server run: {message}", file=sys.stderr)
    return EXIT_FAILED
