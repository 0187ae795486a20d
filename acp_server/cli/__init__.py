"""The command line: its arguments, and the command they choose.

- `acp-server` (or `serve`): serve ACP on stdin/stdout, what editors run (`serve.py`);
- `acp-server run "PROMPT"`: a headless client that drives a real server over pipes (`run.py`);
- `acp-server sessions [export ID]`: the stored sessions, listed or exported (`sessions.py`,
  rendering in `export.py`);
- `acp-server setup`: choose the model at a terminal, keys stored (`setup.py`); `login` /
  `logout`: one API key stored or removed (`login.py`);
- `acp-server doctor`: checks the setup, one line per check (`doctor.py`, checks in
  `acp_server.doctor`); `doctor --mcp JSON` connects to MCP servers and lists their tools
  (`doctor_mcp.py`).

Only the chosen command's module is imported: serving must reach the `initialize` answer fast.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import NoReturn

from acp_server import __version__
from acp_server.settings import context_window_flag, sandbox_flag

DESCRIPTION = """\
A coding agent that editors launch as a subprocess and talk to over the Agent Client Protocol
(ACP v1, newline-delimited JSON-RPC on stdin/stdout).

  acp-server                      serve ACP on stdin/stdout (what an editor runs)
  acp-server run "PROMPT"         start a server, send one prompt, print the streamed reply
  acp-server sessions [export ID] list the stored sessions; export one as Markdown or JSON
  acp-server config               print the configuration in effect (secrets masked)
  acp-server doctor [--live]      check the setup: models, servers, keys, store, log, editor
  acp-server doctor --mcp JSON    connect to MCP server(s) and list their tools
  acp-server setup                choose the model: a hosted API (and its key), a local server, the
                                  embedded model
  acp-server login [VARIABLE]     store an API key in the configuration file; logout removes it
"""

EPILOG = """\
environment:
  ACP_SERVER_MODEL=P:M,P:M   same as --model P:M --model P:M (the first is the default)
  ACP_SERVER_CONFIG=FILE     same as --config FILE
  ACP_SERVER_DISCOVER=0      do not ask local servers (Ollama, LM Studio, llama.cpp) for models
  ACP_SERVER_EMBEDDED=0      never fall back to the embedded model (the `local` extra) by itself
  ACP_SERVER_LOCAL_CONTEXT=N the embedded model's window in tokens (default 8192)
  OPENAI_BASE_URL, OPENAI_API_KEY        any OpenAI-compatible server (vLLM, LM Studio, ...)
  ANTHROPIC_API_KEY, ANTHROPIC_BASE_URL  Anthropic
  OLLAMA_HOST                            Ollama (default 127.0.0.1:11434)
  ACP_SERVER_SCRIPT=FILE     same as --script FILE
  ACP_SERVER_LOG=LEVEL       same as --log-level LEVEL (ACP_SERVER_LOG_LEVEL, the older name)
  ACP_SERVER_LOG_STDERR=1    same as --log-stderr
  ACP_SERVER_LOG_THIRD_PARTY=1  also log what httpx and other libraries log below warning
  ACP_SERVER_MAX_LINE_BYTES=N  the longest message line accepted (default 64 MiB)

Logs never go to stdout (stdout carries the protocol) and, unless --log-stderr, not to stderr
either (editors show it): they go to a rotating log file in the user state directory
(~/.local/state/acp-server/log/ on Linux; `acp-server doctor` says where). stderr gets only a
fatal start-up error.
"""

RUN_EPILOG = """\
The reply goes to stdout; thoughts, tool activity, notices and every failure go to stderr.

exit status:
  0    the agent answered (stop reason end_turn)
  1    the turn failed: no usable model (none configured, a missing API key), the model
       server could not be reached or kept failing, or the agent or its server failed;
       stderr says what happened
  2    the command line cannot work: an unknown option, a --model or ACP_SERVER_MODEL
       that names no known provider (built in or in the configuration file), a
       configuration file with a mistake, a --script that is missing or invalid, a --cwd
       that is not a directory (nothing was started), a --session that names no stored
       session
  3    the agent stopped before it finished: the model's output limit (max_tokens), the
       --max-turn-requests limit, or the model refused
  130  interrupted: Ctrl-C cancelled the turn (a second Ctrl-C stops without waiting
       for the server to answer)
