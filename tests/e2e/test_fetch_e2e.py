"""fetch_url through the real console script, against an HTTP server the test starts on
127.0.0.1: a page as Markdown, a redirect chain, a page too large (clipped), a private address
refused (without the switch), a scheme other than http(s) refused; the permission prompt shows
the URL, and "always allow" is remembered for the host."""

from __future__ import annotations

import http.server
import os
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, ClassVar

import pytest

from tests.e2e.test_background_e2e import result_text
from tests.e2e.test_tools_e2e import call, final_updates, open_session, run_prompt, tool_calls
from tests.support.fake_editor import FakeEditor

Start = Callable[..., Any]
PAGE = (
    "<html><head><title>Widget docs</title><style>body{color:red}</style></head><body>"
    "<h1>Widgets</h1><p>Use <code>make check</code> and <a href='/more'>read more</a>.</p>"
    "<ul><li>one</li><li>two</li></ul><script>alert('no')</script></body></html>"
)
PUBLIC = "93.184.215.14"  # a public address, never reached: the stand-in refuses it
BIG = "<html><body>" + "".join(f"<p>paragraph {i}</p>" for i in range(20_000)) + "</body></html>"


class Handler(http.server.BaseHTTPRequestHandler):
    requests: ClassVar[list[str]] = []  # every path asked, since the site started

    def do_GET(self) -> None:
        self.requests.append(self.path)
        if self.path == "/elsewhere":  # the same server under another host name
            self.send_response(302)
            port = self.headers["Host"].rsplit(":", 1)[1]
            self.send_header("Location", f"http://localhost:{port}/page")
            self.end_headers()
            return
        if self.path == "/loop":
            self.send_response(301)
            self.send_header("Location", "/loop")
            self.end_headers()
            return
        if self.path.startswith("/hop"):
            n = int(self.path[4:])
            target = "/page" if n >= 3 else f"/hop{n + 1}"
            self.send_response(302)
            self.send_header("Location", target)
            self.end_headers()
            return
        body = {"/page": PAGE, "/big": BIG, "/doc.pdf": "%PDF-1.7 ..."}.get(self.path)
        if body is None:
            self.send_error(404)
            return
        data = body.encode()
        self.send_response(200)
        kind = "application/pdf" if self.path.endswith(".pdf") else "text/html; charset=utf-8"
        self.send_header("Content-Type", kind)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, format: str, *args: Any) -> None:
        pass


@pytest.fixture
def site() -> Iterator[str]:
    Handler.requests = []
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


def allow_private(tmp_path: Path) -> dict[str, str]:
    return {"ACP_SERVER_FETCH_ALLOW_PRIVATE": "1", "ACP_SERVER_DATA_DIR": str(tmp_path / "d")}


async def test_pages_redirects_and_clipping(
    server_factory: Start, script: Any, tmp_path: Path, site: str
) -> None:
    rounds = [
        call("fetch_url", url=f"{site}/page"),
        call("fetch_url", url=f"{site}/hop1"),
        call("fetch_url", url=f"{site}/big"),
        call("fetch_url", url=f"{site}/loop"),
        call("fetch_url", url=f"{site}/doc.pdf"),
        call("fetch_url", url=f"{site}/missing"),
        {"text": "read"},
    ]
    editor = FakeEditor(choose=lambda params: "allow_always")
    server = await server_factory("--script", str(script(rounds)), env=allow_private(tmp_path))
    session = await open_session(server, editor, tmp_path)
    stop, frames = await run_prompt(server, session)
    assert stop == "end_turn"

    page = result_text(frames, "fetch_url", 0)
    assert page.startswith("# Widget docs\n")
    assert "# Widgets" in page and "`make check`" in page and "[read more](/more)" in page
    assert "- one\n- two" in page
    assert "alert" not in page and "color:red" not in page

    chain = result_text(frames, "fetch_url", 1)
    assert f"Redirected: {site}/hop1 → {site}/hop2 → {site}/hop3 → {site}/page" in chain
    assert "# Widgets" in chain

    big = result_text(frames, "fetch_url", 2)
    assert "paragraph 0" in big and "paragraph 19999" not in big
    assert "page truncated" in big and len(big) < 21_000

    assert "Too many redirects (more than 5)" in result_text(frames, "fetch_url", 3)
    assert "is application/pdf, not a web page" in result_text(frames, "fetch_url", 4)
    assert result_text(frames, "fetch_url", 5).startswith("The server answered HTTP 404.")

    # Asked once, showing the URL; "always allow" covered the host for the other fetches.
    (asked,) = editor.permission_requests
    assert f"{site}/page" in asked["toolCall"]["content"][0]["content"]["text"]
    assert asked["toolCall"]["kind"] == "fetch"
    assert any("127.0.0.1" in o["name"] for o in asked["options"])
    assert tool_calls(frames)["fetch_url"]["kind"] == "fetch"


