"""Sandbox policies for tests, each one's private temp dir removed when the test ends: a policy
makes a folder in the system's temp dir, and the confine tests that made them without removing
them left ~46 behind per run. A test module that calls `made` imports `removed_policies` too
(an autouse fixture, so it applies to every test of that module); `made` refuses otherwise."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from acp_server.confine import sandbox
from acp_server.confine.sandbox import Level, Policy

_MADE: list[Policy] = []
_ACTIVE: list[bool] = []  # True while `removed_policies` runs around a test


def made(level: Level, roots: tuple[Path, ...]) -> Policy:
    """`sandbox.policy_for(level, roots, None)`, its temp dir removed after the test."""
    if not _ACTIVE:
        raise RuntimeError(
            "this policy's temp dir would be left behind: import `removed_policies` from "
            "tests.support.policies into the test module"
        )
    policy = sandbox.policy_for(level, roots, None)
    _MADE.append(policy)
    return policy


@pytest.fixture(autouse=True)
def removed_policies() -> Iterator[None]:
    """Remove the temp dir of every policy the test made with `made`."""
    _ACTIVE.append(True)
    try:
        yield
    finally:
        _ACTIVE.pop()
        while _MADE:
            sandbox.cleanup(_MADE.pop())
