"""edit_file's loose match: an `old_text` that differs from the file only in quotes or spacing.

Models write `debug: true` for the JSON `"debug": true`, `print("a")` for `print('a')`, one
space where the file has two. Compared loosely, the characters other than quotes and white
space must be the same, in order, and the words the same words: a run of letters is never
split or joined (`bug` is not found inside `debug`, `returnx` is not `return x`).

`spans` finds where such a text occurs (at most two places: one is all an edit may use);
`carried` makes the model's change at the one place it occurs, keeping the file's own quotes
and spacing wherever the model did not change anything: `debug: true` → `debug: false`
changes `"debug": true` to `"debug": false`. A change that adds or removes a line break is
not carried (the new line's indentation would be a guess): the model is shown the text instead.
"""

from __future__ import annotations

import bisect
import itertools
import re

LOOSE = "\"'`"  # quotes a text compared loosely may differ in (with whitespace)
_LOOSE_GAPS = re.compile(rf"[\s{LOOSE}]+")
_KEPT = re.compile(rf"[^\s{LOOSE}]")  # what the loose comparison compares
MIN_CHARS = 3  # fewer compared characters say too little about where the text was meant
MAX_CHARS = 4_000_000  # a few linear scans; not of the largest files edit_file reads
MAX_LOOKS = 1_000  # places compared before giving up: so many look-alikes tell nothing


def _word(char: str) -> bool:
    return char.isalnum() or char == "_"


def spans(text: str, old: str, limit: int = 2) -> list[tuple[int, int]]:
    """Where `old` occurs in `text` compared loosely (at most `limit` places, in order), each
    widened over the quotes around it; none when too little of `old` is left to compare, or
    when so many places look alike that telling them apart is not worth it (`MAX_LOOKS`)."""
    wanted = _LOOSE_GAPS.sub("", old)
    if len(wanted) < MIN_CHARS or len(text) > MAX_CHARS:
        return []
    stripped = _LOOSE_GAPS.sub("", text)
    shape = _gaps(old, 0, len(old))
    found: list[tuple[int, int]] = []
    kept = _KEPT.finditer(text)  # the compared characters in order, read once
    passed = 0  # how many of them `kept` has given
    at = stripped.find(wanted)
    for looks in itertools.count():
        if at < 0 or len(found) >= limit:
            break
        if looks == MAX_LOOKS:
            return []
        first = next(itertools.islice(kept, at - passed, None))
        passed = at + 1
        start = first.start()
        end = _end_of(text, start, len(wanted))
        if _same_words(text, start, end, wanted, shape):
            found.append(_widened(text, start, end))
        at = stripped.find(wanted, at + 1)
    return found


def _end_of(text: str, start: int, count: int) -> int:
    """The end of the `count` compared characters from `start`."""
    last = start
    for last_match in itertools.islice(_KEPT.finditer(text, start), count):
        last = last_match.start()
    return last + 1


def _gaps(text: str, start: int, end: int) -> list[bool]:
    """For each pair of neighbouring compared characters in text[start:end]: whether
    anything (quotes, white space) stands between them."""
    positions = [m.start() for m in _KEPT.finditer(text, start, end)]
    return [b - a > 1 for a, b in itertools.pairwise(positions)]


def _same_words(text: str, start: int, end: int, wanted: str, shape: list[bool]) -> bool:
    """No word of `wanted` is split, joined or cut short at this place in `text`."""
    if _word(wanted[0]) and start > 0 and _word(text[start - 1]):
        return False
    if _word(wanted[-1]) and end < len(text) and _word(text[end]):
        return False
    here = _gaps(text, start, end)
    return all(
        here[k] == shape[k] for k in range(len(shape)) if _word(wanted[k]) and _word(wanted[k + 1])
    )


def _widened(text: str, start: int, end: int) -> tuple[int, int]:
    while start > 0 and text[start - 1] in LOOSE:
        start -= 1
    while end < len(text) and text[end] in LOOSE:
        end += 1
    return start, end


def carried(old: str, new: str, found: str) -> str | None:
    """`found` (the file's text that matches `old` loosely) with the change `old` → `new`
    made in it; None when the change adds or removes a line break.

    The change is what lies between the longest common start and end of `old` and `new`.
    An edge of it that falls inside quotes or spacing takes that whole gap (the file's version
    of it is replaced); an edge at a compared character leaves the file's gap next to it."""
    size = min(len(old), len(new))
    head = next((k for k in range(size) if old[k] != new[k]), size)
    tail = next((k for k in range(size - head) if old[-1 - k] != new[-1 - k]), size - head)
    mine, where = _kept_positions(old), _kept_positions(found)
    start, left = _left_edge(head, len(old), mine, where, len(found))
    end, right = _right_edge(len(old) - tail, len(old), mine, where, len(found))
    inserted = new[start : len(new) - (len(old) - end)]
    left = min(left, right)  # an insertion between two characters: right after the first
    if "\n" in inserted or "\n" in found[left:right]:
        return None
    return found[:left] + inserted + found[right:]


def _kept_positions(text: str) -> list[int]:
    return [m.start() for m in _KEPT.finditer(text)]


def _left_edge(
    at: int, size: int, mine: list[int], where: list[int], found: int
) -> tuple[int, int]:
    """A change that starts at `at` in the model's text (of `size` characters): where it
    starts there (moved back to the start of a gap it starts inside) and in the file's text
    (`found` characters)."""
    before = bisect.bisect_left(mine, at)  # compared characters before it
    if before < len(mine) and mine[before] == at:
        return at, where[before]
    if before == len(mine) and at == size:  # after the end: the file's closing quotes stay
        return at, found
    return (mine[before - 1] + 1, where[before - 1] + 1) if before else (0, 0)


def _right_edge(
    at: int, size: int, mine: list[int], where: list[int], found: int
) -> tuple[int, int]:
    """A change that ends at `at` in the model's text (of `size` characters): where it ends
    there (moved on to the end of a gap it ends inside) and in the file's text (`found`
    characters)."""
    upto = bisect.bisect_left(mine, at)  # compared characters before its end
    if upto and mine[upto - 1] == at - 1:
        return at, where[upto - 1] + 1
    if at == 0:  # before the start: the file's opening quotes stay
        return 0, 0
    return (mine[upto], where[upto]) if upto < len(mine) else (size, found)
