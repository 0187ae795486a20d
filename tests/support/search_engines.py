"""Both search engines for one test: ripgrep, and the pure-Python walk (ACP_SERVER_RG=off)."""

from __future__ import annotations

import pytest

from acp_server.tools.rg import RG_ENV, rg_binary


@pytest.fixture(params=["rg", "python"])
def engine(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """The engine name; the environment selects it for the tools."""
    name: str = request.param
    monkeypatch.setenv(RG_ENV, "off" if name == "python" else "")
    if name == "rg" and rg_binary() is None:
        pytest.fail("rg is missing: install the ripgrep package (pip install -e .)")
    return name
