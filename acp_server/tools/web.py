"""fetch_url: a web page as Markdown (documentation, an issue linked in the prompt).

A fetch asks like a command (permission kind `fetch`, the prompt shows the URL) unless the user
chose "always allow" for its host. What it may reach is bounded, because the model may be
steered by what it read: only http and https; private, loopback and link-local addresses are
refused unless the user allows them (`[fetch] allow_private`, ACP_SERVER_FETCH_ALLOW_PRIVATE),
so a page cannot make the agent probe the local network or a cloud metadata endpoint; redirects
are followed one at a time (at most `MAX_REDIRECTS`), each hop checked again, and a hop to
another host asks again. The download stops at `MAX_BYTES` and `TOTAL_SECONDS`, and the text
the model reads is clipped to `MODEL_MAX_CHARS`.

Each hop's host is resolved once and every address checked (`addresses`, IPv4 carried in IPv6
included); the request then goes to a checked address, with the name in the Host header and in
TLS (SNI and the certificate check), so a DNS answer that changes after the check (rebinding)
leads nowhere new. Proxies from the environment are not used: they would connect wherever
their own DNS says. HTML becomes Markdown with `markdownify`
(a well-kept converter; scripts, styles and the like are removed first).
"""

from __future__ import annotations

import asyncio
import contextlib
import re
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any
from urllib.parse import urljoin, urlsplit

import httpx

from acp_server.permissions import Permit, url_host
from acp_server.tools.addresses import Resolve, addresses, system_resolve
from acp_server.tools.base import (
    Presentation,
    Tool,
    ToolContext,
    ToolFailure,
    ToolOutcome,
    clip,
    text_content,
)

MAX_REDIRECTS = 5
MAX_BYTES = 2 * 1024 * 1024
TOTAL_SECONDS = 30.0
CONNECT_SECONDS = 10.0  # per request, for connecting and for each read
MODEL_MAX_CHARS = 20_000
HEADERS = {"User-Agent": "acp-server (fetch_url)", "Accept": "text/html, text/*;q=0.9, */*;q=0.5"}
TEXT_TYPES = ("text/", "application/json", "application/xml", "application/xhtml")
NOISE = ["script", "style", "noscript", "template", "svg", "iframe", "head"]
_BLANK_RUNS = re.compile(r"\n{3,}")


@dataclass(frozen=True)
class Page:
    url: str
    hops: list[str]  # every URL asked, the first one first
    status: int
    content_type: str
    text: str
    cut: bool  # the body was larger than MAX_BYTES


def checked_url(url: str) -> str:
    """The URL when it is http(s) with a host; ToolFailure otherwise."""
    try:
        parts = urlsplit(url.strip())
    except ValueError as exc:
        raise ToolFailure(f"{url!r} is not a valid URL ({exc}).") from exc
    if parts.scheme.lower() not in ("http", "https"):
        raise ToolFailure(
            f"Refused: fetch_url reads only http and https addresses, not {parts.scheme or 'a'}"
            f": URL ({url!r}). Use read_file for files on disk."
        )
    if not parts.hostname:
        raise ToolFailure(f"{url!r} has no host name.")
    return url.strip()


async def _ask(ctx: ToolContext, url: str) -> None:
    await ctx.permit(Permit(url=url, preview=[text_content(f"Fetch {url}")]))


async def fetch(url: str, ctx: ToolContext, allow_private: bool, resolve: Resolve) -> Page:
    """GET `url`, following redirects one by one, each hop checked (and asked, on a new host)."""
    hops = [url]
    # A transport of our own: no proxy from the environment (a proxy would connect wherever
    # its DNS says), and no connection kept for the next hop (it was opened for another name).
    transport = httpx.AsyncHTTPTransport(limits=httpx.Limits(max_keepalive_connections=0))
    async with httpx.AsyncClient(transport=transport, follow_redirects=False) as client:
        for _ in range(MAX_REDIRECTS + 1):
            async with _get(client, url, allow_private, resolve) as response:
                location = response.headers.get("location")
                if not (response.is_redirect and location):
                    return await _page(response, url, hops)
            following = checked_url(urljoin(url, location))
            if url_host(following) != url_host(url):
                await _ask(ctx, following)
            url = following
            hops.append(url)
    raise ToolFailure(f"Too many redirects (more than {MAX_REDIRECTS}): " + " → ".join(hops))


@contextlib.asynccontextmanager
async def _get(
    client: httpx.AsyncClient, url: str, allow_private: bool, resolve: Resolve
) -> AsyncIterator[httpx.Response]:
    """GET `url` from an address its host was checked to have (see `_send`)."""
    target = httpx.URL(url)
    name = target.raw_host.decode("ascii")
    port = target.port or (443 if target.scheme == "https" else 80)
    response = await _send(client, target, await addresses(name, port, allow_private, resolve))
    try:
        yield response
    finally:
        await response.aclose()


