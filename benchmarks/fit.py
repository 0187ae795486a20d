"""Pre-flight fit: a 2,000-message history measured from cold, then after one new message.

Run: python benchmarks/fit.py [--messages N] [--runs N]

The history is what a tool-heavy session looks like: prompts, tool calls with arguments, tool
results of a few KB, answers. "Cold" is a fresh `ContextBudget` (nothing memoized: every
message estimated); "incremental" is the same budget after one more message is appended, the
case of every model round. Both are printed next to a floor measured in the same run: one pass
over the messages that only adds up the lengths of their texts, the least any estimate does.
Targets: cold <= 10 ms, incremental <= 1 ms.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections.abc import Callable

from common import emit

from acp_server.context import ContextBudget, Window
from acp_server.messages import Message, ToolCall, ToolSpec, text_message

SYSTEM = "You are a coding agent working in /work/project. " * 20
TOOLS = tuple(
    ToolSpec(name, f"{name} does its job. " * 10, {"type": "object", "properties": {}})
    for name in ("read_file", "list_directory", "glob", "grep", "edit_file", "write_file")
)


def history(messages: int) -> list[Message]:
    out: list[Message] = []
    n = 0
    while len(out) < messages:
        call = ToolCall(f"c{n}", "read_file", {"path": f"src/module_{n}.py", "limit": 200})
        out += [
            text_message("user", f"Look at module {n} and tell me what it does. " * 3),
            Message("assistant", tool_calls=(call,)),
            text_message(
                "tool", f"def f_{n}(x):\n    return x + {n}\n" * 100, tool_call_id=call.id
            ),
            text_message("assistant", f"Module {n} defines f_{n}, which adds {n}. " * 4),
        ]
        n += 1
    return out[:messages]


def median_ms(runs: int, once: Callable[[], float]) -> float:
    return statistics.median(once() for _ in range(runs)) * 1000


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--messages", type=int, default=2000)
    parser.add_argument("--runs", type=int, default=30)
    args = parser.parse_args()
    hist = history(args.messages)
    extra = text_message("user", "And one more question about the last module.")

    def floor() -> float:
        start = time.perf_counter()
        sum(len(m.text) for m in hist)
        return time.perf_counter() - start

    def cold() -> float:
        budget = ContextBudget(Window(configured=32768))
        start = time.perf_counter()
        budget.fit(SYSTEM, TOOLS, hist)
        return time.perf_counter() - start

    def incremental() -> float:
        budget = ContextBudget(Window(configured=32768))
        grown = list(hist)
        budget.fit(SYSTEM, TOOLS, grown)
        grown.append(extra)
        start = time.perf_counter()
        budget.fit(SYSTEM, TOOLS, grown)
        return time.perf_counter() - start

    cold()  # warm lazy imports and code paths
    results = [median_ms(args.runs, f) for f in (floor, cold, incremental)]
    print(f"messages: {args.messages}, runs: {args.runs} (medians)")
    print(f"floor (sum of text lengths)  {results[0]:7.3f} ms")
    for label, value, target in (
        ("cold fit       ", results[1], 10.0),
        ("incremental fit", results[2], 1.0),
    ):
        verdict = "ok" if value <= target else "OVER TARGET"
        print(f"{label}              {value:7.3f} ms  (target <= {target:g} ms)  {verdict}")
        name = f"fit: {label.strip()}, {args.messages} messages"
        emit(name, value, "ms", f"<= {target:g} ms", value <= target, results[0])
    return 0


if __name__ == "__main__":
    sys.exit(main())
