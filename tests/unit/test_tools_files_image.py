"""Pictures recognized by their first bytes, given as images, refused above the size cap."""

from __future__ import annotations

import base64
import contextlib
import os
import threading
import time
from pathlib import Path

import pytest

from acp_server.confine import files
from acp_server.tools.base import ToolFailure, ToolOutcome
from acp_server.tools.files import image as image_file
from acp_server.tools.files.image import image_type


def read_image(path: Path, mime: str, shown: str) -> ToolOutcome:
    """The image as read_file reads it: through one descriptor opened for the sniff and read."""
    with files.open_regular(path) as file:
        return image_file.read_image(file, mime, shown, path)


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


def test_a_fifo_is_not_an_image_and_is_not_waited_for(tmp_path: Path) -> None:
    fifo = tmp_path / "pipe.png"
    os.mkfifo(fifo)  # opening it to read would wait for a writer
    writer = threading.Timer(5.0, _open_writer, (fifo,))  # ends such a wait: a failure, not a hang
    writer.start()
    started = time.monotonic()
    try:
        assert image_type(fifo) is None
        assert time.monotonic() - started < 3.0
    finally:
        writer.cancel()


def _open_writer(fifo: Path) -> None:
    with contextlib.suppress(OSError):  # no reader waiting: nothing to end
        os.close(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK))


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


def test_the_size_in_pixels_is_read_from_the_header() -> None:
    assert image_file.dimensions(PIXEL, "image/png") == (1, 1)
    assert image_file.dimensions(b"GIF89a\x40\x01\xf0\x00", "image/gif") == (320, 240)
    # JPEG: SOI, an APP0 segment to skip, then SOF0 with height 480 and width 640.
    app0 = b"\xff\xe0\x00\x10" + b"JFIF\x00" + b"\x00" * 9
    sof0 = b"\xff\xc0\x00\x11\x08\x01\xe0\x02\x80\x03" + b"\x00" * 9
    assert image_file.dimensions(b"\xff\xd8" + app0 + sof0, "image/jpeg") == (640, 480)
    vp8x = b"RIFF\x00\x00\x00\x00WEBPVP8X" + b"\x00" * 8 + (1919).to_bytes(3, "little")
    assert image_file.dimensions(vp8x + (1079).to_bytes(3, "little"), "image/webp") == (1920, 1080)
    assert image_file.dimensions(b"\x89PNG\r\n\x1a\n", "image/png") is None  # cut short


def test_too_many_pixels_is_refused_with_a_note(tmp_path: Path) -> None:
    wide = bytearray(PIXEL)
    wide[16:20] = (9000).to_bytes(4, "big")  # the IHDR width
    path = tmp_path / "wide.png"
    path.write_bytes(bytes(wide))
    with pytest.raises(ToolFailure, match="9000x1 pixels, more than the 8,000"):
        read_image(path, "image/png", "wide.png")
    path.write_bytes(PIXEL)
    assert "(image/png, 1x1, " in read_image(path, "image/png", "dot.png").text
