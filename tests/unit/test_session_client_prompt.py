"""The editor's system prompt: what is accepted and refused, how it is kept in the stored state,
how it composes with ours (`text.system_prompt`), and fork keeping or replacing it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from acp_server.backends.scripted import ScriptedBackend
from acp_server.errors import InvalidParams
from acp_server.protocol.handlers import AcpAgent
from acp_server.session import client_prompt
from acp_server.session.client_prompt import ClientPrompt
from acp_server.session.text import system_prompt
from tests.support.fake_editor import InProcessPeer


def text(*parts: str, mode: str = "append") -> dict[str, Any]:
    return {"mode": mode, "content": [{"type": "text", "text": p} for p in parts]}


def test_text_blocks_are_joined_and_an_omitted_or_null_prompt_is_none() -> None:
    assert client_prompt.parse(text("One.", "Two.")) == ClientPrompt("append", "One.\n\nTwo.")
    assert client_prompt.parse(text("Mine.", mode="override")) == ClientPrompt("override", "Mine.")
    assert client_prompt.parse(None) is None


@pytest.mark.parametrize(
    ("value", "field"),
    [
        (text("x", mode="replace"), "systemPrompt.mode"),
        (text("x", mode="_vendor"), "systemPrompt.mode"),
        ({"mode": "append", "content": []}, "systemPrompt.content"),
        (
            {"mode": "append", "content": [{"type": "text", "text": "a"}, {"type": "image"}]},
            "systemPrompt.content[1]",
        ),
        ({"mode": "append", "content": [{"type": "text"}]}, "systemPrompt.content[0]"),
    ],
)
def test_what_cannot_be_applied_is_invalid_params_naming_the_field(
    value: dict[str, Any], field: str
) -> None:
    with pytest.raises(InvalidParams) as caught:
        client_prompt.parse(value)
    assert caught.value.data == {"field": field}
    assert f"`{field}`" in str(caught.value) and "No session was changed" in str(caught.value)


def test_the_stored_state_round_trips_and_junk_reads_as_none() -> None:
    prompt = ClientPrompt("override", "Be brief.")
    assert client_prompt.from_state(client_prompt.state_of(prompt)) == prompt
    assert client_prompt.state_of(None) == {}
    for junk in ({}, {"systemPrompt": "x"}, {"systemPrompt": {"mode": "odd", "text": "x"}}):
        assert client_prompt.from_state(junk) is None


def test_override_replaces_our_instructions_and_keeps_roots_and_mode_rules() -> None:
    ours = system_prompt(Path("/p"), ())
    mine = system_prompt(Path("/p"), (Path("/q"),), override="Use {braces} freely.")
    assert "How to work:" in ours and "How to work:" not in mine
    assert mine.startswith("Use {braces} freely.\n\n")  # the client's text is not a template
    assert "/p (and also /q)" in mine
    rules = ours[ours.index("The current mode is decided") :]
    assert mine.endswith(rules)
    assert ClientPrompt("append", "Mine.").appendix == "\n\nMine."
    assert ClientPrompt("override", "Mine.").appendix == ""


async def test_fork_keeps_the_prompt_unless_it_is_given_another(tmp_path: Path) -> None:
    backend = ScriptedBackend.from_rounds([{"text": "ok"}] * 3)
    agent = AcpAgent(lambda: backend)
    agent.conn = InProcessPeer()
    calls = agent.request_handlers()
    await calls["initialize"]({"protocolVersion": 1})
    where = {"cwd": str(tmp_path), "mcpServers": []}
    made = await calls["session/new"]({**where, "systemPrompt": text("Stay calm.")})

    async def system_of(session_id: str) -> str:
        prompt = [{"type": "text", "text": "hi"}]
        await calls["session/prompt"]({"sessionId": session_id, "prompt": prompt})
        return backend.requests[-1].system

    assert (await system_of(made["sessionId"])).endswith("\n\nStay calm.")
    kept = await calls["session/fork"]({**where, "sessionId": made["sessionId"]})
    assert (await system_of(kept["sessionId"])).endswith("\n\nStay calm.")
    other = text("Be loud.", mode="override")
    changed = await calls["session/fork"](
        {**where, "sessionId": made["sessionId"], **{"systemPrompt": other}}
    )
    assert (await system_of(changed["sessionId"])).startswith("Be loud.\n\n")
    agent.close()
