"""The context package stays pure: it reads the neutral messages and nothing else of ours, so
the loop, benchmarks and tests can use it without a backend, a session or the wire."""

from __future__ import annotations

from pathlib import Path

import acp_server
from tests.support.layering import imports


def test_context_imports_only_the_neutral_messages() -> None:
    graph = imports(Path(acp_server.__file__).parent)
    outside = {
        target
        for module, targets in graph.items()
        if module.startswith("acp_server.context")
        for target in targets
        if not target.startswith("acp_server.context")
    }
    assert outside == {"acp_server.messages"}


def test_reading_overflow_errors_needs_only_the_messages() -> None:
    graph = imports(Path(acp_server.__file__).parent)
    assert graph["acp_server.backends.overflow"] == {"acp_server.messages"}
