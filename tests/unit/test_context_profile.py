"""The compact tool profile for small windows: measured, within a quarter of the window."""

from __future__ import annotations

from pathlib import Path

import pytest

from acp_server import schemas
from acp_server.context.profile import (
    LEAVE_OUT_ORDER,
    OPTIONS,
    SMALL_WINDOW,
    apply_profile,
    choose_profile,
    first_sentence,
    shorten,
)
from acp_server.context.tokens import Estimator
from acp_server.messages import ToolSpec
from acp_server.session.text import system_prompt
from acp_server.tools.defaults import default_tools

CORE = {"read_file", "edit_file", "run_command"}


def real_tools() -> tuple[ToolSpec, ...]:
    return tuple(
        ToolSpec(t.name, t.description, schemas.load(f"tools/{t.name}.json"))
        for t in default_tools()
    )


def real_system() -> str:
    return system_prompt(Path("/work/project"), ())


def test_large_windows_get_the_full_profile() -> None:
    tools = real_tools()
    profile = choose_profile(SMALL_WINDOW * 2, real_system(), tools, Estimator())
    assert not profile.compact and profile.leave_out == ()
    assert profile.fixed_tokens == profile.full_tokens
    assert apply_profile(profile, tools) == tools


def test_at_the_small_window_the_profile_is_compact_only_when_the_tools_crowd_it() -> None:
    """8,192 tokens (also the default window): compact when the full profile would take more
    than a quarter of it, as the current tools do; full when they fit."""
    tools = real_tools()
    crowded = choose_profile(SMALL_WINDOW, real_system(), tools, Estimator())
    assert crowded.full_tokens > crowded.limit and crowded.compact and crowded.within_limit
    few = [t for t in tools if t.name in CORE]
    roomy = choose_profile(SMALL_WINDOW, real_system(), few, Estimator())
    assert roomy.full_tokens <= roomy.limit and not roomy.compact


def test_parameters_that_need_a_tool_left_out_go_with_it() -> None:
    run = next(t for t in real_tools() if t.name == "run_command")
    kept = shorten(run).parameters["properties"]
    assert {"background", "stop_on_cancel"} <= set(kept)
    gone = shorten(run, ("command_output",)).parameters["properties"]
    assert "background" not in gone and "stop_on_cancel" not in gone and "command" in gone


@pytest.mark.parametrize("window", [2048, 4096, 6144])
def test_small_windows_keep_the_fixed_part_within_a_quarter(window: int) -> None:
    est = Estimator()
    tools = real_tools()
    profile = choose_profile(window, real_system(), tools, est)
    assert profile.compact
    assert profile.fixed_tokens < profile.full_tokens
    offered = apply_profile(profile, tools)
    assert {t.name for t in offered} >= CORE
    assert set(profile.leave_out) <= set(LEAVE_OUT_ORDER)
    measured = est.corrected(est.text(real_system()) + est.tools(offered))
    assert measured == profile.fixed_tokens
    if window >= 4096:
        assert profile.within_limit, profile.describe()


@pytest.mark.parametrize("window", [4096, 6144])
def test_tools_are_left_out_only_as_far_as_needed(window: int) -> None:
    est = Estimator()
    tools = real_tools()
    profile = choose_profile(window, real_system(), tools, est)
    order = tuple(name for name in LEAVE_OUT_ORDER if name in {t.name for t in tools})
    assert profile.leave_out == order[: len(profile.leave_out)]
    one_more = [shorten(t) for t in tools if t.name not in profile.leave_out[:-1]]
    assert est.corrected(est.text(real_system()) + est.tools(one_more)) > profile.limit


def test_shorten_keeps_the_schema_and_drops_examples_and_defaults() -> None:
    grep = next(t for t in real_tools() if t.name == "grep")
    short = shorten(grep)
    assert short.name == "grep"
    assert short.parameters["required"] == grep.parameters["required"]
    assert set(short.parameters["properties"]) == set(grep.parameters["properties"]) - set(
        OPTIONS["grep"]
    )
    text = str(short.parameters)
    assert "default" not in text and "$schema" not in text
    assert len(str(short)) < len(str(grep))
    pattern = short.parameters["properties"]["pattern"]["description"]
    assert pattern.startswith("Regular expression") and "Escape" not in pattern


