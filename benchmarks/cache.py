"""How much of a session's input a provider's prompt cache can serve, and what rewrites it.

Run: python benchmarks/cache.py [--prompts N]

A real `acp-server` against the mock LLM (tests/support/mock_llm/ on a thread of this process,
which logs every request body), once as OpenAI chat (`openai:gpt-4.1`) and once as Anthropic
(`anthropic:claude-sonnet-4-5`), each a scripted session of N prompts (default 20) in a git
repository: most prompts read one or two files (a tool round each), one reads a file under a
folder with its own AGENTS.md (found mid-turn), the others are answered without tools; between
prompts the user commits, adds and changes files (4 times). A `/compact` ends each session.

The request bodies are compared as the providers' caches do:

- OpenAI: a request is served from the cache up to its longest common prefix with an earlier
  request (tools, then the messages, the system prompt first), from 1,024 tokens on and in
  steps of 128;
- Anthropic: only up to a breakpoint the agent placed (`cache_control`): a prefix an earlier
  request wrote at one of its breakpoints is read back when this request has a breakpoint at
  most 20 blocks after it (and it is at least 1,024 tokens).

Tokens are estimated at 4 characters of JSON each. Figures: the share of input tokens the
cache serves (targets: OpenAI >= 93 %, Anthropic >= 85 %), the largest number of breakpoints
in one request (<= 4), requests that rewrite an earlier part of the previous request (<= 1
per 20 prompts), and the share of the request before it a compaction's summary request
starts with (>= 90 %).
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import json
import os
import re
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from common import Editor, MockThread, emit, message_chunks, server_command

from tests.support.mock_llm.script import Response
from tests.support.mock_llm.view import conversation, is_summary

CHARS_PER_TOKEN = 4
OPENAI_MIN, OPENAI_STEP = 1024, 128
ANTHROPIC_MIN, LOOKBACK = 1024, 20
FILE = re.compile(r"[\w/]+\.(?:py|md|txt)")
NOTE = "<agent-note>"
# (prompt, what the user does before it: "" | "commit" | "new" | "change")
SCRIPT = [
    ("Read src/app.py and tell me what it does.", ""),
    ("How would you describe the design so far?", ""),
    ("Read src/util.py and src/app.py: do they agree?", ""),
    ("Read docs/guide.md.", "change"),
    ("Summarize what you have seen in one paragraph.", ""),
    ("Read pkg/mod.py and say how it begins.", ""),
    ("Read src/util.py once more.", "commit"),
    ("What would you test first?", ""),
    ("Read src/new_feature.py.", "new"),
    ("Read docs/guide.md and src/app.py.", ""),
    ("Which file is the longest?", ""),
    ("Read pkg/other.py.", "commit"),
    ("Any risks you see?", ""),
    ("Read src/app.py again, briefly.", ""),
    ("Read src/util.py and pkg/mod.py.", ""),
    ("Thanks. What is left to do?", ""),
    ("Read docs/guide.md for the last time.", ""),
    ("Give me a checklist.", ""),
    ("Read src/new_feature.py and src/util.py.", ""),
    ("That is all for today.", ""),
]


def responder(body: dict[str, Any]) -> Response:
    """Reads the files the prompt names, one tool round each, then answers; the agent's notes
    are context, not a request."""
    if is_summary(body):
        return {"text": "Summary: the user had files read one by one; all were answered."}
    turns = [t for t in conversation(body) if not t.text.startswith(NOTE)]
    asked = max(i for i, t in enumerate(turns) if t.role == "user")
    named = FILE.findall(turns[asked].text)
    done = sum(t.role == "tool" for t in turns[asked:])
    if done < len(named):
        return {"tool_calls": [{"name": "read_file", "arguments": {"path": named[done]}}]}
    return {"text": f"Done with {', '.join(named) or 'that'}: " + "it reads well. " * 20}


def git(cwd: Path, *args: str) -> None:
    env = {**os.environ, "GIT_CONFIG_GLOBAL": os.devnull, "GIT_CONFIG_NOSYSTEM": "1"}
    command = ["git", "-c", "user.name=B", "-c", "user.email=b@example.com", *args]
    subprocess.run(command, cwd=cwd, check=True, capture_output=True, env=env)


def project(root: Path) -> None:
    for path in ("src/app.py", "src/util.py", "pkg/mod.py", "pkg/other.py", "docs/guide.md"):
        (root / path).parent.mkdir(parents=True, exist_ok=True)
        line = f"# {path}: one line of a file that is long enough to matter\n"
        (root / path).write_text(line * 60, encoding="utf-8")
    (root / "pkg" / "AGENTS.md").write_text("Files under pkg/ use tabs.\n", encoding="utf-8")
    git(root, "init", "-q", "-b", "main")
    git(root, "add", ".")
    git(root, "commit", "-q", "-m", "start")


def user_acts(root: Path, act: str, n: int) -> None:
    if act == "change":
        (root / "docs" / "guide.md").write_text(f"# changed by the user ({n})\n" * 60)
    elif act == "new":
        (root / "src" / "new_feature.py").write_text("# a new feature\n" * 60)
    elif act == "commit":
        (root / f"notes{n}.txt").write_text("notes\n")
        git(root, "add", ".")
        git(root, "commit", "-q", "-m", f"work {n}")


async def session(model: str, prompts: int) -> list[dict[str, Any]]:
    """The request bodies of one scripted session, in order."""
    mock = MockThread()
    mock.mock.responder = responder
    try:
        with tempfile.TemporaryDirectory() as tmp:
            root = Path(tmp) / "repo"
            root.mkdir()
            project(root)
            await converse(mock, model, root, Path(tmp), prompts)
            return [r.json for r in mock.mock.chat_requests]
    finally:
        mock.close()


async def converse(mock: MockThread, model: str, root: Path, tmp: Path, prompts: int) -> None:
    url = mock.mock.url
    env = {
        **os.environ,
        "OPENAI_BASE_URL": f"{url}/v1",
        "OPENAI_API_KEY": "sk-bench",
        "ANTHROPIC_BASE_URL": url,
        "ANTHROPIC_API_KEY": "sk-ant-bench",
        "ACP_SERVER_DATA_DIR": str(tmp / "data"),
        "XDG_CONFIG_HOME": str(tmp / "config"),
        "ACP_SERVER_DISCOVER": "0",
    }
    proc = await asyncio.create_subprocess_exec(
        *server_command(), "--model", model, stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE, env=env, cwd=root, limit=64 * 1024 * 1024,
    )  # fmt: skip
    editor = Editor(proc)
    try:
        await editor.request("initialize", {"protocolVersion": 1, "clientCapabilities": {}})
        new = await editor.request("session/new", {"cwd": str(root), "mcpServers": []})
        sid = new["result"]["sessionId"]
        for n, (text, act) in enumerate((SCRIPT * 2)[:prompts]):
            user_acts(root, act, n)
            await prompt(editor, sid, text)
        await prompt(editor, sid, "/compact")
    finally:
        await editor.close()


async def prompt(editor: Editor, sid: str, text: str) -> None:
    params = {"sessionId": sid, "prompt": [{"type": "text", "text": text}]}
    answer, lines = await asyncio.wait_for(
        editor.until_answer(await editor.send("session/prompt", params)), 60
    )
    if answer.get("result", {}).get("stopReason") != "end_turn":
        said = "".join(message_chunks(lines))
        raise AssertionError(f"{text!r} was not answered: {answer} {said[:300]}")


# ----- the providers' caches, simulated ---------------------------------------------------------


def unmarked(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: unmarked(v) for k, v in value.items() if k != "cache_control"}
    if isinstance(value, list):
        return [unmarked(v) for v in value]
    return value


def blocks(body: dict[str, Any]) -> list[tuple[str, bool]]:
    """The request as the cache reads it, in order: (a block's JSON, a breakpoint after it)."""
    out: list[tuple[str, bool]] = []
    system = body.get("system")
    parts: list[Any] = [*(body.get("tools") or [])]
    parts += system if isinstance(system, list) else ([{"system": system}] if system else [])
    for message in body.get("messages", []):
        content = message.get("content")
        items = content if isinstance(content, list) else [content]
        if "tool_calls" in message or "tool_call_id" in message or not isinstance(content, list):
            items = [message]
        parts += [{"role": message.get("role"), "part": item} for item in items]
    for part in parts:
        marked = isinstance(part, dict) and (
            "cache_control" in part or "cache_control" in (part.get("part") or {})
            if isinstance(part.get("part"), dict)
            else "cache_control" in part
        )
        out.append((json.dumps(unmarked(part), sort_keys=True), bool(marked)))
    return out


@dataclass
class Figures:
    tokens: int = 0
    served: int = 0
    rewrites: int = 0
    most_marks: int = 0
    summary_reuse: float = 0.0

    @property
    def share(self) -> float:
        return self.served / self.tokens if self.tokens else 0.0


def tokens(chars: int) -> int:
    return chars // CHARS_PER_TOKEN


def openai_figures(bodies: list[dict[str, Any]]) -> Figures:
    """Longest common prefix with any earlier request, counted as OpenAI serves it."""
    seen: list[str] = []
    figures = Figures()
    for body in bodies:
        text = "".join(b for b, _ in blocks(body))
        common = max((_common(text, earlier) for earlier in seen), default=0)
        cached = tokens(common)
        served = 0 if cached < OPENAI_MIN else cached - (cached - OPENAI_MIN) % OPENAI_STEP
        figures.tokens += tokens(len(text))
        figures.served += served
        seen.append(text)
    _rewrites_and_summary(bodies, figures)
    return figures


def anthropic_figures(bodies: list[dict[str, Any]]) -> Figures:
    """Reads only of prefixes written at an earlier breakpoint, found from a breakpoint."""
    written: set[str] = set()
    figures = Figures()
    for body in bodies:
        parts = blocks(body)
        digests, sizes, digest, size = [], [], hashlib.sha256(), 0
        for text, _ in parts:
            digest.update(text.encode())
            size += len(text)
            digests.append(digest.copy().hexdigest())
            sizes.append(size)
        marks = [i for i, (_, marked) in enumerate(parts) if marked]
        figures.most_marks = max(figures.most_marks, len(marks))
        read = 0
        for mark in marks:
            for at in range(mark, max(mark - LOOKBACK, -1), -1):
                if digests[at] in written and tokens(sizes[at]) >= ANTHROPIC_MIN:
                    read = max(read, tokens(sizes[at]))
                    break
        figures.tokens += tokens(size)
        figures.served += read
        written.update(digests[m] for m in marks)
    _rewrites_and_summary(bodies, figures)
    return figures


def _rewrites_and_summary(bodies: list[dict[str, Any]], figures: Figures) -> None:
    """Requests that do not start with the whole request before them (a summary request and
    the request after it excepted: a compaction rewrites by design); how much of the request
    before it the last summary request starts with."""
    texts = ["".join(b for b, _ in blocks(body)) for body in bodies]
    summary = [is_summary(body) for body in bodies]
    for n in range(1, len(bodies)):
        if summary[n] or summary[n - 1]:
            if summary[n]:
                figures.summary_reuse = _common(texts[n], texts[n - 1]) / len(texts[n - 1])
            continue
        figures.rewrites += not texts[n].startswith(texts[n - 1])


def _common(a: str, b: str) -> int:
    """The length of the longest common prefix (binary search on C-speed comparisons)."""
    low, high = 0, min(len(a), len(b))
    while low < high:
        middle = (low + high + 1) // 2
        if a[:middle] == b[:middle]:
            low = middle
        else:
            high = middle - 1
    return low


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--prompts", type=int, default=20)
    args = parser.parse_args()
    openai = openai_figures(asyncio.run(session("openai:gpt-4.1", args.prompts)))
    anthropic = anthropic_figures(asyncio.run(session("anthropic:claude-sonnet-4-5", args.prompts)))
    allowed = max(1, args.prompts // 20)
    checks: list[tuple[str, float, str, str, bool]] = [
        ("OpenAI chat: input served by the cache", 100 * openai.share, "%", ">= 93",
         openai.share >= 0.93),
        ("OpenAI chat: requests that rewrite an earlier part", openai.rewrites, "count",
         f"<= {allowed}", openai.rewrites <= allowed),
        ("OpenAI chat: summary request's prefix, of the request before", 100 * openai.summary_reuse,
         "%", ">= 90", openai.summary_reuse >= 0.9),
        ("Anthropic: input read from the cache", 100 * anthropic.share, "%", ">= 85",
         anthropic.share >= 0.85),
        ("Anthropic: most breakpoints in one request", anthropic.most_marks, "count", "<= 4",
         0 < anthropic.most_marks <= 4),
        ("Anthropic: requests that rewrite an earlier part", anthropic.rewrites, "count",
         f"<= {allowed}", anthropic.rewrites <= allowed),
        ("Anthropic: summary request's prefix, of the request before",
         100 * anthropic.summary_reuse, "%", ">= 90", anthropic.summary_reuse >= 0.9),
    ]  # fmt: skip
    print(f"{args.prompts} prompts a session, then /compact; tokens at {CHARS_PER_TOKEN} chars")
    print(f"  OpenAI chat: {openai.tokens:,} input tokens, {openai.served:,} from the cache")
    print(f"  Anthropic: {anthropic.tokens:,} input tokens, {anthropic.served:,} from the cache")
    ok = True
    for name, value, unit, target, good in checks:
        ok = ok and good
        print(f"  {name:62} {value:8.1f} {unit:5}  (target {target})  {'ok' if good else 'MISS'}")
        emit(f"cache: {name}", value, unit, target, good)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