async def test_private_addresses_and_other_schemes_are_refused(
    server_factory: Start, script: Any, tmp_path: Path, site: str
) -> None:
    rounds = [
        call("fetch_url", url=f"{site}/page"),
        call("fetch_url", url="file:///etc/passwd"),
        {"text": "refused"},
    ]
    editor = FakeEditor()
    env = {"ACP_SERVER_DATA_DIR": str(tmp_path / "d")}  # no switch: public addresses only
    server = await server_factory("--script", str(script(rounds)), env=env)
    session = await open_session(server, editor, tmp_path)
    _, frames = await run_prompt(server, session)

    finals = list(final_updates(frames).values())
    assert [f["status"] for f in finals] == ["failed", "failed"]
    private = result_text(frames, "fetch_url", 0)
    assert "Refused: 127.0.0.1 is a private or local address" in private
    assert "allow_private" in private
    scheme = result_text(frames, "fetch_url", 1)
    assert "only http and https" in scheme and "file" in scheme
    # The refused scheme never asked; the private one asked (the URL was fine) before refusing.
    assert len(editor.permission_requests) == 1


async def test_fetch_can_be_turned_off(server_factory: Start, script: Any, tmp_path: Path) -> None:
    rounds = [call("fetch_url", url="https://example.com/"), {"text": "no"}]
    env = {"ACP_SERVER_FETCH": "off", "ACP_SERVER_DATA_DIR": str(tmp_path / "d")}
    server = await server_factory("--script", str(script(rounds)), env=env)
    session = await open_session(server, FakeEditor(), tmp_path)
    _, frames = await run_prompt(server, session)
    assert "Unknown tool 'fetch_url'" in result_text(frames, "fetch_url")


async def test_a_redirect_to_another_host_asks_again(
    server_factory: Start, script: Any, tmp_path: Path, site: str
) -> None:
    rounds = [call("fetch_url", url=f"{site}/elsewhere"), {"text": "read"}]
    editor = FakeEditor(choose=lambda params: "allow_always")
    server = await server_factory("--script", str(script(rounds)), env=allow_private(tmp_path))
    session = await open_session(server, editor, tmp_path)
    _, frames = await run_prompt(server, session)
    port = site.rsplit(":", 1)[1]
    assert "# Widgets" in result_text(frames, "fetch_url")
    shown = [r["toolCall"]["content"][0]["content"]["text"] for r in editor.permission_requests]
    assert shown == [f"Fetch {site}/elsewhere", f"Fetch http://localhost:{port}/page"]


async def test_a_dns_answer_that_changes_after_the_check_leads_nowhere_new(
    server_factory: Start, script: Any, tmp_path: Path, site: str
) -> None:
    """DNS rebinding: `rebind.test` is a public address when checked and 127.0.0.1 after (a
    stand-in resolver in the agent, tests/support/dns_standin). The agent must connect to
    the address it checked (refused here: no internet), never to the site on 127.0.0.1."""
    port = site.rsplit(":", 1)[1]
    log = tmp_path / "standin.log"
    standin = Path(__file__).parents[1] / "support" / "dns_standin"
    env = {
        "ACP_SERVER_DATA_DIR": str(tmp_path / "d"),
        "PYTHONPATH": os.pathsep.join([str(standin), os.environ.get("PYTHONPATH", "")]),
        "STANDIN_PUBLIC_ADDRESS": PUBLIC,
        "STANDIN_LOG": str(log),
    }
    rounds = [call("fetch_url", url=f"http://rebind.test:{port}/page"), {"text": "read"}]
    editor = FakeEditor(choose=lambda params: "allow_once")
    server = await server_factory("--script", str(script(rounds)), env=env)
    session = await open_session(server, editor, tmp_path)
    stop, frames = await run_prompt(server, session)
    assert stop == "end_turn"
    text = result_text(frames, "fetch_url", 0)
    assert Handler.requests == [], text  # nothing reached the server on 127.0.0.1
    assert "Widgets" not in text and f"Cannot fetch http://rebind.test:{port}/page" in text
    assert log.read_text().splitlines() == [f"resolve {PUBLIC}", f"connect {PUBLIC}"]


async def test_ipv4_carried_in_ipv6_is_refused_like_the_ipv4_it_carries(
    server_factory: Start, script: Any, tmp_path: Path
) -> None:
    """Finding 10 over the wire: the loopback and the cloud metadata address written as NAT64,
    6to4, IPv4-mapped and IPv4-compatible IPv6 literals (a NAT64 gateway or the stack turns
    them back into the IPv4) are refused, as the IPv4 literals are."""
    hosts = ["[64:ff9b::7f00:1]", "[64:ff9b::a9fe:a9fe]", "[2002:7f00:1::]",
             "[::ffff:127.0.0.1]", "[::127.0.0.1]", "[2002:a9fe:a9fe::1]"]  # fmt: skip
    rounds = [*(call("fetch_url", url=f"http://{host}:8080/") for host in hosts), {"text": "no"}]
    env = {"ACP_SERVER_DATA_DIR": str(tmp_path / "d")}
    server = await server_factory("--script", str(script(rounds)), env=env)
    session = await open_session(server, FakeEditor(), tmp_path)
    _, frames = await run_prompt(server, session)
    finals = list(final_updates(frames).values())
    assert [f["status"] for f in finals] == ["failed"] * len(hosts), finals
    for n in range(len(hosts)):
        text = result_text(frames, "fetch_url", n)
        assert "Refused:" in text and "private or local address" in text, text