async def _send(client: httpx.AsyncClient, target: httpx.URL, found: list[str]) -> httpx.Response:
    """The request goes to one of the `found` addresses, the next one being tried when one
    refuses the connection, with the name in the Host header and, for https, in the TLS
    handshake (SNI) and the certificate check."""
    headers = {**HEADERS, "Host": target.netloc.decode("ascii")}
    sni = {"sni_hostname": target.raw_host.decode("ascii")}

    def request(address: str) -> httpx.Request:
        to = target.copy_with(host=address)
        return client.build_request(
            "GET", to, headers=headers, timeout=CONNECT_SECONDS, extensions=sni
        )

    for address in found[:-1]:
        with contextlib.suppress(httpx.ConnectError):
            return await client.send(request(address), stream=True)
    return await client.send(request(found[-1]), stream=True)


async def _page(response: httpx.Response, url: str, hops: list[str]) -> Page:
    content_type = response.headers.get("content-type", "").split(";")[0].strip().lower()
    if not _readable(content_type):  # a PDF, an archive, a picture: not downloaded at all
        return Page(url, hops, response.status_code, content_type, "", False)
    body = bytearray()
    async for piece in response.aiter_bytes():
        body += piece
        if len(body) > MAX_BYTES:
            break
    cut = len(body) > MAX_BYTES
    charset = response.charset_encoding or "utf-8"
    try:
        text = bytes(body[:MAX_BYTES]).decode(charset, errors="replace")
    except LookupError:  # a charset Python does not know
        text = bytes(body[:MAX_BYTES]).decode("utf-8", errors="replace")
    return Page(url, hops, response.status_code, content_type, text, cut)


def markdown(html: str) -> tuple[str, str]:
    """The page's title and its body as Markdown."""
    from bs4 import BeautifulSoup
    from markdownify import MarkdownConverter

    soup = BeautifulSoup(html, "html.parser")
    title = soup.title.get_text(strip=True) if soup.title else ""
    for tag in soup(NOISE):
        tag.decompose()
    text = MarkdownConverter(heading_style="ATX", bullets="-").convert_soup(soup)
    return title, _BLANK_RUNS.sub("\n\n", text).strip()


def _html(content_type: str) -> bool:
    return content_type in ("text/html", "application/xhtml+xml") or not content_type


def _readable(content_type: str) -> bool:
    return _html(content_type) or content_type.startswith(TEXT_TYPES)


def render(page: Page) -> str:
    """What the model reads: where the page came from, and its text, clipped."""
    if _html(page.content_type):
        title, body = markdown(page.text)
    elif _readable(page.content_type):
        title, body = "", page.text.strip()
    else:
        raise ToolFailure(f"{page.url} is {page.content_type}, not a web page; not shown.")
    head = [f"# {title}"] if title else []
    head.append(f"URL: {page.url}")
    if len(page.hops) > 1:
        head.append("Redirected: " + " → ".join(page.hops))
    if page.cut:
        head.append(
            f"[The page is larger than {MAX_BYTES // (1024 * 1024)} MB: only its start was read.]"
        )
    return clip(
        "\n".join(head) + "\n\n" + (body or "(the page has no text)"), MODEL_MAX_CHARS, "page"
    )


def _present(args: dict[str, Any], ctx: ToolContext) -> Presentation:
    url = args.get("url")
    return Presentation(f"Fetch {url}" if isinstance(url, str) and url else "Fetch a web page")


def fetch_tool(allow_private: bool, resolve: Resolve = system_resolve) -> Tool:
    """The fetch_url tool; `allow_private` lets it reach private and loopback addresses,
    `resolve` finds a host's addresses (the system's resolver unless a test stands in)."""

    async def run(args: dict[str, Any], ctx: ToolContext) -> ToolOutcome:
        url = checked_url(str(args["url"]))
        await _ask(ctx, url)
        try:
            async with asyncio.timeout(TOTAL_SECONDS):
                page = await fetch(url, ctx, allow_private, resolve)
        except TimeoutError as exc:
            raise ToolFailure(f"{url} took longer than {TOTAL_SECONDS:g} s; stopped.") from exc
        except httpx.HTTPError as exc:
            raise ToolFailure(f"Cannot fetch {url}: {exc or type(exc).__name__}.") from exc
        text = render(page)
        if page.status >= 400:
            text = f"The server answered HTTP {page.status}.\n{clip(text, 2000, 'page')}"
        raw = {"url": page.url, "status": page.status, "redirects": len(page.hops) - 1}
        return ToolOutcome(text, ok=page.status < 400, raw_output=raw)

    return Tool(
        name="fetch_url",
        description=(
            "Read a web page (http or https) as Markdown: documentation, an issue, an API "
            f"reference. Long pages are clipped to {MODEL_MAX_CHARS:,} characters."
        ),
        kind="fetch",
        effect="fetch",
        present=_present,
        run=run,
    )
