"""The window and the silent-truncation guard (reading overflow errors: test_backend_overflow)."""

from __future__ import annotations

import pytest

from acp_server.context.window import DEFAULT_WINDOW, Window, truncated_to


def test_the_window_is_the_smallest_known() -> None:
    assert Window(configured=32768).size == 32768
    assert Window(configured=32768, discovered=8192).size == 8192
    assert Window(configured=4096, discovered=8192).size == 4096
    assert Window(configured=32768, discovered=16384, observed=6144).size == 6144


def test_an_unknown_window_is_a_conservative_8192() -> None:
    window = Window()
    assert not window.known
    assert window.size == DEFAULT_WINDOW == 8192


def test_the_reply_reserve_is_relative_to_the_window() -> None:
    assert Window(configured=4096).reply_reserve == 1024
    assert Window(configured=8192).reply_reserve == 2048
    assert Window(configured=200_000).reply_reserve == 4096
    assert Window(configured=8192).budget == 6144
    assert Window(configured=8192, reserve=500).budget == 7692
    assert Window(configured=8192, reserve=10**6).reply_reserve == 4096  # never half or more


def test_lowering_only_ever_shrinks() -> None:
    window = Window(configured=32768)
    assert window.lower(8192)
    assert window.size == 8192
    assert not window.lower(16384)
    assert window.size == 8192
    assert window.lower(3)  # a misreading: clamped to a sane minimum
    assert window.size == 512


@pytest.mark.parametrize(
    ("sent", "reported", "lowered"),
    [
        (13000, 6144, 6144),  # the server kept half: lower to what it kept
        (13000, 9200, None),  # 70.8 %: plausible disagreement between tokenizers
        (1000, 600, 600),  # 60 % and 400 fewer: both conditions hold
        (1000, 750, None),  # 75 %: plausible
        (800, 550, None),  # 69 % but only 250 tokens apart
        (13000, 0, None),  # nothing reported
        (13000, 300, None),  # a prompt cache counting only the new tokens, not a 300-token model
    ],
)
def test_the_truncation_guard(sent: int, reported: int, lowered: int | None) -> None:
    assert truncated_to(sent, reported) == lowered


def test_a_low_count_is_believed_only_when_the_next_agrees() -> None:
    window = Window(configured=32768)
    assert not window.suspect_cut(6144)  # once: a suspicion
    assert window.size == 32768
    assert not window.suspect_cut(9000)  # a different count: not the same cut
    assert window.suspect_cut(8500)  # close to the one before: believed
    assert (window.size, window.source) == (8500, "truncation")


def test_a_full_count_ends_the_suspicion_and_raises_a_smaller_window_to_it() -> None:
    window = Window(configured=32768)
    window.suspect_cut(6144)
    assert not window.plausible(5000)
    assert not window.suspect_cut(6144)  # the suspicion started over
    window.lower(4000, "truncation")
    assert window.plausible(5000)  # the server read more than 4,000: the window is wrong ...
    assert window.size == 5000  # ... but it was seen to hold 5,000, not more
    assert not window.plausible(4500) and window.size == 5000
    window.observed = None
    window.lower(4000, "overflow")  # a guess below what an error refused
    assert window.plausible(5000)
    assert window.size == 5000  # at least what was read, still below what was refused


def test_only_a_window_learned_from_low_counts_is_doubted() -> None:
    window = Window(configured=32768)
    window.lower(700, "truncation")
    assert window.doubtful() and window.size == 32768
    window.lower(4096, "overflow")  # the server's own error said so
    assert not window.doubtful() and window.size == 4096


@pytest.mark.parametrize(
    ("window", "where"),
    [
        (Window(), "the default"),
        (Window(configured=4096), "as configured (--context-window"),
        (Window(configured=32768, discovered=8192), "as the model server reports it"),
        (Window(discovered=8192, observed=4096), "error"),
    ],
)
def test_the_window_says_where_it_came_from(window: Window, where: str) -> None:
    assert where in window.describe()
