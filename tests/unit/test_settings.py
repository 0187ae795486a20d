"""Settings from the environment and the --context-window flag: values, precedence, and errors
that name the setting and say what to write."""

from __future__ import annotations

import argparse

import pytest

from acp_server.context.window import MIN_WINDOW
from acp_server.settings import (
    CONTEXT_WINDOW_ENV,
    MIN_CONTEXT_WINDOW,
    REPLY_RESERVE_ENV,
    FetchSettings,
    Settings,
    SettingsError,
    context_window_flag,
)


def test_nothing_set_keeps_the_defaults() -> None:
    settings = Settings.from_env({})
    assert settings == Settings()
    assert settings.context_window is None and settings.reply_reserve is None
    assert Settings.from_env({CONTEXT_WINDOW_ENV: "  ", REPLY_RESERVE_ENV: ""}) == Settings()


@pytest.mark.parametrize(
    ("raw", "tokens"), [("32768", 32768), (" 8192\n", 8192), ("131_072", 131072)]
)
def test_the_window_from_the_environment(raw: str, tokens: int) -> None:
    assert Settings.from_env({CONTEXT_WINDOW_ENV: raw}).context_window == tokens


def test_the_flag_wins_over_the_environment() -> None:
    env = {CONTEXT_WINDOW_ENV: "32768"}
    assert Settings.from_env(env, context_window=4096).context_window == 4096
    # The variable is not read at all then: a stale bad value does not stop the server.
    assert (
        Settings.from_env({CONTEXT_WINDOW_ENV: "lots"}, context_window=4096).context_window == 4096
    )


@pytest.mark.parametrize("raw", ["32k", "8192.5", "-8192", "0x2000", "32,768", "eight"])
def test_a_window_that_is_not_a_number_is_an_error(raw: str) -> None:
    with pytest.raises(SettingsError) as caught:
        Settings.from_env({CONTEXT_WINDOW_ENV: raw})
    message = str(caught.value)
    assert CONTEXT_WINDOW_ENV in message and repr(raw) in message
    assert "whole number of tokens, such as 32768" in message


def test_a_window_too_small_for_any_model_is_an_error() -> None:
    with pytest.raises(SettingsError, match="at least 512"):
        Settings.from_env({CONTEXT_WINDOW_ENV: "100"})
    assert Settings.from_env({CONTEXT_WINDOW_ENV: "512"}).context_window == 512
    assert MIN_CONTEXT_WINDOW == MIN_WINDOW  # the floor the context package lowers to


def test_the_reply_reserve() -> None:
    assert Settings.from_env({REPLY_RESERVE_ENV: "2048"}).reply_reserve == 2048
    assert Settings.from_env({REPLY_RESERVE_ENV: "0"}).reply_reserve == 0
    with_window = Settings.from_env({CONTEXT_WINDOW_ENV: "8192", REPLY_RESERVE_ENV: "1000"})
    assert (with_window.context_window, with_window.reply_reserve) == (8192, 1000)
    with pytest.raises(SettingsError, match=f"{REPLY_RESERVE_ENV} must be a whole number"):
        Settings.from_env({REPLY_RESERVE_ENV: "-1"})


def test_a_reserve_that_leaves_no_room_is_an_error() -> None:
    with pytest.raises(SettingsError) as caught:
        Settings.from_env({CONTEXT_WINDOW_ENV: "8192", REPLY_RESERVE_ENV: "4096"})
    message = str(caught.value)
    assert "less than half" in message and "8,192" in message and "4,096" in message
    with pytest.raises(SettingsError, match="less than half"):
        Settings.from_env({REPLY_RESERVE_ENV: "3000"}, context_window=4096)


def parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="acp-server", exit_on_error=False)
    parser.add_argument("--context-window", type=context_window_flag)
    return parser


def test_the_flag_as_an_argparse_type() -> None:
    assert parser().parse_args(["--context-window", "16384"]).context_window == 16384
    assert parser().parse_args([]).context_window is None


@pytest.mark.parametrize(
    ("raw", "said"),
    [("32k", "whole number of tokens"), ("10", "at least 512"), ("", "needs a number")],
)
def test_a_bad_flag_is_explained(raw: str, said: str) -> None:
    with pytest.raises(argparse.ArgumentError) as caught:
        parser().parse_args(["--context-window", raw])
    assert said in str(caught.value) and "--context-window" in str(caught.value)


def test_fetch_switches_from_the_environment_win_over_the_file() -> None:
    settings = Settings.from_env({"ACP_SERVER_FETCH_ALLOW_PRIVATE": "on"})
    assert settings.fetch == FetchSettings(None, True)
    merged = settings.with_file(FetchSettings(enabled=False, allow_private=False))
    assert merged.fetch == FetchSettings(False, True)
    assert Settings.from_env({}).with_file(None).fetch == FetchSettings()
    with pytest.raises(SettingsError, match="ACP_SERVER_FETCH must be on or off"):
        Settings.from_env({"ACP_SERVER_FETCH": "sometimes"})
