"""The reply's cap: the room the prompt leaves, at least the reserve, at most the output limit."""

from __future__ import annotations

from acp_server.agent.reply_cap import reply_cap
from acp_server.context import Window


def test_the_room_left_not_the_reserve_of_a_small_window() -> None:
    window = Window(configured=8192)  # reserve 2,048
    assert reply_cap(window, 3000, None) == 8192 - 3300  # kept 10 % short of the estimate
    assert reply_cap(window, 7000, None) == 2048  # never below the reserve the budget keeps
    assert reply_cap(window, None, None) == 2048


def test_the_models_output_limit_bounds_it() -> None:
    assert reply_cap(Window(configured=16_384), 1000, 4096) == 4096


def test_large_and_unknown_windows_are_left_to_the_server() -> None:
    assert reply_cap(Window(configured=200_000), 1000, 64_000) is None
    assert reply_cap(Window(), 1000, None) is None
