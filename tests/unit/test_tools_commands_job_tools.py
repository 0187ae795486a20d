"""command_output and stop_command: what the model reads about its background commands."""

from __future__ import annotations

from acp_server.tools.commands.job_tools import MODEL_MAX_CHARS, listing, render
from acp_server.tools.commands.jobs import Chunk, Job, Jobs


class Idle(Job):
    def __init__(self, job_id: str, status: str | None) -> None:
        super().__init__(job_id, "npm run dev", None, False)
        self._status = status

    def status(self) -> str | None:
        return self._status


def test_render_says_how_much_was_dropped_and_keeps_the_newest() -> None:
    job = Idle("bg_1", None)
    long = "".join(f"line {i}\n" for i in range(5000))
    text = render(job, Chunk(long, 120, None))
    assert text.startswith("bg_1 `npm run dev`: running\n")
    assert "line 4999" in text and "line 0\n" not in text
    assert len(text) < MODEL_MAX_CHARS + 200
    dropped = int(text.split("about ")[1].split(" ")[0])
    shown = text.split("\n", 2)[2] + "\n"  # the last newline is not shown
    assert dropped == 120 + len(long) - len(shown)  # all of it accounted for
    assert render(Idle("bg_2", "exit code 1"), Chunk("", 0, "exit code 1")).endswith(
        ": ended (exit code 1)\n(no new output)"
    )


def test_listing() -> None:
    jobs = Jobs()
    assert listing(jobs) == "No background commands in this session."
    jobs.add(Idle("bg_1", None))
    jobs.add(Idle("bg_2", "exit code 0"))
    assert listing(jobs).splitlines()[1:] == [
        "- bg_1 `npm run dev`: running",
        "- bg_2 `npm run dev`: ended (exit code 0)",
    ]
