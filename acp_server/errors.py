"""The error tree. Each class carries its JSON-RPC code; `jsonrpc.error_object` maps to the wire.

    AcpError (-32603 unless overridden)
    ├── ParseError          -32700  the line is not JSON
    ├── InvalidRequest      -32600  JSON, but not a JSON-RPC message
    ├── MethodNotFound      -32601
    ├── InvalidParams       -32602  message names the field and the problem
    ├── InternalError       -32603
    ├── RequestCancelled    -32800  `$/cancel_request`, shutdown
    ├── ResourceNotFound    -32002  unknown session, missing file
    └── AuthRequired        -32000  the default model needs a key (ACP's `auth_required`)
    RemoteError             an error the peer answered to one of *our* requests
    ConnectionClosed        the peer went away while we waited for an answer

Foreign exceptions (OSError, httpx errors) are translated where they happen; anything else that
escapes a handler becomes -32603 with a short message, and its traceback goes to the log only.
"""

from __future__ import annotations

from typing import Any


class AcpError(Exception):
    """An error that has a JSON-RPC code and a message meant for a person."""

    code = -32603

    def __init__(self, message: str, data: Any = None) -> None:
        super().__init__(message)
        self.message = message
        self.data = data


class ParseError(AcpError):
    code = -32700


class InvalidRequest(AcpError):
    code = -32600


class MethodNotFound(AcpError):
    code = -32601


class InvalidParams(AcpError):
    code = -32602


class InternalError(AcpError):
    code = -32603


class RequestCancelled(AcpError):
    code = -32800


class ResourceNotFound(AcpError):
    code = -32002


class AuthRequired(AcpError):
    """ACP's `auth_required`: a model needs a key first (the message names its variable)."""

    code = -32000


class RemoteError(Exception):
    """The peer answered one of our requests with a JSON-RPC error."""

    def __init__(self, code: int, message: str, data: Any = None) -> None:
        super().__init__(f"{message} (code {code})")
        self.code = code
        self.message = message
        self.data = data


class ConnectionClosed(Exception):
    """The peer closed the connection before answering our request."""
