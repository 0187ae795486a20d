"""For the search tools' tests: both engines (ripgrep, and the pure-Python walk with
ACP_SERVER_RG=off), a harness that runs a tool as the agent does, and trees on disk."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from acp_server.editor_api import NoEditor
from acp_server.permissions import Permit
from acp_server.tools.base import Tool, ToolContext, ToolOutcome
from acp_server.tools.search.rg import RG_ENV, rg_binary

SAMPLE: dict[str, str | bytes] = {
    "setup.py": "import os\n",
    "src/app.py": "def main():\n    return helper()\n",
    "src/util/helper.py": "def helper():\n    return 42\n",
    "src/web/index.ts": "export const main = 1;\n",
    "src/web/view.tsx": "const Main = () => null;\n",
    "docs/README.md": "# Main docs\n",
    ".github/ci.yml": "main: true\n",
    ".git/config.py": "main = 1\n",
    "node_modules/pkg/index.py": "main = 1\n",
    ".venv/lib/site.py": "main = 1\n",
    "src/__pycache__/app.py": "main = 1\n",
}


@pytest.fixture(params=["rg", "python"])
def engine(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """The engine name; the environment selects it for the tools."""
    name: str = request.param
    monkeypatch.setenv(RG_ENV, "off" if name == "python" else "")
    if name == "rg" and rg_binary() is None:
        pytest.fail("rg is missing: install the ripgrep package (pip install -e .)")
    return name


@dataclass
class Harness:
    cwd: Path
    permits: list[Permit] = field(default_factory=list)
    updates: list[dict[str, Any]] = field(default_factory=list)

    def context(self) -> ToolContext:
        async def permit(request: Permit) -> None:
            self.permits.append(request)

        return ToolContext("call_1", self.cwd, (self.cwd,), NoEditor(), self.updates.append, permit)

    async def run(self, tool: Tool, **args: Any) -> ToolOutcome:
        return await tool.run(args, self.context())


def tree(root: Path, files: dict[str, str | bytes]) -> None:
    for rel, body in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(body, bytes):
            path.write_bytes(body)
        else:
            path.write_text(body)
