"""A local model whose template takes tools, but which only writes calls the agent cannot read:
after two such replies (each asked again once) the user is told, once, that the model is not
offered tools any more, and the next request goes without them.

The model server is a stand-in: a `llama_cpp.server` module on PYTHONPATH, which the agent's
embedded-model process (`backends.local_child`) runs as it would the real one. It is the mock
LLM server (tests/support/mock_llm) on the port it is given, answering every chat request with
a call to a tool that was never offered, and writing each request's body to a file.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

from tests.e2e.test_tools_e2e import open_session
from tests.support.fake_editor import FakeEditor
from tests.unit.test_backends_local_gguf import WITH_TOOLS, write_gguf

ROOT = Path(__file__).resolve().parents[2]
Start = Callable[..., Any]
CALL = '<tool_call>{"name": "list_files", "arguments": {}}</tool_call>'  # no such tool offered

STAND_IN = """\
import argparse, asyncio, json, sys
sys.path.insert(0, {root!r})
from tests.support.mock_llm.server import MockLLM

parser = argparse.ArgumentParser()
parser.add_argument("--port", type=int)
args, _ = parser.parse_known_args()


def respond(body):
    with open({bodies!r}, "a", encoding="utf-8") as out:
        out.write(json.dumps(body) + "\\n")
    return {{"text": {call!r}}}


async def main():
    await MockLLM(responder=respond).start(args.port)
    await asyncio.Event().wait()


asyncio.run(main())
"""


def stand_in(folder: Path, bodies: Path) -> Path:
    server = folder / "llama_cpp" / "server"
    server.mkdir(parents=True)
    (folder / "llama_cpp" / "__init__.py").write_text("", encoding="utf-8")
    (server / "__init__.py").write_text("", encoding="utf-8")
    main = STAND_IN.format(root=str(ROOT), bodies=str(bodies), call=CALL)
    (server / "__main__.py").write_text(main, encoding="utf-8")
    return folder


async def test_a_model_that_never_writes_a_readable_call_loses_its_tools_and_is_told(
    server_factory: Start, tmp_path: Path
) -> None:
    bodies = tmp_path / "requests.jsonl"
    fake = stand_in(tmp_path / "fake", bodies)
    gguf = write_gguf(tmp_path / "tiny-coder.gguf", WITH_TOOLS)
    path = os.pathsep.join([str(fake), os.environ.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    env = {
        "PYTHONPATH": path,
        "ACP_SERVER_DATA_DIR": str(tmp_path / "data"),
        "ACP_SERVER_DISCOVER": "0",
        "ACP_SERVER_EMBEDDED": "0",
    }
    server = await server_factory("--model", f"local:{gguf}", env=env)
    editor = FakeEditor(fs=False, terminal=False)
    session = await open_session(server, editor, tmp_path)
    notices: list[str] = []
    for n in range(3):
        params = {"sessionId": session, "prompt": [{"type": "text", "text": f"List the files {n}"}]}
        req = await server.call("session/prompt", params)
        answer, before = await server.response(req, timeout=120)
        failed = answer["result"].get("_meta", {}).get("acpServer", {}).get("turnFailed")
        # Turns 1 and 2: the reply was only a call that could not be used, and says so.
        assert (
            (failed or {})
            .get("message", "")
            .startswith(
                "The model wrote a tool call that could not be used (" if n < 2 else "The model"
            )
        ), answer
        notices.append(" ".join(json.dumps(f) for f in before if "not offered tools" in str(f)))
    sent = [json.loads(line) for line in bodies.read_text("utf-8").splitlines()]
    # Turns 1 and 2: the reply and its one retry, tools offered; turn 3: no tools.
    assert [bool(body.get("tools")) for body in sent] == [True, True, True, True, False], sent
    assert notices[0] == "" and "2 tool calls" in notices[1] and notices[2] == ""
    await editor.close()
