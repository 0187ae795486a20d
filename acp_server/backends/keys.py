"""Where an HTTP backend's API key comes from: given outright, or read from an environment
variable at every request.

A key read from a variable is never kept in the backend: it is looked up when a request is
built, so a backend object (or anything that prints it, a debug dump, a traceback's locals)
holds only the variable's *name*. The variable is registered with `redaction` at once, so the
key is hidden from whatever the agent shows, logs or hands to commands even before the first
request carries it.
"""

from __future__ import annotations

import os
from collections.abc import Mapping

from acp_server import redaction


class ApiKey:
    """A key given to the constructor, else the value of `variable` in `environ` at each use."""

    def __init__(
        self,
        key: str | None = None,
        variable: str | None = None,
        environ: Mapping[str, str] | None = None,
    ) -> None:
        self._key = key or None
        self.variable = variable
        self._environ = os.environ if environ is None else environ
        if variable:
            redaction.remember_variable(variable)

    def value(self) -> str | None:
        """The key to send now (None: none is configured, send no credentials)."""
        if self._key is not None:
            return self._key
        return (self._environ.get(self.variable) or None) if self.variable else None

    def __repr__(self) -> str:
        return f"ApiKey(variable={self.variable!r})"
