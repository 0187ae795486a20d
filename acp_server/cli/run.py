"""`acp-server run "prompt"`: a headless ACP client that starts a real server over pipes.

It is what an editor does, minus the editor: spawn `acp-server serve`, initialize, open a
session, send one prompt and print the streamed reply. The reply goes to stdout; thoughts, tool
activity, notices and failures go to stderr, so `acp-server run … > answer.md` keeps only the
answer, and the exit status says whether there was one (the codes are below and in
`run --help`). A command line that cannot work (a `--model` that neither the built-in providers
nor the configuration file know, a configuration file with a mistake, a `--script` that cannot
be read, a `--cwd` that is not a directory) is refused before any server starts.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import signal
import sys
from pathlib import Path
from typing import Any, TextIO

from acp_server.backends.scripted import ScriptError, load_script
from acp_server.errors import ConnectionClosed, RemoteError
from acp_server.jsonrpc import Connection, Params

EXIT_ANSWERED = 0  # the turn ended normally (stop reason end_turn)
EXIT_FAILED = 1  # the turn failed (model or agent), or the server did
EXIT_USAGE = 2  # the command line cannot work (argparse uses 2 too)
EXIT_STOPPED = 3  # stopped before finishing: max_tokens, max_turn_requests, refusal
EXIT_INTERRUPTED = 130  # Ctrl-C: the turn was cancelled


class _Printer:
    """Renders session/update notifications for a terminal: the reply on stdout, the rest on
    stderr. Separate messages (one per model round) are separated by a blank line.

    The first chunk of each new message is held back until anything else arrives. A turn that
    fails shows its failure to an editor as one last message of one chunk; held back, it can go
    to stderr with the failure instead of into the reply (see `finish`).
    """

    def __init__(self, out: TextIO, err: TextIO) -> None:
        self.out = out
        self.err = err
        self.in_thought = False
        self.wrote = False  # whether stdout got any reply text
        self.tail = ""  # the last characters written to stdout
        self.current: str | None = None  # the messageId being written to stdout
        self.held: tuple[str | None, str] | None = None  # a new message's first chunk

    def update(self, params: Params) -> None:
        update = params.get("update") or {}
        kind = update.get("sessionUpdate")
        content = update.get("content") or {}
        if kind == "agent_message_chunk" and content.get("type") == "text":
            self._end_thought()
            self._reply(update.get("messageId"), content["text"])
            return
        self.release()
        if kind == "agent_thought_chunk" and content.get("type") == "text":
            if not self.in_thought:
                self.err.write("\n[thinking] ")
                self.in_thought = True
            self.err.write(content["text"])
            self.err.flush()
            return
        self._end_thought()
        self._activity(kind, update)

    def _activity(self, kind: Any, update: dict[str, Any]) -> None:
        if kind == "tool_call":
            print(f"\n[tool] {update.get('title')}", file=self.err)
        elif kind == "tool_call_update" and update.get("status") in ("completed", "failed"):
            print(f"[tool {update['status']}] {update.get('toolCallId')}", file=self.err)
        elif kind == "plan":
            for entry in update.get("entries", []):
                print(f"[plan] {entry.get('status')}: {entry.get('content')}", file=self.err)
        elif kind == "notice":
            detail = f": {update['description']}" if update.get("description") else ""
            print(f"[{update.get('severity')}] {update.get('title')}{detail}", file=self.err)

    def _reply(self, message_id: str | None, text: str) -> None:
        if self.held is not None and self.held[0] != message_id:
            self.release()
        if self.held is not None:  # the held message goes on: it is a reply
            self.release()
            self._write(text)
        elif self.wrote and message_id == self.current:
            self._write(text)
        else:
            self.held = (message_id, text)

    def release(self) -> None:
        """Print the held first chunk of a message."""
        if self.held is None:
            return
        message_id, text = self.held
        self.held = None
        if self.wrote and message_id != self.current:
            if not self.tail.endswith("\n\n"):
                self.out.write("\n" if self.tail.endswith("\n") else "\n\n")
            text = text.lstrip("\n")
        self.current = message_id
        self._write(text)

    def finish(self, failure: str | None) -> None:
        """The turn is over: end the reply, leaving out the failure's own message."""
        held = self.held
        if held is not None and failure is not None and held[1].strip() == failure.strip():
            self.held = None
        self.release()
        self._end_thought()
        if self.wrote and not self.tail.endswith("\n"):
            self._write("\n")

    def _write(self, text: str) -> None:
        if text:
            self.out.write(text)
            self.out.flush()
            self.wrote = True
            self.tail = (self.tail + text)[-2:]

    def _end_thought(self) -> None:
        if self.in_thought:
            self.err.write("\n")
            self.in_thought = False


