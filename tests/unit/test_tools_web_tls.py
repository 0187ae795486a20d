"""fetch_url over https when it connects to the address it checked: the name still goes in the
TLS handshake (SNI) and the certificate is checked against the name, not the address."""

from __future__ import annotations

import datetime
import http.server
import ssl
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from acp_server.editor_api import NoEditor
from acp_server.permissions import Permit
from acp_server.tools.base import ToolContext, ToolFailure
from acp_server.tools.web import fetch_tool

NAME = "docs.test"


def certificate(folder: Path) -> tuple[Path, Path]:
    """A self-signed certificate for NAME only (no IP address in it)."""
    key = ec.generate_private_key(ec.SECP256R1())
    subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, NAME)])
    now = datetime.datetime.now(datetime.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(days=1))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.SubjectAlternativeName([x509.DNSName(NAME)]), critical=False)
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(key, hashes.SHA256())
    )
    cert_file, key_file = folder / "cert.pem", folder / "key.pem"
    cert_file.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_file.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    return cert_file, key_file


class Page(http.server.BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        body = f"<p>host {self.headers['Host']}</p>".encode()
        self.send_response(200)
        self.send_header("Content-Type", "text/html")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: Any) -> None:
        pass


@pytest.fixture
def https_site(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[int, list[str]]]:
    """An https server on 127.0.0.1 with NAME's certificate, trusted through SSL_CERT_FILE;
    it records the server name each handshake asked for."""
    cert_file, key_file = certificate(tmp_path)
    monkeypatch.setenv("SSL_CERT_FILE", str(cert_file))
    names: list[str] = []
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(cert_file, key_file)

    def record(sock: Any, name: str | None, ctx: ssl.SSLContext) -> None:
        names.append(str(name))

    context.sni_callback = record
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Page)
    server.socket = context.wrap_socket(server.socket, server_side=True)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield server.server_address[1], names
    server.shutdown()
    server.server_close()


async def fetch(url: str) -> str:
    async def local(host: str, port: int) -> list[str]:
        return ["127.0.0.1"]

    async def permit(request: Permit) -> None:
        pass

    ctx = ToolContext("call-1", Path("/"), (Path("/"),), NoEditor(), lambda _: None, permit)
    outcome = await fetch_tool(allow_private=True, resolve=local).run({"url": url}, ctx)
    return outcome.text


async def test_the_name_goes_in_the_handshake_and_the_host_header(
    https_site: tuple[int, list[str]],
) -> None:
    port, names = https_site
    assert f"host {NAME}:{port}" in await fetch(f"https://{NAME}:{port}/")
    assert names == [NAME]


async def test_the_certificate_must_match_the_name_not_the_address(
    https_site: tuple[int, list[str]],
) -> None:
    port, names = https_site
    with pytest.raises(ToolFailure, match="Cannot fetch"):
        await fetch(f"https://other.test:{port}/")  # same address, a name the cert lacks
    assert names == ["other.test"]
