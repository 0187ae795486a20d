"""Imports flow downward only, and never in a circle: the guard that keeps the house standing.

The checker (tests/support/layering.py) is tested first on tiny packages written for the test,
then run on acp_server with the layer table below.
"""

from __future__ import annotations

import ast
import textwrap
from pathlib import Path

import acp_server
from tests.support.layering import Layers, imports, problems, room_cycles

PACKAGE = Path(acp_server.__file__).parent

# Top first: a module may import its own layer and the layers below. Each folder of the package
# is one layer; the few modules at the root sit in the layer they serve. A request flows
# wire -> protocol -> session -> agent, but the protocol imports the wire (it puts its handlers
# on the Connection) while the wire knows nothing of ACP, so in import order the wire sits below
# the protocol, and above the sessions and the agent, which never touch it.
LAYERS: Layers = [
    ("command line", ["__main__", "cli"]),
    # `acp-server doctor`'s checks: they read the configuration and ask the model servers.
    ("doctor", ["doctor"]),
    ("protocol", ["protocol"]),
    ("wire", ["wire"]),
    ("session", ["session"]),
    # What the model is told about where it works: instruction files, the environment, git.
    ("workspace", ["workspace"]),
    ("agent", ["agent"]),
    ("models", ["models"]),
    ("configuration file", ["config"]),
    ("store", ["store"]),
    ("tools and backends", ["tools", "backends", "permissions", "editor_api", "thought"]),
    # The sandbox every process started in a project runs in: the tools' commands and the
    # workspace's own git both use it.
    ("confinement", ["confine"]),
    # Pure arithmetic over the neutral messages: the agent's budget and compaction.
    ("context", ["context"]),
    (
        "vocabulary",
        [
            "messages",
            "updates",
            "errors",
            "schemas",
            "settings",
            "markdown",
            "redaction",
            "modes",
            "__init__",
        ],
    ),
]
WIRE = {"acp_server.wire.jsonrpc", "acp_server.wire.jsonline", "acp_server.wire.stdio"}
# A folder with more modules than this is a hall: give a concern a room (a subpackage).
MAX_MODULES = 15


def test_acp_server_imports_flow_downward_without_cycles() -> None:
    assert problems(PACKAGE, LAYERS) == []


def test_rooms_of_one_folder_never_import_each_other_in_a_circle() -> None:
    assert room_cycles(imports(PACKAGE)) == []


def test_the_tools_that_touch_the_project_never_load_mcp() -> None:
    # `import mcp` costs most of a second: only a session with MCP servers may pay it.
    rooms = ("files", "search", "commands")
    for module, targets in sorted(imports(PACKAGE).items()):
        if module.startswith(tuple(f"acp_server.tools.{room}." for room in rooms)):
            assert not {t for t in targets if t.startswith("acp_server.tools.mcp")}, module


def test_every_folder_says_what_it_holds_and_is_no_hall() -> None:
    folders = sorted({path.parent for path in PACKAGE.rglob("*.py")})
    for folder in folders:
        init = folder / "__init__.py"
        assert init.is_file(), f"{folder} has no __init__.py"
        docstring = ast.get_docstring(ast.parse(init.read_text(encoding="utf-8")))
        assert docstring, f"{init}: a docstring saying what the folder holds"
        modules = [path for path in folder.glob("*.py") if path.name != "__init__.py"]
        assert len(modules) <= MAX_MODULES, f"{folder}: {len(modules)} modules; give a room"


def test_the_wire_knows_nothing_about_acp() -> None:
    graph = imports(PACKAGE)
    for module in sorted(WIRE):
        assert graph[module] <= WIRE | {"acp_server.errors"}, module


# --- the checker, on tiny packages ------------------------------------------------------------

TOY_LAYERS: Layers = [
    ("top", ["top"]),
    ("middle", ["middle", "sub"]),
    ("bottom", ["low", "__init__"]),
]
CLEAN = {
    "__init__.py": "VERSION = '1'\n",
    "top.py": "from toy import middle\nfrom toy.sub import a\n",
    "middle.py": "from toy.low import helper\n",
    "low.py": "import os\n\ndef helper() -> None: ...\n",
    "sub/__init__.py": "",
    "sub/a.py": "from . import b\nfrom ..low import helper\nfrom toy import VERSION\n",
    "sub/b.py": "import toy.low\n",
}


def toy(tmp_path: Path, **changed: str) -> Path:
    """The CLEAN package with some files replaced (keys: paths with "/" written as "__")."""
    files = {**CLEAN, **{name.replace("__", "/") + ".py": text for name, text in changed.items()}}
    for name, text in files.items():
        path = tmp_path / "toy" / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text), encoding="utf-8")
    return tmp_path / "toy"


def test_a_clean_package_passes_and_every_kind_of_import_is_read(tmp_path: Path) -> None:
    package = toy(tmp_path)
    assert problems(package, TOY_LAYERS) == []
    assert imports(package) == {
        "toy": set(),
        "toy.top": {"toy.middle", "toy.sub.a"},
        "toy.middle": {"toy.low"},
        "toy.low": set(),
        "toy.sub": set(),
        "toy.sub.a": {"toy.sub.b", "toy.low", "toy"},
        "toy.sub.b": {"toy.low"},
    }


def test_a_cycle_fails(tmp_path: Path) -> None:
    package = toy(tmp_path, middle="from toy import sub\n", sub__b="from toy import middle\n")
    assert problems(package, TOY_LAYERS) == [
        "import cycle: toy.middle -> toy.sub, toy.sub.b -> toy.middle"
    ]


def test_a_cycle_through_a_function_level_import_fails(tmp_path: Path) -> None:
    lazy = "def later() -> None:\n    from toy.sub import a\n"
    package = toy(tmp_path, sub__b=lazy)
    assert problems(package, TOY_LAYERS) == [
        "import cycle: toy.sub.a -> toy.sub.b, toy.sub.b -> toy.sub.a"
    ]


def test_a_type_checking_import_counts(tmp_path: Path) -> None:
    typed = """\
        from typing import TYPE_CHECKING
        if TYPE_CHECKING:
            from toy.top import Thing
        """
    found = problems(toy(tmp_path, low=typed), TOY_LAYERS)
    assert "toy.low (bottom) imports toy.top from a layer above it (top)" in found
    assert found[0].startswith("import cycle: toy.low -> toy.top, ")


def test_an_upward_import_fails(tmp_path: Path) -> None:
    package = toy(tmp_path, middle="import toy.top\n")
    assert problems(package, TOY_LAYERS) == [
        "import cycle: toy.middle -> toy.top, toy.top -> toy.middle",
        "toy.middle (middle) imports toy.top from a layer above it (top)",
    ]


def test_rooms_that_import_each_other_fail_even_without_a_module_cycle(tmp_path: Path) -> None:
    package = toy(
        tmp_path,
        big__one__a="from toy.big.two import b\n",
        big__one__d="",
        big__two__b="",
        big__two__c="from toy.big.one import d\n",
    )
    assert room_cycles(imports(package)) == [
        "import cycle between rooms: toy.big.one.a -> toy.big.two.b, toy.big.two.c -> toy.big.one.d"
    ]
    assert (
        room_cycles(
            imports(
                toy(tmp_path / "clean", big__one__a="from toy.big.two import b\n", big__two__b="")
            )
        )
        == []
    )


def test_a_module_in_no_layer_fails(tmp_path: Path) -> None:
    assert problems(toy(tmp_path, stray=""), TOY_LAYERS) == [
        "toy.stray is in no layer: add it to the table"
    ]
