"""read_file on a picture: a PNG, JPEG, GIF or WebP file is given to the model as an image.

Screenshots, diagrams and the output of a failing visual test are worth looking at, and the
models we talk to mostly read images. The file is recognized by its first bytes (not its name),
always read from disk (the editor's fs/read_text_file is for text), and shown in the tool call
as an ACP image block. A model that reads no images gets a note in its place: the backends do
that for every image (`backends.images`), so a tool's image is treated like a prompt's.

Images above `MAX_BYTES` are refused with a note instead of being resized: resizing would need
Pillow (a large compiled dependency) for what is rare in a code base, and the vendors' own caps
are about this size (Anthropic: 5 MB per image).
"""

from __future__ import annotations

import base64
from pathlib import Path

from acp_server.messages import ImagePart
from acp_server.tools.base import ToolFailure, ToolOutcome, text_content

MAX_BYTES = 5 * 1024 * 1024  # of the file; its base64 is a third larger
_SIGNATURES = (
    (b"\x89PNG\r\n\x1a\n", "image/png"),
    (b"\xff\xd8\xff", "image/jpeg"),
    (b"GIF87a", "image/gif"),
    (b"GIF89a", "image/gif"),
)


def image_type(path: Path) -> str | None:
    """The image MIME type the file starts with; None for anything else (or no such file)."""
    try:
        with path.open("rb") as f:
            head = f.read(16)
    except OSError:
        return None
    if head[:4] == b"RIFF" and head[8:12] == b"WEBP":
        return "image/webp"
    return next((mime for magic, mime in _SIGNATURES if head.startswith(magic)), None)


def read_image(path: Path, mime: str, shown: str) -> ToolOutcome:
    """The image as the model's and the editor's content; refused above MAX_BYTES."""
    size = path.stat().st_size
    if size > MAX_BYTES:
        raise ToolFailure(
            f"{shown} is an image ({mime}) of {size / 1024 / 1024:.1f} MB, more than the "
            f"{MAX_BYTES // 1024 // 1024} MB a model is given; not shown. Make a smaller copy "
            "(for example with ImageMagick: magick in.png -resize 1600x1600 out.png) and read that."
        )
    try:
        data = base64.b64encode(path.read_bytes()).decode("ascii")
    except OSError as exc:
        raise ToolFailure(f"Cannot read {path}: {exc.strerror or exc}") from exc
    text = f"{shown}: an image ({mime}, {_size(size)}), attached."
    block = {"type": "image", "data": data, "mimeType": mime, "uri": path.as_uri()}
    return ToolOutcome(
        text,
        content=[{"type": "content", "content": block}, text_content(text)],
        raw_output={"path": str(path), "mimeType": mime, "bytes": size},
        locations=[{"path": str(path)}],
        images=(ImagePart(data, mime, path.as_uri()),),
    )


def _size(size: int) -> str:
    return f"{size / 1024:.0f} KB" if size >= 1024 else f"{size} bytes"
