"""The doctor's view of what every request carries before the conversation: the tools offered
(and how a small window's compact profile trims them) and the project instructions found for
the folder the doctor runs in, with what they cost in tokens (the fixed part of the budget)."""

from __future__ import annotations

from pathlib import Path

from acp_server.context.profile import SMALL_WINDOW, choose_profile
from acp_server.context.tokens import Estimator
from acp_server.doctor import Check, ok
from acp_server.messages import ToolSpec
from acp_server.session.text import system_prompt
from acp_server.settings import FetchSettings
from acp_server.workspace.instructions import shown_path
from acp_server.workspace.workspace import Workspace, user_folder

SMALL = 4096  # the window the compact profile is shown for


def tool_specs(fetch: FetchSettings | None = None) -> tuple[ToolSpec, ...]:
    """The tools a session offers (without MCP servers'), as the model sees them."""
    from acp_server import schemas
    from acp_server.tools.defaults import default_tools

    return tuple(
        ToolSpec(t.name, t.description, t.input_schema or schemas.load(f"tools/{t.name}.json"))
        for t in default_tools(fetch)
    )


def tools_checks(
    config_option: str | None, cwd: Path, fetch: FetchSettings | None = None
) -> list[Check]:
    """The instructions found in `cwd`, then the tools and the fixed part they make."""
    workspace = Workspace(cwd, (), user_folder(config_option))
    every = workspace.found()
    found = [f for f in every if not f.skipped]
    est = Estimator()
    skipped = "".join(
        f"; {shown_path(f.path, workspace.root)} not read: {f.skipped.rstrip('.')}"
        for f in every
        if f.skipped
    )
    if found:
        names = ", ".join(shown_path(f.path, workspace.root) for f in found)
        tokens = est.text("".join(f.text for f in found))
        clipped = sum(f.clipped for f in found)
        note = (f"; {clipped} clipped to fit" if clipped else "") + skipped
        instructions = ok(f"Project instructions for {cwd}: {names} (~{tokens:,} tokens{note})")
    else:
        instructions = ok(
            f"Project instructions for {cwd}: none found (optional: an AGENTS.md in the project, "
            f"or {workspace.user_dir / 'AGENTS.md' if workspace.user_dir else 'none'} for all)"
            + skipped
        )
    return [instructions, _tools(system_prompt(cwd, ()) + workspace.current(), est, fetch)]


def _tools(system: str, est: Estimator, fetch: FetchSettings | None) -> Check:
    specs = tool_specs(fetch)
    full = choose_profile(SMALL_WINDOW, system, specs, est)
    small = choose_profile(SMALL, system, specs, est)
    left = f", leaving out {', '.join(small.leave_out)}" if small.leave_out else ""
    at_small = "also gets it" if full.compact else "gets the full one"
    return ok(
        f"Tools: {len(specs)} offered ({', '.join(s.name for s in specs)}); with the system "
        f"prompt ~{full.full_tokens:,} tokens per request. A window under {SMALL_WINDOW:,} "
        f"gets the compact profile: ~{small.fixed_tokens:,} tokens at {SMALL:,}{left}; "
        f"{SMALL_WINDOW:,} {at_small}, the full one taking {'over' if full.compact else 'at most'} "
        "a quarter of it"
    )