def test_the_compact_profile_shows_the_options_a_small_model_misuses_no_more() -> None:
    """The 1.5B filled in every grep parameter it was shown (files_only, 50 lines of context):
    compact, grep shows what to search and where, not how to shape the result, and the
    left-out options still reach the tool when a call gives one."""
    from jsonschema import Draft202012Validator

    tools = {t.name: t for t in real_tools()}
    grep = shorten(tools["grep"])
    shown = {"pattern", "path", "glob", "ignore_case", "include_hidden", "include_ignored"}
    assert set(grep.parameters["properties"]) == shown
    offered = Draft202012Validator(grep.parameters)
    assert offered.is_valid({"pattern": "x", "files_only": True, "before": 2})
    assert not offered.is_valid({"path": "src"})  # what is shown is checked as before
    assert not offered.is_valid({"pattern": "x", "include_hidden": "yes"})
    assert Draft202012Validator(tools["grep"].parameters).is_valid(
        {"pattern": "x", "files_only": True, "before": 2}
    )
    for name, options in OPTIONS.items():
        full = set(tools[name].parameters["properties"])
        assert set(options) <= full - set(tools[name].parameters.get("required", ()))
        assert set(shorten(tools[name]).parameters["properties"]) == full - set(options)
    # A tool with nothing left out still refuses what it does not take.
    read = shorten(tools["read_file"])
    assert read.parameters["additionalProperties"] is False
    assert not Draft202012Validator(read.parameters).is_valid({"path": "a", "files_only": True})
    # The full profile shows everything.
    every = tuple(tools.values())
    profile = choose_profile(SMALL_WINDOW * 2, real_system(), every, Estimator())
    assert tools["grep"] in apply_profile(profile, every)


def test_first_sentence_is_not_fooled_by_abbreviations() -> None:
    assert first_sentence("Matches (e.g. `a.b`). Then more.") == "Matches (e.g. `a.b`)."
    assert first_sentence("One line only") == "One line only"


def test_describe_is_for_the_log_and_the_meter() -> None:
    line = choose_profile(4096, real_system(), real_tools(), Estimator()).describe()
    assert "compact profile" in line and "left out" in line and "fixed part" in line


def extra_tool(name: str) -> ToolSpec:
    text = "A tool added later. It does many things, described at length. " * 20
    return ToolSpec(name, text, {"type": "object", "properties": {"x": {"type": "string"}}})


def test_the_instructions_count_in_the_fixed_part() -> None:
    est = Estimator()
    tools = real_tools()
    plain = choose_profile(8000, real_system(), tools, est)
    instructed = choose_profile(8000, real_system() + "\n\nUse pnpm. " * 300, tools, est)
    assert instructed.full_tokens > plain.full_tokens + 500  # the instructions are measured
    assert len(instructed.leave_out) > len(plain.leave_out)
    assert set(instructed.leave_out).isdisjoint(CORE)


def test_the_session_chooses_again_when_the_system_prompt_grows() -> None:
    from acp_server.agent.turn_context import SessionContext
    from acp_server.settings import Settings

    session = SessionContext.made(Settings(context_window=8000), None)
    tools = real_tools()
    plain = session.tools(real_system(), tools)
    instructed = session.tools(real_system() + "\n\nUse pnpm. " * 300, tools)
    assert len(instructed) < len(plain)


def test_at_the_default_window_questions_to_the_user_go_before_the_projects_tools() -> None:
    """An editor that shows forms is offered ask_user and plan_ready too: at 8,192 tokens they
    are left out first, so that listing, writing and searching the project stay (grep,
    list_directory and write_file were left out for them, and a 1.5B model could not list or
    search the files it was asked about)."""
    from acp_server.tools.ask import ASK_USER
    from acp_server.tools.plan_ready import plan_ready_tool

    questions = [ASK_USER, plan_ready_tool(lambda: "plan", lambda mode: None)]
    tools = real_tools() + tuple(
        ToolSpec(t.name, t.description, schemas.load(f"tools/{t.name}.json")) for t in questions
    )
    profile = choose_profile(SMALL_WINDOW, real_system(), tools, Estimator())
    assert {"ask_user", "plan_ready"} <= set(profile.leave_out)
    offered = {t.name for t in apply_profile(profile, tools)}
    assert {"list_directory", "grep", "write_file"} <= offered, profile.describe()


def test_subagents_go_before_the_tools_that_list_and_search_the_project() -> None:
    """With `task` offered too (as a session offers it), a small window loses the subagent
    first: Qwen2.5-Coder-1.5B at 8,192 tokens was offered `task` but not `list_directory`, and
    asked to list the files it called list_directory anyway, which could not run."""
    from acp_server.tools.task import task_tool

    async def delegate(*args: object) -> str:
        return ""

    spec = task_tool(delegate)  # type: ignore[arg-type]
    task = ToolSpec(spec.name, spec.description, schemas.load("tools/task.json"))
    tools = (*real_tools(), task)
    for window in (4096, SMALL_WINDOW):
        profile = choose_profile(window, real_system(), tools, Estimator())
        assert "task" in profile.leave_out, profile.describe()
    offered = {t.name for t in apply_profile(profile, tools)}
    assert {"list_directory", "grep", "write_file"} <= offered, profile.describe()
