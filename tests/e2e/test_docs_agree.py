"""The manual says what a real server does: the kinds of prompt content `initialize` advertises,
the slash commands `/help` lists, and the modes `/mode` offers, compared with the pages that
describe them (docs/sessions.md, docs/client-authors.md, and the index that points there), so
a change on either side shows here."""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

from tests.support.context_session import start_reader
from tests.support.mock_llm import MockLLM

Start = Callable[..., Any]
DOCS = Path(__file__).resolve().parents[2] / "docs"
# How each prompt capability is named where the pages list what a prompt may hold.
WORDS = {"image": "images", "audio": "audio", "embeddedContext": "embedded"}


def page(name: str) -> str:
    return (DOCS / name).read_text(encoding="utf-8")


def section(text: str, heading: str) -> str:
    """The text under `## heading`, up to the next heading of that level."""
    start = text.index(f"\n## {heading}\n")
    end = text.find("\n## ", start + 1)
    return text[start : end if end > 0 else len(text)]


def paragraph(text: str, opening: str) -> str:
    """The list item or paragraph that holds `opening`, joined into one line."""
    at = text.index(opening)
    start = max(text.rfind("\n- ", 0, at), text.rfind("\n\n", 0, at))
    ends = [n for n in (text.find("\n- ", at), text.find("\n\n", at)) if n > 0]
    return " ".join(text[start : min(ends)].split())


async def facts(server_factory: Start, mock: MockLLM, cwd: Path) -> tuple[dict[str, Any], ...]:
    """What a server advertises for prompts, the commands /help lists, the modes offered."""
    reader = await start_reader(server_factory, mock, cwd)
    seen = reader.server.seen
    init = next(f["result"] for f in seen if "agentCapabilities" in f.get("result", {}))
    new = next(f["result"] for f in seen if "sessionId" in f.get("result", {}))
    turn = await reader.prompt("/help")
    assert turn.stop == "end_turn" and mock.chat_requests == []
    listed = dict.fromkeys(re.findall(r"`/([a-z][a-z0-9_-]*)", turn.text), True)
    modes = {mode["id"]: True for mode in new["modes"]["availableModes"]}
    return init["agentCapabilities"]["promptCapabilities"], listed, modes


def check_content(capabilities: dict[str, Any], text: str) -> list[str]:
    """Where `text`, a page's list of what a prompt may hold, disagrees with `capabilities`."""
    wrong = []
    for capability, advertised in capabilities.items():
        word = WORDS[capability]
        said_no = re.search(rf"\bno {word}\b|\bno \w+ (or|and) {word}\b", text) is not None
        if advertised and (said_no or word not in text):
            wrong.append(f"{capability} is advertised but {text!r} does not offer it")
        if not advertised and not said_no:
            wrong.append(f"{capability} is not advertised but {text!r} does not say no {word}")
    return wrong


async def test_the_pages_say_what_a_real_server_advertises_and_lists(
    server_factory: Start, mock_llm: MockLLM, tmp_path: Path
) -> None:
    capabilities, listed, modes = await facts(server_factory, mock_llm, tmp_path)
    assert set(capabilities) == set(WORDS), "a new prompt capability: say here how docs name it"
    sessions = page("sessions.md")
    wrong = check_content(capabilities, paragraph(sessions, "A prompt may hold"))
    advertises = paragraph(page("client-authors.md"), "What `initialize` advertises")
    prompts = re.search(r"prompts with [^;]*", advertises)
    assert prompts is not None, advertises
    wrong += check_content(capabilities, prompts.group(0))
    assert wrong == []

    commands = section(sessions, "Slash commands")
    documented = set(re.findall(r"^- `/([a-z][a-z0-9_-]*)", commands, re.M))
    assert listed and documented == set(listed), "docs/sessions.md#slash-commands vs /help"
    mode_line = paragraph(commands, "`/mode [")
    assert [m for m in modes if f"`{m}`" not in mode_line] == [], mode_line

    index = page("index.md")
    claims = [row for row in index.splitlines() if "slash commands" in row.lower()]
    assert claims and all("(sessions.md)" in row for row in claims), claims
    assert all(f"`/{name}`" in claims[0] for name in listed), claims[0]
