"""Pictures recognized by their first bytes, given as images, refused above the size cap."""

from __future__ import annotations

import base64
from pathlib import Path

import pytest

from acp_server.tools import image_file
from acp_server.tools.base import ToolFailure
from acp_server.tools.image_file import image_type, read_image

PIXEL = base64.b64decode(
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg=="
)


@pytest.mark.parametrize(
    ("head", "mime"),
    [
        (PIXEL, "image/png"),
        (b"\xff\xd8\xff\xe0\x00\x10JFIF", "image/jpeg"),
        (b"GIF89a\x01\x00", "image/gif"),
        (b"RIFF\x24\x00\x00\x00WEBPVP8 ", "image/webp"),
        (b"print('not a picture')\n", None),
        (b"RIFF\x24\x00\x00\x00WAVEfmt ", None),  # a sound, not a WebP
    ],
)
def test_recognized_by_content_not_name(tmp_path: Path, head: bytes, mime: str | None) -> None:
    path = tmp_path / "file.txt"  # the name says nothing
    path.write_bytes(head)
    assert image_type(path) == mime


def test_missing_file_is_not_an_image(tmp_path: Path) -> None:
    assert image_type(tmp_path / "nope.png") is None


def test_an_image_is_content_for_the_editor_and_the_model(tmp_path: Path) -> None:
    path = tmp_path / "dot.png"
    path.write_bytes(PIXEL)
    outcome = read_image(path, "image/png", "dot.png")
    (image,) = outcome.images
    assert base64.b64decode(image.data) == PIXEL and image.mime_type == "image/png"
    assert outcome.content is not None
    block = outcome.content[0]["content"]
    assert (block["type"], block["data"], block["mimeType"]) == ("image", image.data, "image/png")
    assert outcome.text.startswith("dot.png: an image (image/png")


def test_too_large_is_refused_with_a_note(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(image_file, "MAX_BYTES", 10)
    path = tmp_path / "big.png"
    path.write_bytes(PIXEL)
    with pytest.raises(ToolFailure, match="Make a smaller copy"):
        read_image(path, "image/png", "big.png")
