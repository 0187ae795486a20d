"""What a GGUF model file says about itself: its chat template, read from the file's header.

A GGUF file opens with `GGUF`, a version, the number of tensors and of metadata entries, then
the entries: a key (a length-prefixed UTF-8 string), a value type and the value. The one the
`local` provider needs is `tokenizer.chat_template`, the Jinja template the model was trained
with: whether it has a place for tools decides whether the model is started with it (and
offered tools) or with plain ChatML (and told it has none). Reading it here costs a few
hundred milliseconds for a large vocabulary (its token list comes first and is skipped), and
needs neither llama-cpp-python nor the tensors.
"""

from __future__ import annotations

import re
import struct
from pathlib import Path
from typing import BinaryIO

MAGIC = b"GGUF"
TEMPLATE_KEY = "tokenizer.chat_template"
# Value types by number, with their sizes when fixed (8: string, 9: array).
_FIXED = {0: 1, 1: 1, 2: 2, 3: 2, 4: 4, 5: 4, 6: 4, 7: 1, 10: 8, 11: 8, 12: 8}
_STRING, _ARRAY = 8, 9
# A template that renders tools reads a `tools` variable (`{% if tools %}`, `tools | length`...).
_READS_TOOLS = re.compile(r"{[{%][^}]*\btools\b")


class GGUFError(Exception):
    """The file is not a GGUF file this reader understands."""


def chat_template(path: Path) -> str | None:
    """The model's own chat template (None: the file has none)."""
    with path.open("rb") as f:
        if f.read(4) != MAGIC:
            raise GGUFError(f"{path} is not a GGUF file (it does not start with 'GGUF')")
        version = _u32(f)
        if version < 2:
            raise GGUFError(f"{path} is a GGUF file of version {version}, too old to read")
        f.read(8)  # the number of tensors
        for _ in range(_u64(f)):
            key = _string(f)
            kind = _u32(f)
            if key == TEMPLATE_KEY and kind == _STRING:
                return _string(f)
            _skip(f, kind)
    return None


def renders_tools(template: str | None) -> bool:
    """Whether a chat template has a place for the tools a request offers."""
    return template is not None and _READS_TOOLS.search(template) is not None


def _skip(f: BinaryIO, kind: int) -> None:
    if kind in _FIXED:
        f.seek(_FIXED[kind], 1)
    elif kind == _STRING:
        f.seek(_u64(f), 1)
    elif kind == _ARRAY:
        item, count = _u32(f), _u64(f)
        if item in _FIXED:
            f.seek(_FIXED[item] * count, 1)
        else:
            for _ in range(count):
                _skip(f, item)
    else:
        raise GGUFError(f"unknown metadata value type {kind}")


def _u32(f: BinaryIO) -> int:
    return int(struct.unpack("<I", _exactly(f, 4))[0])


def _u64(f: BinaryIO) -> int:
    return int(struct.unpack("<Q", _exactly(f, 8))[0])


def _string(f: BinaryIO) -> str:
    return _exactly(f, _u64(f)).decode("utf-8", errors="replace")


def _exactly(f: BinaryIO, size: int) -> bytes:
    data = f.read(size)
    if len(data) != size:
        raise GGUFError("the file ends inside its metadata")
    return data
