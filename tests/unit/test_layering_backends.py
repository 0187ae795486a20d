"""The backends stay below the configuration and the session: building a backend from a
configured provider, or discovering models, must not import `configfile` or `models` (they
import the backends, so that would be a cycle, and an import up the layer table)."""

from __future__ import annotations

from tests.support.layering import imports, upward_imports
from tests.unit.test_layering import LAYERS, PACKAGE


def test_the_backends_import_nothing_above_their_layer() -> None:
    graph = imports(PACKAGE)
    backends = {m: t for m, t in graph.items() if m.startswith("acp_server.backends")}
    assert upward_imports(backends, "acp_server", LAYERS) == []
