"""A stand-in for DNS and for the internet, loaded into an agent under test by putting this
folder first on its PYTHONPATH (Python imports `sitecustomize` at startup).

Only when STANDIN_PUBLIC_ADDRESS is set: the name `rebind.test` resolves to that public
address the first time and to 127.0.0.1 every time after (DNS rebinding), and a connection to
the public address is refused (there is no internet in a test) and written to STANDIN_LOG, as
are the answers. Everything else goes to the real resolver and the real network.
"""

from __future__ import annotations

import os
import socket
from typing import Any

PUBLIC = os.environ.get("STANDIN_PUBLIC_ADDRESS")
LOG = os.environ.get("STANDIN_LOG", os.devnull)
NAME = "rebind.test"
_answers = 0
_real_getaddrinfo = socket.getaddrinfo
_real_connect = socket.socket.connect


def _note(line: str) -> None:
    with open(LOG, "a", encoding="utf-8") as log:
        log.write(line + "\n")


def _getaddrinfo(host: Any, port: Any, *args: Any, **kw: Any) -> Any:
    global _answers
    if host not in (NAME, NAME.encode()):
        return _real_getaddrinfo(host, port, *args, **kw)
    _answers += 1
    answer = PUBLIC if _answers == 1 else "127.0.0.1"
    _note(f"resolve {answer}")
    return _real_getaddrinfo(answer, port, *args, **kw)


def _connect(self: socket.socket, address: Any) -> None:
    if isinstance(address, tuple) and address[0] == PUBLIC:
        _note(f"connect {address[0]}")
        raise ConnectionRefusedError(111, "Connection refused (no internet in a test)")
    _real_connect(self, address)


if PUBLIC:
    socket.getaddrinfo = _getaddrinfo
    socket.socket.connect = _connect  # type: ignore[method-assign, assignment]
