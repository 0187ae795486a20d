"""Which line of a TOML text a key is on, so an error about a setting can name its line.

`tomllib` parses without positions. This scanner reads the text again, line by line, and
notes where each key path is defined: table headers (`[providers.openai]`), arrays of tables
(`[[models]]`, counted so the second one is `("models", 1)`), sub-tables of their last element
(`[models.price]`), and `key = value` lines, dotted keys included. It skips the inside of
multi-line strings and arrays. It is not a TOML parser: the file has already parsed when it is
used, and for a path it cannot place (a key inside an inline table, say) `line_of` gives the
line of the nearest enclosing key it knows, which is where a person would look anyway.
"""

from __future__ import annotations

from collections.abc import Sequence

KeyPath = tuple[str | int, ...]


def key_lines(text: str) -> dict[KeyPath, int]:
    """Each key path defined in `text` -> the number (from 1) of the line that defines it."""
    found: dict[KeyPath, int] = {}
    arrays: dict[KeyPath, int] = {}  # array of tables (unindexed path) -> its last index
    table: KeyPath = ()
    skip_until: str | None = None  # the closing delimiter of a multi-line string or array
    depth = 0
    for number, raw in enumerate(text.splitlines(), 1):
        if skip_until is not None:
            if skip_until in raw:
                skip_until = None
            continue
        code = _code(raw)
        if depth:
            depth = max(0, depth + _nesting(code))
            continue
        stripped = code.strip()
        if stripped.startswith("["):
            table = _header(raw.strip(), stripped, arrays)
            for size in range(1, len(table) + 1):
                found.setdefault(table[:size], number)
            found[table] = number
        elif "=" in stripped:
            cut = code.index("=")
            path = table + tuple(_keys(raw[:cut]))
            for size in range(len(table) + 1, len(path) + 1):
                found.setdefault(path[:size], number)
            depth = max(0, _nesting(code[cut:]))
            skip_until = _open_multiline(raw[cut:])
    return found


def line_of(lines: dict[KeyPath, int], path: Sequence[str | int]) -> int | None:
    """The line of `path`, or of the nearest enclosing path that is known."""
    key = tuple(path)
    while key:
        if key in lines:
            return lines[key]
        key = key[:-1]
    return None


def _header(raw: str, code: str, arrays: dict[KeyPath, int]) -> KeyPath:
    """The table a header line opens, with array-of-tables indexes filled in."""
    is_array = code.startswith("[[")
    inner = raw[2 : raw.index("]]")] if is_array else raw[1 : raw.index("]")]
    keys = _keys(inner)
    path: list[str | int] = []
    for n, key in enumerate(keys):
        path.append(key)
        unindexed = tuple(k for k in path if isinstance(k, str))
        last = n == len(keys) - 1
        if is_array and last:
            arrays[unindexed] = arrays.get(unindexed, -1) + 1
            path.append(arrays[unindexed])
        elif unindexed in arrays:
            path.append(arrays[unindexed])
    return tuple(path)


def _keys(text: str) -> list[str]:
    """A dotted key split into its parts, quotes removed."""
    parts: list[str] = []
    current = ""
    quote = ""
    for char in text.strip():
        if quote:
            if char == quote:
                quote = ""
            else:
                current += char
        elif char in "\"'":
            quote = char
        elif char == ".":
            parts.append(current.strip())
            current = ""
        else:
            current += char
    parts.append(current.strip())
    return parts


def _code(line: str) -> str:
    """The line with string contents blanked and any comment removed (same length up to it)."""
    out = []
    quote = ""
    escaped = False
    for char in line:
        if not quote:
            if char == "#":
                break
            quote = char if char in "\"'" else ""
            out.append(char)
        elif escaped or (char == "\\" and quote == '"'):
            escaped = not escaped
            out.append(" ")
        elif char == quote:
            quote = ""
            out.append(char)
        else:
            out.append(" ")
    return "".join(out)


def _nesting(code: str) -> int:
    """Brackets and braces opened minus closed."""
    return sum(code.count(c) for c in "[{") - sum(code.count(c) for c in "]}")


def _open_multiline(value: str) -> str | None:
    """The delimiter of a multi-line string this value opens and does not close on its line."""
    for delimiter in ('"""', "'''"):
        if value.count(delimiter) % 2 == 1:
            return delimiter
    return None
