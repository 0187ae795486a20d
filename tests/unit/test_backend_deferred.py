"""A session's model backend is built at its first use, not at `session/new` (which editors
wait for): the HTTP stack is not even imported until a request needs it."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import AsyncIterator

from acp_server.backends import Backend
from acp_server.backends.deferred import Deferred
from acp_server.backends.scripted import ScriptedBackend
from acp_server.backends.unconfigured import UnconfiguredBackend
from acp_server.messages import Event, Finish, ModelRequest
from acp_server.models.source import ModelSource


async def test_the_backend_is_built_once_at_its_first_use() -> None:
    built: list[Backend] = []

    def build() -> Backend:
        backend = ScriptedBackend.from_rounds([{"text": "hi"}])
        built.append(backend)
        return backend

    deferred = Deferred(build, "scripted:x")
    assert deferred.label == "scripted:x" and built == [] and not deferred.built
    events: AsyncIterator[Event] = deferred.stream(ModelRequest(messages=()))
    assert isinstance([e async for e in events][-1], Finish)
    await deferred.context_window()
    assert len(built) == 1 and deferred.built


def test_a_model_source_defers_the_http_stack_until_a_request() -> None:
    # In a fresh interpreter: whether httpx is loaded depends on everything imported before.
    code = (
        "import sys\n"
        "from acp_server.models.source import ModelSource\n"
        "env = {'OPENAI_BASE_URL': 'http://127.0.0.1:9/v1'}\n"
        "source = ModelSource(['openai:m'], env)\n"
        "entry = source.catalogue().entries[0]\n"
        "backend = source.backend(entry)\n"
        "print(type(backend).__name__, 'httpx' in sys.modules)\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["Deferred", "False"]


def test_a_model_without_its_key_says_so_at_once() -> None:
    source = ModelSource(["openai:gpt-x"], {})  # OpenAI's own API, and no OPENAI_API_KEY
    backend = source.backend(source.catalogue().entries[0])
    assert isinstance(backend, UnconfiguredBackend)
    assert "OPENAI_API_KEY" in backend.message


def test_prepared_ahead_the_backend_and_its_http_client_are_made_without_a_request() -> None:
    # What the warm-up after session/new does (acp_server/session/warmup.py): a fresh
    # interpreter, so that the first client's TLS set-up (~15-30 ms) is really done here and not
    # later.
    code = (
        "import sys\n"
        "from acp_server.backends import Preparable\n"
        "from acp_server.models.source import ModelSource\n"
        "env = {'OPENAI_BASE_URL': 'http://127.0.0.1:9/v1'}\n"
        "source = ModelSource(['openai:m'], env)\n"
        "backend = source.backend(source.catalogue().entries[0])\n"
        "assert isinstance(backend, Preparable)\n"
        "import httpx\n"
        "made = []\n"
        "original = httpx.AsyncClient.__init__\n"
        "def counted(self, *a, **kw):\n"
        "    made.append(1)\n"
        "    original(self, *a, **kw)\n"
        "httpx.AsyncClient.__init__ = counted\n"
        "backend.prepare()\n"
        "print(backend.built, len(made))\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["True", "1"]
