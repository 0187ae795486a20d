"""fetch_url's checks and rendering: schemes, addresses, and what the model reads."""

from __future__ import annotations

import pytest

from acp_server.tools.base import ToolFailure
from acp_server.tools.web import MODEL_MAX_CHARS, Page, check_address, checked_url, render


@pytest.mark.parametrize(
    "url", ["file:///etc/passwd", "ftp://example.com/x", "javascript:alert(1)", "example.com"]
)
def test_only_http_and_https(url: str) -> None:
    with pytest.raises(ToolFailure, match="only http and https"):
        checked_url(url)


def test_a_url_needs_a_host() -> None:
    with pytest.raises(ToolFailure, match="no host"):
        checked_url("http:///path")
    assert checked_url(" https://docs.python.org/3/ ") == "https://docs.python.org/3/"


@pytest.mark.parametrize(
    "host",
    [
        "127.0.0.1",
        "10.1.2.3",
        "192.168.0.1",
        "169.254.169.254",  # cloud metadata
        "100.64.0.1",  # carrier-grade NAT
        "[::1]",
        "[::ffff:127.0.0.1]",  # loopback written as IPv6
        "[fe80::1]",
        "0.0.0.0",
        "localhost",
    ],
)
async def test_private_and_local_addresses_are_refused(host: str) -> None:
    with pytest.raises(ToolFailure, match="private or local address"):
        await check_address(f"http://{host}:8080/", allow_private=False)
    await check_address(f"http://{host}:8080/", allow_private=True)  # the user's switch


async def test_public_addresses_pass() -> None:
    await check_address("https://8.8.8.8/", allow_private=False)
    await check_address("http://[2606:4700:4700::1111]/", allow_private=False)


def page(text: str, content_type: str = "text/html", **kw: object) -> Page:
    fields: dict[str, object] = {
        "url": "https://x.test/a",
        "hops": ["https://x.test/a"],
        "status": 200,
        "content_type": content_type,
        "text": text,
        "cut": False,
    }
    fields.update(kw)
    return Page(**fields)  # type: ignore[arg-type]


def test_render() -> None:
    assert render(page('{"a": 1}', "application/json")) == 'URL: https://x.test/a\n\n{"a": 1}'
    shown = render(page("<p>" + "word " * 10_000 + "</p>", cut=True))
    assert "only its start was read" in shown and "page truncated" in shown
    assert len(shown) <= MODEL_MAX_CHARS + 100
    with pytest.raises(ToolFailure, match="image/png, not a web page"):
        render(page("\x89PNG", "image/png"))
