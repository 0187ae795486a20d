"""`acp-server doctor`: check the configuration, the model servers and their models, the
session store, the log file and the command an editor needs; one line per check (see
`acp_server.doctor`), exit status 1 when one fails, else 0."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import logging
import os
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from acp_server import __version__
from acp_server.cli.logs import LogSetupError, log_plan
from acp_server.doctor import Check, fail, fitted, ok, render
from acp_server.doctor.local import (
    editor_command_check,
    log_check,
    permissions_check,
    sandbox_check,
    store_check,
)
from acp_server.doctor.setup import read_setup

if TYPE_CHECKING:
    from acp_server.models.catalogue import ModelEntry
    from acp_server.settings import FetchSettings
    from acp_server.tools.mcp.config import ServerConfig

EXIT_OK = 0
EXIT_PROBLEM = 1


def doctor(args: argparse.Namespace) -> int:
    header = f"acp-server {__version__} on Python {sys.version.split()[0]} ({sys.executable})"
    sys.stdout.write(fitted(sys.stdout, header) + "\n")
    sys.stdout.flush()  # at once: the servers may take seconds
    checks = asyncio.run(gather(args, os.environ))
    render(checks, sys.stdout)
    return EXIT_PROBLEM if any(check.status == "fail" for check in checks) else EXIT_OK


async def gather(args: argparse.Namespace, env: Mapping[str, str]) -> list[Check]:
    """Every check, in the order a person would fix things."""
    from acp_server.doctor.servers import first_model, implied_model, server_checks

    script = getattr(args, "script", None) or env.get("ACP_SERVER_SCRIPT")
    fetch = None  # the configuration file's [fetch]
    if script:
        checks = [ok(f"Model: none asked; the scripted backend plays {script}")]
    else:
        setup = read_setup(getattr(args, "config", None), getattr(args, "model", None), env)
        env = setup.config.environ(env)  # keys stored with `login`/`setup` count, as in a session
        remote, catalogue = await server_checks(setup, env)
        checks = [*setup.checks, *remote, *await _mcp(setup.config.mcp_servers)]
        fetch = setup.config.fetch
        if getattr(args, "live", False):
            entry = first_model(catalogue) or implied_model(catalogue, env)
            checks.append(await _live(checks, entry, env))
        checks.append(sandbox_check(setup.config.sandbox, env, getattr(args, "sandbox", None)))
    checks += _tools(args, env, fetch)
    checks += [store_check(), permissions_check(), _log(args, env), editor_command_check()]
    return checks


async def _live(checks: list[Check], entry: ModelEntry | None, env: Mapping[str, str]) -> Check:
    from acp_server.doctor.live import live_check

    if entry is None:
        return fail("Live test: there is no model to ask", "Set one up first (see above).")
    if any(check.status == "fail" for check in checks):
        return fail(
            f"Live test of {entry.value}: not tried", "Fix the problems above first, then again."
        )
    return await live_check(entry, env)


async def _mcp(servers: Sequence[ServerConfig]) -> list[Check]:
    """The configuration file's MCP servers, when it has any (`mcp` is loaded only then)."""
    if not servers:
        return []
    from acp_server.doctor.mcp import mcp_checks

    return await mcp_checks(servers, Path.cwd())


def _tools(
    args: argparse.Namespace, env: Mapping[str, str], fetch: FetchSettings | None
) -> list[Check]:
    """The instructions and tools a session here would have (fetch_url as a session has it)."""
    from acp_server.doctor.tools import tools_checks
    from acp_server.settings import Settings, SettingsError

    with contextlib.suppress(SettingsError):  # the serve command says what is wrong
        fetch = Settings.from_env(env).fetch.over(fetch)
    option = getattr(args, "config", None)
    return tools_checks(str(option) if option else None, Path.cwd(), fetch)


def _log(args: argparse.Namespace, env: Mapping[str, str]) -> Check:
    try:
        plan = log_plan(args, env)
    except LogSetupError as exc:
        return fail("Log file: the log level cannot be used", str(exc))
    return log_check(plan.file, logging.getLevelName(plan.level).lower())
