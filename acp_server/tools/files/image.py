"""read_file on a picture: a PNG, JPEG, GIF or WebP file is given to the model as an image.

Screenshots, diagrams and the output of a failing visual test are worth looking at, and the
models we talk to mostly read images. The file is recognized by its first bytes (not its name),
always read from disk (the editor's fs/read_text_file is for text) through the one descriptor
`read_file` opened (no link followed, never blocking, the size checked before reading, so the
file sniffed is the file read), and shown in the tool call as an ACP image block. A model
that reads no images gets a note in its place: the backends do that for every image
(`backends.images`), so a tool's image is treated like a prompt's.

Images above `MAX_BYTES`, or wider or taller than `MAX_SIDE` pixels, are refused with a note
instead of being resized: resizing would need Pillow (a large compiled dependency) for what is
rare in a code base, and the vendors' own caps are about these (Anthropic: 5 MB and 8,000
pixels a side; such a request would fail as a whole). The size in pixels is read from the
file's header (`dimensions`), and told to the model.
"""

from __future__ import annotations

import base64
import os
from pathlib import Path

from acp_server.confine import files
from acp_server.messages import ImagePart
from acp_server.tools.base import ToolFailure, ToolOutcome, text_content

MAX_BYTES = 5 * 1024 * 1024  # of the file; its base64 is a third larger
MAX_SIDE = 8000  # pixels
_JPEG_FRAMES = frozenset(range(0xC0, 0xD0)) - {0xC4, 0xC8, 0xCC}  # start-of-frame markers
_SIGNATURES = (
    (b"\x89PNG\r\n\x1a\n", "image/png"),
    (b"\xff\xd8\xff", "image/jpeg"),
    (b"GIF87a", "image/gif"),
    (b"GIF89a", "image/gif"),
)


def image_type(path: Path) -> str | None:
    """The image MIME type the file starts with; None for anything else (or no such file,
    or anything but a regular file: it is opened without blocking or following a link)."""
    try:
        with files.open_regular(Path(os.path.realpath(path))) as file:
            return image_type_of(file.head(16))
    except files.Refused:
        return None


def image_type_of(head: bytes) -> str | None:
    """The image MIME type of a file that starts with `head` (16 bytes); None for others."""
    if head[:4] == b"RIFF" and head[8:12] == b"WEBP":
        return "image/webp"
    return next((mime for magic, mime in _SIGNATURES if head.startswith(magic)), None)


def read_image(file: files.Opened, mime: str, shown: str, path: Path) -> ToolOutcome:
    """The image of the opened `file` (at `path`, named `shown` to the user) as the model's
    and the editor's content; refused above MAX_BYTES before anything is read."""
    size = file.size
    if size > MAX_BYTES:
        raise ToolFailure(
            f"{shown} is an image ({mime}) of {size / 1024 / 1024:.1f} MB, more than the "
            f"{MAX_BYTES // 1024 // 1024} MB a model is given; not shown. Make a smaller copy "
            "(for example with ImageMagick: magick in.png -resize 1600x1600 out.png) and read that."
        )
    try:
        raw = file.read(MAX_BYTES, "an image")
    except (files.Refused, OSError) as exc:
        raise ToolFailure(f"Cannot read {path}: {exc}") from exc
    found = dimensions(raw, mime)
    if found and max(found) > MAX_SIDE:
        raise ToolFailure(
            f"{shown} is an image of {found[0]}x{found[1]} pixels, more than the {MAX_SIDE:,} "
            "a side a model is given; not shown. Make a smaller copy and read that."
        )
    data = base64.b64encode(raw).decode("ascii")
    pixels = f"{found[0]}x{found[1]}, " if found else ""
    text = f"{shown}: an image ({mime}, {pixels}{_size(size)}), attached."
    block = {"type": "image", "data": data, "mimeType": mime, "uri": path.as_uri()}
    return ToolOutcome(
        text,
        content=[{"type": "content", "content": block}, text_content(text)],
        raw_output={"path": str(path), "mimeType": mime, "bytes": size},
        locations=[{"path": str(path)}],
        images=(ImagePart(data, mime, path.as_uri()),),
    )


def dimensions(data: bytes, mime: str) -> tuple[int, int] | None:
    """(width, height) from the image's header; None when it cannot be read."""
    try:
        if mime == "image/png":
            return _be(data, 16, 4), _be(data, 20, 4)
        if mime == "image/gif":
            return _le(data, 6, 2), _le(data, 8, 2)
        if mime == "image/webp":
            return _webp(data)
        return _jpeg(data)
    except IndexError:
        return None


def _webp(data: bytes) -> tuple[int, int] | None:
    kind = data[12:16]
    if kind == b"VP8 ":
        return _le(data, 26, 2) & 0x3FFF, _le(data, 28, 2) & 0x3FFF
    if kind == b"VP8L":
        bits = _le(data, 21, 4)
        return 1 + (bits & 0x3FFF), 1 + ((bits >> 14) & 0x3FFF)
    if kind == b"VP8X":
        return 1 + _le(data, 24, 3), 1 + _le(data, 27, 3)
    return None


def _jpeg(data: bytes) -> tuple[int, int] | None:
    """Walk the segments to the first start-of-frame, which holds the size."""
    at = 2
    while at + 9 < len(data):
        if data[at] != 0xFF:
            return None
        marker = data[at + 1]
        if marker == 0xFF:  # fill byte
            at += 1
        elif marker in _JPEG_FRAMES:
            return _be(data, at + 7, 2), _be(data, at + 5, 2)
        elif 0xD0 <= marker <= 0xD9 or marker == 0x01:  # markers without a length
            at += 2
        else:
            at += 2 + _be(data, at + 2, 2)
    return None


def _be(data: bytes, at: int, size: int) -> int:
    if at + size > len(data):
        raise IndexError(at)
    return int.from_bytes(data[at : at + size], "big")


def _le(data: bytes, at: int, size: int) -> int:
    if at + size > len(data):
        raise IndexError(at)
    return int.from_bytes(data[at : at + size], "little")


def _size(size: int) -> str:
    return f"{size / 1024:.0f} KB" if size >= 1024 else f"{size} bytes"