def run_headless(args: argparse.Namespace) -> int:
    problem = command_line_problem(args)
    if problem is not None:
        print(f"acp-server run: {problem}", file=sys.stderr)
        return EXIT_USAGE
    try:
        return asyncio.run(_run(args))
    except KeyboardInterrupt:
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
    from acp_server.configfile import ConfigError, config_path, load_config
    from acp_server.models import MODEL_ENV, ModelChoiceError, build_catalogue, model_values

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
    proc = await asyncio.create_subprocess_exec(
        *_server_argv(args),
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        limit=1 << 20,
    )
    assert proc.stdin is not None and proc.stdout is not None
    stdout = proc.stdout
    printer = _Printer(sys.stdout, sys.stderr)
    conn = Connection(
        lambda: stdout.read(1 << 20),
        proc.stdin,
        requests={"session/request_permission": _refuse_permission},
        notifications={"session/update": printer.update},
    )
    reader = asyncio.create_task(conn.serve())
    try:
        result = await _converse(conn, args)
    except (RemoteError, ConnectionClosed) as exc:
        printer.finish(None)
        return _server_failed(exc)
    finally:
        proc.stdin.close()
        try:
            await asyncio.wait_for(proc.wait(), 5)
        except TimeoutError:
            proc.kill()
        reader.cancel()
    return _report(printer, result)


def _report(printer: _Printer, result: dict[str, Any]) -> int:
    """End the output and say how the turn ended; the exit status."""
    failure = turn_failure(result)
    printer.finish(failure)
    stop = str(result.get("stopReason"))
    if failure is not None:
        print(f"acp-server run: {failure}", file=sys.stderr)
    elif stop != "end_turn":
        print(f"[stopped: {stop}]", file=sys.stderr)
    return exit_code(stop, failure is not None)


def _server_failed(exc: RemoteError | ConnectionClosed) -> int:
    if isinstance(exc, RemoteError):
        message = f"the server answered with an error: {exc.message}"
    else:
        message = "the server stopped before it answered (run with --log-level debug to see why)."
    print(f"acp-server run: {message}", file=sys.stderr)
    return EXIT_FAILED


async def _converse(conn: Connection, args: argparse.Namespace) -> dict[str, Any]:
    await conn.request(
        "initialize",
        {
            "protocolVersion": 1,
            "clientCapabilities": {
                "fs": {"readTextFile": False, "writeTextFile": False},
                "session": {"notices": {}},  # retry notices go to stderr, not into the reply
            },
            "clientInfo": {"name": "acp-server-run", "version": "1"},
        },
    )
    cwd = str((args.cwd or Path.cwd()).resolve())
    session = await conn.request("session/new", {"cwd": cwd, "mcpServers": []})
    session_id = session["sessionId"]
    if getattr(args, "mode", None):
        await conn.request("session/set_mode", {"sessionId": session_id, "modeId": args.mode})
    loop = asyncio.get_running_loop()
    loop.add_signal_handler(
        signal.SIGINT, lambda: conn.notify("session/cancel", {"sessionId": session_id})
    )
    result: dict[str, Any] = await conn.request(
        "session/prompt",
        {"sessionId": session_id, "prompt": [{"type": "text", "text": args.prompt}]},
    )
    return result


async def _refuse_permission(params: Params) -> dict[str, Any]:
    title = (params.get("toolCall") or {}).get("title", "a tool call")
    refused = f"\n[permission] refused {title}: `acp-server run` cannot ask you interactively."
    print(refused, file=sys.stderr)
    reject = next(
        (o for o in params.get("options", []) if o.get("kind") == "reject_once"),
        None,
    )
    if reject is None:
        return {"outcome": {"outcome": "cancelled"}}
    return {"outcome": {"outcome": "selected", "optionId": reject["optionId"]}}
