"""fetch_url's checks and rendering: schemes, addresses, and what the model reads."""

from __future__ import annotations

import http.server
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any, ClassVar
from urllib.parse import urlsplit

import pytest

from acp_server.editor_api import NoEditor
from acp_server.permissions import Permit
from acp_server.tools.addresses import addresses, system_resolve
from acp_server.tools.base import ToolContext, ToolFailure
from acp_server.tools.web import MODEL_MAX_CHARS, Page, checked_url, fetch_tool, render


async def check_address(url: str, allow_private: bool) -> list[str]:
    parts = urlsplit(url)
    return await addresses(parts.hostname or "", parts.port or 443, allow_private, system_resolve)


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
        # IPv4 carried in IPv6: a NAT64 gateway, a 6to4 relay or the stack itself turns
        # these into the private address on its side.
        "[64:ff9b::7f00:1]",  # NAT64 of 127.0.0.1
        "[64:ff9b::a9fe:a9fe]",  # NAT64 of 169.254.169.254
        "[64:ff9b:1::a00:1]",  # local-use NAT64
        "[2002:7f00:1::]",  # 6to4 of 127.0.0.1
        "[2002:c0a8:1::1]",  # 6to4 of 192.168.0.1
        "[2001:0:4136:e378:8000:63bf:80ff:fffe]",  # Teredo, client 127.0.0.1
        "[::ffff:a9fe:a9fe]",  # IPv4-mapped 169.254.169.254
        "[::127.0.0.1]",  # IPv4-compatible
        "[::10.0.0.1]",
        "[::ffff:0:7f00:1]",  # IPv4-translated
    ],
)
async def test_private_and_local_addresses_are_refused(host: str) -> None:
    with pytest.raises(ToolFailure, match="private or local address"):
        await check_address(f"http://{host}:8080/", allow_private=False)
    await check_address(f"http://{host}:8080/", allow_private=True)  # the user's switch


async def test_public_addresses_pass() -> None:
    await check_address("https://8.8.8.8/", allow_private=False)
    await check_address("http://[2606:4700:4700::1111]/", allow_private=False)
    await check_address("http://[64:ff9b::808:808]/", allow_private=False)  # NAT64 of 8.8.8.8
    await check_address("http://[2002:808:808::1]/", allow_private=False)  # 6to4 of 8.8.8.8


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


class Recorder(http.server.BaseHTTPRequestHandler):
    """Answers with the address it was reached on, and records the Host header it got."""

    seen: ClassVar[list[tuple[str, str]]] = []

    def do_GET(self) -> None:
        here = self.connection.getsockname()[0]
        self.seen.append((str(here), self.headers["Host"]))
        body = f"<html><body><p>served by {here}</p></body></html>".encode()
        self.send_response(200)
        self.send_header("Content-Type", "text/html")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: Any) -> None:
        pass


@pytest.fixture
def two_addresses() -> Iterator[int]:
    """The same port on 127.0.0.2 (the address checked) and on 127.0.0.1 (the rebinding)."""
    Recorder.seen = []
    try:
        checked = http.server.ThreadingHTTPServer(("127.0.0.2", 0), Recorder)
    except OSError:
        pytest.skip("127.0.0.2 is not a local address here (Linux has all of 127/8)")
    port = checked.server_address[1]
    try:
        rebound = http.server.ThreadingHTTPServer(("127.0.0.1", port), Recorder)
    except OSError:
        checked.server_close()
        pytest.skip(f"port {port} is taken on 127.0.0.1")
    for server in (checked, rebound):
        threading.Thread(target=server.serve_forever, daemon=True).start()
    yield port
    for server in (checked, rebound):
        server.shutdown()
        server.server_close()


async def test_the_request_goes_to_the_address_that_was_checked(two_addresses: int) -> None:
    asked: list[str] = []

    async def rebinding(host: str, port: int) -> list[str]:
        """A DNS that answers 127.0.0.2 once, and 127.0.0.1 from then on."""
        asked.append(host)
        return ["127.0.0.2"] if len(asked) == 1 else ["127.0.0.1"]

    async def permit(request: Permit) -> None:
        pass

    ctx = ToolContext("call-1", Path("/"), (Path("/"),), NoEditor(), lambda _: None, permit)
    tool = fetch_tool(allow_private=True, resolve=rebinding)
    outcome = await tool.run({"url": f"http://rebind.test:{two_addresses}/page"}, ctx)
    assert "served by 127.0.0.2" in outcome.text, outcome.text
    assert Recorder.seen == [("127.0.0.2", f"rebind.test:{two_addresses}")]
    assert asked == ["rebind.test"]  # resolved once