"""


def _positive(text: str) -> int:
    """A whole number of at least 1, as an argparse `type` (0 used to be ignored and a negative
    number ended every turn before it started)."""
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"needs a whole number of at least 1, not {text!r}")
    return value


def _common(parser: argparse.ArgumentParser) -> None:
    """The options every way of serving takes: what answers, and what is logged."""
    _model_options(parser)
    _log_options(parser)


def _model_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--script",
        metavar="FILE",
        type=Path,
        default=argparse.SUPPRESS,
        help="answer with the scripted backend, playing FILE (JSON array or JSONL of rounds)",
    )
    parser.add_argument(
        "--model",
        metavar="PROVIDER:MODEL",
        action="append",
        default=argparse.SUPPRESS,
        help="a model to offer, e.g. ollama:qwen3:8b, openai:gpt-4.1-mini, "
        "anthropic:claude-sonnet-4-5; repeat it to offer several (the first is the default; "
        "switch in the editor's model picker or with /model)",
    )
    parser.add_argument(
        "--config",
        metavar="FILE",
        type=Path,
        default=argparse.SUPPRESS,
        help="the configuration file (default: ~/.config/acp-server/config.toml); see "
        "`acp-server config`",
    )
    parser.add_argument(
        "--max-turn-requests",
        metavar="N",
        type=_positive,
        default=argparse.SUPPRESS,
        help="stop a turn after N model requests (default 50)",
    )
    parser.add_argument(
        "--context-window",
        metavar="N",
        type=context_window_flag,
        default=argparse.SUPPRESS,
        help="the model's context window in tokens, when its server does not say or says "
        "wrong (also ACP_SERVER_CONTEXT_WINDOW; the smallest known window is used)",
    )
    parser.add_argument(
        "--sandbox",
        metavar="LEVEL",
        type=sandbox_flag,
        default=argparse.SUPPRESS,
        help="where the commands the model runs are confined: off, read-only, "
        "workspace-write (the default: writes only in the session's folders, no network) or "
        "workspace-net (also ACP_SERVER_SANDBOX and the configuration file's `sandbox`)",
    )


def _log_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--log-level",
        choices=["debug", "info", "warning", "error"],
        default=argparse.SUPPRESS,
        help="how much to write to the log file (default: info; debug with --log-file)",
    )
    parser.add_argument(
        "--log-file",
        metavar="FILE",
        type=Path,
        default=argparse.SUPPRESS,
        help="write the log to FILE instead of ~/.local/state/acp-server/log/acp-server.log",
    )
    parser.add_argument(
        "--log-stderr",
        action="store_true",
        default=argparse.SUPPRESS,
        help="also write the log lines to stderr (some editors show each one as an error)",
    )


def _add_run(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """`acp-server run`: the headless client."""
    run = sub.add_parser(
        "run",
        help="send one prompt through a real server and print the reply",
        description="Start a server over pipes, send one prompt, print the streamed reply.",
        epilog=RUN_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    _common(run)
    run.add_argument("prompt", help="the prompt text")
    run.add_argument(
        "--cwd",
        metavar="DIR",
        type=Path,
        default=None,
        help="the session's working directory (default: the current directory)",
    )
    run.add_argument(
        "--mode",
        choices=["ask", "accept_edits", "plan", "bypass"],
        default=None,
        help="permission mode for the session (default: ask: at a terminal you are asked "
        "y/n/a; with stdin piped, calls that need permission are refused unless --yes or the "
        "mode allows them)",
    )
    run.add_argument(
        "--yes",
        action="store_true",
        help="allow every tool call that asks for permission, without asking",
    )
    run.add_argument(
        "--session",
        metavar="ID",
        default=None,
        help="continue the stored session ID (the model sees its earlier turns; "
        "`acp-server sessions` lists them)",
    )


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="acp-server",
        description=DESCRIPTION,
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"acp-server {__version__}")
    _common(parser)
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    # Some editor configurations launch agents as `agent acp`: accept that spelling too.
    serve = sub.add_parser("serve", aliases=["acp"], help="serve ACP on stdin/stdout (the default)")
    _common(serve)
    _add_run(sub)
    # Everything after `sessions` goes, as is, to cli.sessions (imported only then): no option
    # can start with the prefix "\0", so this parser takes none of them for itself.
    sessions = sub.add_parser(
        "sessions",
        help="list the stored sessions; export one as Markdown or JSON (see sessions -h)",
        add_help=False,
        prefix_chars="\0",
    )
    sessions.add_argument("arguments", nargs=argparse.REMAINDER, help=argparse.SUPPRESS)
    config = sub.add_parser(
        "config",
        help="print the configuration in effect, secrets masked (exit 1 if the file is broken)",
        description="Print the configuration in effect: the file's providers and models over "
        "the built-in ones, with keys named (and whether they are set), never shown.",
    )
    _common(config)
    _add_doctor(sub)
    _add_login(sub)
    setup = sub.add_parser(
        "setup",
        help="choose the model new sessions start with: a hosted API (its key stored, mode "
        "0600), a model server on this machine, or the embedded model",
        description="Choose, at a terminal, the model new sessions start with; it is written "
        "to the configuration file as default_model (an API key in its [keys] table, the file "
        'readable only by you). What your editor\'s "Set up a model" runs.',
    )
    _common(setup)
    return parser


def _add_doctor(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """`acp-server doctor`: what stands between the user and a working agent."""
    doctor = sub.add_parser(
        "doctor",
        help="check the setup: configuration, model servers and keys, models, store, log "
        "file, the command an editor needs (exit 1 if something fails)",
        description="Check everything the agent needs, one line per check, each problem with "
        "what to do. Exit status 1 when a check fails, else 0.",
    )
    _common(doctor)
    doctor.add_argument(
        "--live",
        action="store_true",
        help="also send the model new sessions start with one tiny request offering a tool, "
        "to see that it calls tools (costs a few tokens on a hosted API)",
    )
    doctor.add_argument(
        "--mcp",
        metavar="JSON",
        help="instead: connect to MCP server(s) as a session would and list their tools; JSON "
        'is one server as in mcpServers, e.g. \'{"name": "docs", "command": "/path/server", '
        '"args": []}\', or a list of them',
    )


def _add_login(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """`acp-server login` / `logout`: an API key kept in the configuration file."""
    for name, text in (
        ("login", "ask for an API key and store it in the configuration file (mode 0600)"),
        ("logout", "remove the API keys stored by login (or only VARIABLE's)"),
    ):
        command = sub.add_parser(name, help=text, description=text[0].upper() + text[1:] + ".")
        _common(command)
        command.add_argument(
            "variable",
            nargs="?",
            metavar="VARIABLE",
            help="the variable the key stands in for, e.g. OPENAI_API_KEY (default: the key "
            "of the default model)",
        )


def _serving_word_dropped(argv: list[str]) -> list[str]:
    """`acp-server acp login VAR` as `acp-server login VAR`: an editor's terminal authentication
    appends `login VAR` (or `setup`) to the command it launches, which may end in `acp` or
    `serve`."""
    for n, word in enumerate(argv):
        if word in ("login", "logout", "setup"):
            before = [i for i, w in enumerate(argv[:n]) if w in ("acp", "serve")]
            return [w for i, w in enumerate(argv) if i not in before[-1:]]
    return argv


class _ServingParser(argparse.ArgumentParser):
    """A parser of what serving takes, which raises where argparse would print and exit."""

    def error(self, message: str) -> NoReturn:
        raise argparse.ArgumentError(None, message)


def _no_terminal(prog: str) -> argparse.HelpFormatter:
    # The serving parser shows no help: no need for the terminal's width (argparse imports
    # shutil to ask for it, ~2 ms of start-up with the compression modules shutil loads).
    return argparse.HelpFormatter(prog, width=80)


def serving_parser() -> argparse.ArgumentParser:
    """The options of serving, and the words `serve` / `acp`: all an editor's launch needs,
    built in a fraction of the full parser's time (its nine commands: ~5 ms of start-up). No
    help, no error of its own: anything else is parsed again by the full parser."""
    parser = _ServingParser(prog="acp-server", add_help=False, formatter_class=_no_terminal)
    _common(parser)
    sub = parser.add_subparsers(dest="command")
    _common(sub.add_parser("serve", aliases=["acp"], add_help=False, formatter_class=_no_terminal))
    return parser


def parse(argv: list[str]) -> argparse.Namespace:
    """The command line: by the serving parser when it takes all of it, else the full one."""
    try:
        args, extra = serving_parser().parse_known_args(argv)
    except argparse.ArgumentError:
        extra = argv
    if not extra and args.command in (None, "serve", "acp"):
        return args
    return build_parser().parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse(_serving_word_dropped(sys.argv[1:] if argv is None else argv))
    # Imported here, each only for its command: serving must not pay for the others.
    if args.command == "sessions":
        from acp_server.cli.sessions import main as sessions_main

        return sessions_main(args.arguments)
    if args.command == "config":
        from acp_server.cli.showconfig import show_config

        return show_config(args)
    if args.command == "doctor":
        if args.mcp is not None:
            from acp_server.cli.doctor_mcp import check_mcp

            return check_mcp(args.mcp, sys.stdout)
        from acp_server.cli.doctor import doctor

        return doctor(args)
    if args.command == "setup":
        from acp_server.cli.setup import setup

        return setup(args)
    if args.command in ("login", "logout"):
        from acp_server.cli import login

        return login.login(args) if args.command == "login" else login.logout(args)
    if args.command == "run":
        from acp_server.cli.run.client import run_headless

        return run_headless(args)
    from acp_server.cli.serve import serve

    return serve(args)
