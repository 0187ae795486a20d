"""HTTP/1.1 for the mock: reading one request, writing one response (chunked or not)."""

from __future__ import annotations

import asyncio
import http
import json
from dataclasses import dataclass
from typing import Any


@dataclass
class Recorded:
    """One request as the server saw it."""

    method: str
    path: str
    headers: dict[str, str]
    json: Any
    body: bytes = b""
    query: str = ""


class ResponseWriter:
    """Writes one HTTP/1.1 response; every body write is flushed at once."""

    def __init__(self, writer: asyncio.StreamWriter) -> None:
        self.writer = writer
        self.chunked = False
        self.extra: dict[str, str] = {}  # headers every response of this exchange carries

    async def head(
        self,
        status: int,
        content_type: str,
        length: int | None = None,
        headers: dict[str, str] | None = None,
    ) -> None:
        try:
            phrase = http.HTTPStatus(status).phrase
        except ValueError:
            phrase = "Overloaded" if status == 529 else "Unknown"
        lines = [f"HTTP/1.1 {status} {phrase}", f"Content-Type: {content_type}"]
        lines.append("Connection: close")
        if length is not None:
            lines.append(f"Content-Length: {length}")
        elif self.chunked:
            lines.append("Transfer-Encoding: chunked")
        extra = {**self.extra, **(headers or {})}
        lines += [f"{name}: {value}" for name, value in extra.items()]
        self.writer.write(("\r\n".join(lines) + "\r\n\r\n").encode("latin-1"))
        await self.writer.drain()

    async def send(self, data: bytes) -> None:
        if self.chunked:
            data = f"{len(data):x}\r\n".encode() + data + b"\r\n"
        self.writer.write(data)
        await self.writer.drain()

    async def end(self) -> None:
        if self.chunked:
            self.writer.write(b"0\r\n\r\n")
            await self.writer.drain()

    async def whole(
        self,
        status: int,
        body: Any,
        content_type: str | None = None,
        headers: dict[str, str] | None = None,
    ) -> None:
        """A complete response: JSON for dicts and lists, text/plain for strings by default."""
        if isinstance(body, str | bytes):
            data = body.encode() if isinstance(body, str) else body
            kind = content_type or "text/plain; charset=utf-8"
        else:
            data, kind = json.dumps(body).encode(), content_type or "application/json"
        await self.head(status, kind, len(data), headers)
        self.writer.write(data)
        await self.writer.drain()


async def read_request(reader: asyncio.StreamReader) -> Recorded | None:
    line = await reader.readline()
    if not line.strip():
        return None
    method, target, _ = line.decode("latin-1").split(" ", 2)
    headers: dict[str, str] = {}
    while (raw := await reader.readline()) not in (b"\r\n", b"\n", b""):
        name, _, value = raw.decode("latin-1").partition(":")
        headers[name.strip().lower()] = value.strip()
    if "content-length" in headers:
        body = await reader.readexactly(int(headers["content-length"]))
    elif headers.get("transfer-encoding", "").lower() == "chunked":
        body = b""
        while size := int((await reader.readline()).split(b";")[0], 16):
            body += await reader.readexactly(size)
            await reader.readline()
        await reader.readline()
    else:
        body = b""
    try:
        parsed = json.loads(body) if body else None
    except ValueError:
        parsed = None
    path, _, query = target.partition("?")
    return Recorded(method.upper(), path, headers, parsed, body, query)
