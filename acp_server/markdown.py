"""Markdown helpers for text we show people: code that may itself contain backticks."""

from __future__ import annotations


def fence(text: str, language: str = "") -> str:
    """A fenced code block whose fence is longer than any backtick run inside `text`."""
    marks = "```"
    while marks in text:
        marks += "`"
    return f"{marks}{language}\n{text}\n{marks}"


def inline_code(text: str) -> str:
    """Inline code that stays code even when `text` has backticks at its ends or inside."""
    ticks = "`"
    while ticks in text:
        ticks += "`"
    pad = " " if text.startswith("`") or text.endswith("`") else ""
    return f"{ticks}{pad}{text}{pad}{ticks}"
