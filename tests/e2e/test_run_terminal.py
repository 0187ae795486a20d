"""`acp-server run` at a terminal and in a pipe: permission asked y / n / a on a real pseudo-
terminal, thoughts dimmed there, tool calls and diffs shown, plain bytes when piped, and
`--session ID` continuing a stored session whose history the model sees.
"""

from __future__ import annotations

import os
import pty
import re
import select
import signal
import subprocess
import time
from pathlib import Path

from tests.e2e.test_run_cli import clean_env, run, write_script
from tests.support.child import default_sigint
from tests.support.raw import console_script

ANSI = "\x1b["
QUESTION = "[permission] Allow"

Rounds = list[dict[str, object]]


def writes(*names: str) -> Rounds:
    """One round that writes each file (its name as content), then a closing reply."""
    calls = [{"name": "write_file", "arguments": {"path": n, "content": n}} for n in names]
    return [{"thought": "Writing the files.", "tool_calls": calls}, {"text": "Written."}]


def on_terminal(
    tmp_path: Path, args: list[str], answers: list[str | None], enter: bool = True, **env: str
) -> tuple[int, str, str]:
    """Run `acp-server run` with stdin and stderr on a pseudo-terminal, typing one answer per
    permission question (None: Ctrl-C instead; `enter`: each answer followed by Enter); the
    exit status, stdout (a pipe) and what the
    terminal showed."""
    leader, follower = pty.openpty()
    proc = subprocess.Popen(
        [console_script(), "run", *args],
        stdin=follower,
        stdout=subprocess.PIPE,
        stderr=follower,
        cwd=tmp_path,
        env=clean_env(tmp_path, **env),
        preexec_fn=default_sigint,  # Ctrl-C (None) interrupts even under `nohup pytest &`
    )
    os.close(follower)
    with proc:
        try:
            shown, answered = _converse(leader, answers, proc, b"\n" if enter else b"")
        finally:
            os.close(leader)
            if proc.poll() is None:
                proc.kill()
        out = proc.communicate(timeout=30)[0].decode()
    assert answered == len(answers), shown
    return proc.returncode, out, shown


def _converse(
    leader: int, answers: list[str | None], proc: subprocess.Popen[bytes], enter: bytes
) -> tuple[str, int]:
    shown, answered = "", 0
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        ready, _, _ = select.select([leader], [], [], 1)
        if not ready:
            continue
        try:
            data = os.read(leader, 4096)
        except OSError:  # the terminal's last user is gone: run has exited
            break
        if not data:
            break
        shown += data.decode(errors="replace")
        if shown.count(QUESTION) > answered and answered < len(answers):
            answer = answers[answered]
            if answer is None:
                proc.send_signal(signal.SIGINT)
            else:
                os.write(leader, answer.encode() + enter)
            answered += 1
    return shown, answered


def test_at_a_terminal_y_allows_the_call_once(tmp_path: Path) -> None:
    script = write_script(tmp_path, writes("a.txt"))
    code, out, shown = on_terminal(tmp_path, ["--script", script, "write a"], ["y"])
    assert code == 0, shown
    assert (tmp_path / "a.txt").read_text(encoding="utf-8") == "a.txt"
    assert out == "Written.\n"  # the question and the diff never reach stdout
    assert "+a.txt" in shown and "[tool completed]" in shown


def test_at_a_terminal_one_key_answers_and_the_prompt_says_which_keys(tmp_path: Path) -> None:
    script = write_script(tmp_path, writes("a.txt", "b.txt"))
    code, _, shown = on_terminal(tmp_path, ["--script", script, "write"], ["y", "n"], enter=False)
    assert code == 0, shown
    assert "(press y, a or n)" in shown
    assert (tmp_path / "a.txt").exists() and not (tmp_path / "b.txt").exists()


def run_command(command: str) -> Rounds:
    call = {"name": "run_command", "arguments": {"command": command}}
    return [{"tool_calls": [call]}, {"text": "Counted."}]


def test_at_a_terminal_a_commands_output_is_shown_dimmed_and_bounded(tmp_path: Path) -> None:
    script = write_script(tmp_path, run_command("seq 1 50"))
    code, out, shown = on_terminal(tmp_path, ["--script", script, "--yes", "count"], [])
    assert code == 0, shown
    assert out == "Counted.\n"  # what the command printed is never part of the reply
    assert "\x1b[2m  … 30 earlier lines not shown\x1b[0m" in shown
    assert "\x1b[2m  31\x1b[0m" in shown and "\x1b[2m  50\x1b[0m" in shown
    assert "  30\x1b" not in shown
    piped = run(
        tmp_path, "--script", write_script(tmp_path, run_command("seq 1 50")), "--yes", "count"
    )
    assert piped.returncode == 0 and "[tool completed]" in piped.stderr
    assert "earlier lines" not in piped.stderr and "\n  50\n" not in piped.stderr


def test_at_a_terminal_n_refuses_the_call(tmp_path: Path) -> None:
    script = write_script(tmp_path, writes("a.txt"))
    code, _, shown = on_terminal(tmp_path, ["--script", script, "write a"], ["n"])
    assert code == 0, shown
    assert not (tmp_path / "a.txt").exists()
    assert "[tool failed]" in shown and "declined" in shown


