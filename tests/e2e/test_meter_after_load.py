"""After `session/load`, one `usage_update` shows how full the loaded conversation is, for the
window the model server reports: the meter is not empty until the next prompt. It is not stored:
a second load shows it once again, not twice."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tests.support.context_session import Start, start_reader, updates_of
from tests.support.mock_llm import MockLLM
from tests.support.raw import Frame, RawServer


def is_usage(frame: Frame) -> bool:
    update = frame.get("params", {}).get("update", {})
    return frame.get("method") == "session/update" and update.get("sessionUpdate") == "usage_update"


async def load(server: RawServer, session: str, cwd: Path) -> list[dict[str, Any]]:
    """The load's updates, up to the first usage_update (it may come after the answer)."""
    params = {"sessionId": session, "cwd": str(cwd), "mcpServers": []}
    answer, before = await server.response(await server.call("session/load", params), 20)
    assert "result" in answer, answer
    seen = updates_of(before)
    if not any(u["sessionUpdate"] == "usage_update" for u in seen):
        seen += updates_of(await server.until(is_usage, 10))
    return seen


async def test_a_loaded_session_shows_its_usage(
    server_factory: Start, mock_llm: MockLLM, tmp_path: Path
) -> None:
    mock_llm.report_window = 16384
    reader = await start_reader(server_factory, mock_llm, tmp_path)
    for n in range(2):
        mock_llm.queue({"text": f"Answer {n}. " + "detail " * 200, "usage": None})
        await reader.prompt(f"Question {n}: " + "context " * 300)
    (last,) = [u for u in reader.turns[-1].seen if u["sessionUpdate"] == "usage_update"]
    await reader.server.stop()

    for _ in range(2):
        again = await start_reader(server_factory, mock_llm, tmp_path)
        seen = await load(again.server, reader.session, tmp_path)
        usages = [u for u in seen if u["sessionUpdate"] == "usage_update"]
        assert len(usages) == 1, usages
        assert usages[0]["size"] == 16384  # the window the server reports
        # The conversation as loaded: about what the last turn showed (both are estimates).
        assert abs(usages[0]["used"] - last["used"]) <= last["used"] * 0.1, (usages, last)
        await again.server.stop()