def test_at_a_terminal_a_allows_always_and_is_not_asked_again(tmp_path: Path) -> None:
    script = write_script(tmp_path, writes("a.txt", "b.txt"))
    code, _, shown = on_terminal(tmp_path, ["--script", script, "write both"], ["a"])
    assert code == 0, shown
    assert shown.count(QUESTION) == 1
    assert (tmp_path / "b.txt").read_text(encoding="utf-8") == "b.txt"


def test_at_a_terminal_an_unknown_answer_asks_again(tmp_path: Path) -> None:
    script = write_script(tmp_path, writes("a.txt"))
    code, _, shown = on_terminal(tmp_path, ["--script", script, "write a"], ["maybe", "y"])
    assert code == 0, shown
    assert "Please answer" in shown and (tmp_path / "a.txt").exists()


def test_at_a_terminal_ctrl_c_while_asked_cancels_the_turn(tmp_path: Path) -> None:
    script = write_script(tmp_path, writes("a.txt"))
    code, out, shown = on_terminal(tmp_path, ["--script", script, "write a"], [None])
    assert code == 130, shown
    assert not (tmp_path / "a.txt").exists()
    assert out == "" and "[stopped: cancelled]" in shown


def test_thoughts_are_dimmed_on_a_terminal_unless_no_color(tmp_path: Path) -> None:
    script = write_script(tmp_path, [{"thought": "pondering", "text": "Hi."}])
    code, out, shown = on_terminal(tmp_path, ["--script", script, "hi"], [])
    assert code == 0, shown
    assert "\x1b[2mpondering\x1b[0m" in shown
    assert out == "Hi.\n"
    code, _, plain = on_terminal(tmp_path, ["--script", script, "hi"], [], NO_COLOR="1")
    assert code == 0 and "pondering" in plain and ANSI not in plain


def test_piped_output_is_plain_and_shows_tools_with_diffs(tmp_path: Path) -> None:
    (tmp_path / "a.txt").write_text("old line\n", encoding="utf-8")
    rounds: Rounds = [
        {
            "thought": "Editing.",
            "tool_calls": [
                {
                    "name": "edit_file",
                    "arguments": {
                        "path": "a.txt",
                        "edits": [{"old_text": "old line", "new_text": "new"}],
                    },
                }
            ],
        },
        {"text": "Edited."},
    ]
    done = run(tmp_path, "--script", write_script(tmp_path, rounds), "--yes", "edit a")
    assert done.returncode == 0, done.stderr
    assert done.stdout == "Edited.\n"
    assert ANSI not in done.stderr
    assert "[permission] allowed" in done.stderr
    assert "-old line" in done.stderr and "+new" in done.stderr
    assert re.search(r"\[tool completed\] .*a\.txt", done.stderr), done.stderr


def test_piped_without_yes_refuses_and_says_which_flag_allows(tmp_path: Path) -> None:
    done = run(tmp_path, "--script", write_script(tmp_path, writes("a.txt")), "write a")
    assert done.returncode == 0, done.stderr
    assert not (tmp_path / "a.txt").exists()
    assert "--yes" in done.stderr and "not a terminal" in done.stderr


def session_id(stderr: str) -> str:
    found = re.search(r"--session (\S+)", stderr)
    assert found is not None, stderr
    return found.group(1)


def test_session_continues_and_the_model_sees_the_earlier_turn(tmp_path: Path) -> None:
    first = run(tmp_path, "--script", write_script(tmp_path, [{"text": "Blue."}]), "Pick a colour")
    assert first.returncode == 0, first.stderr
    expect = {"contains": ["Pick a colour", "Blue.", "Why?"]}
    again: Rounds = [{"expect": expect, "text": "Because the sky is."}]
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()  # run from another directory: the session keeps its own
    script, stored = write_script(tmp_path, again), session_id(first.stderr)
    second = subprocess.run(
        [console_script(), "run", "--script", script, "--session", stored, "Why?"],
        cwd=elsewhere,
        env=clean_env(tmp_path),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert second.returncode == 0, second.stderr
    assert second.stdout == "Because the sky is.\n"
    assert session_id(second.stderr) == session_id(first.stderr)


def test_an_unknown_session_is_a_usage_error_that_says_where_to_look(tmp_path: Path) -> None:
    script = write_script(tmp_path, [{"text": "never"}])
    done = run(tmp_path, "--script", script, "--session", "no-such-session", "hi")
    assert done.returncode == 2
    assert done.stdout == ""
    assert "no-such-session" in done.stderr and "acp-server sessions" in done.stderr


def test_session_with_cwd_resumes_there(tmp_path: Path) -> None:
    first = run(tmp_path, "--script", write_script(tmp_path, [{"text": "One."}]), "one")
    assert first.returncode == 0, first.stderr
    again: Rounds = [{"expect": {"contains": ["one", "One.", "two"]}, "text": "Two."}]
    second = run(
        tmp_path,
        "--script",
        write_script(tmp_path, again),
        "--session",
        session_id(first.stderr),
        "--cwd",
        str(tmp_path),
        "two",
    )
    assert second.returncode == 0, second.stderr
    assert second.stdout == "Two.\n"
