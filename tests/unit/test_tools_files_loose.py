"""edit_file's loose match (tools/files/loose.py): where a text occurs with other quotes or
spacing, and the model's change made there with the file's own quotes and spacing kept."""

from __future__ import annotations

import random
import re

import pytest

from acp_server.tools.files.loose import carried, spans

GAPS = re.compile(r"[\s\"'`]+")


def edited(text: str, old: str, new: str) -> str | None:
    """`text` with the edit made loosely, None when it cannot be."""
    places = spans(text, old)
    if len(places) != 1:
        return None
    start, end = places[0]
    changed = carried(old, new, text[start:end])
    return None if changed is None else text[:start] + changed + text[end:]


@pytest.mark.parametrize(
    ("text", "old", "new", "expected"),
    [
        ('{"debug": true, "n": 1}', "debug: true", "debug: false", '{"debug": false, "n": 1}'),
        ('{"debug": true}', "debug: true", "verbose: true", '{"verbose": true}'),
        ('x = "a"', "x = 'a'", "x = 'ab'", 'x = "ab"'),
        ('x = "a"', "x = 'a'", "x = 'a';", 'x = "a";'),
        ('x = "a"', "x = 'a'", "# x = 'a'", '# x = "a"'),
        ('x = "a"', "x = 'a'", 'x = "b"', 'x = "b"'),
        ("f(x,  y)", "f(x, y)", "f(x, z, y)", "f(x,  z, y)"),
        ("x  = 1", "x = 1", "x == 1", "x  == 1"),
        ('"debug":true', "debug: true", "debugged: true", '"debugged":true'),
        ("  if a  and b:", "if a and b:", "if a or b:", "  if a  or b:"),
        ("call( 'a',\n  'b')", 'call("a", "b")', 'call("a", "c")', "call( 'a',\n  'c')"),
    ],
)
def test_the_change_is_made_with_the_files_own_quotes_and_spacing(
    text: str, old: str, new: str, expected: str
) -> None:
    assert edited(text, old, new) == expected


def test_words_are_never_split_joined_or_cut_short() -> None:
    assert spans('{"debug": true}', "bug: true") == []  # inside "debug"
    assert spans("return x", "returnx") == []  # two words are not one
    assert spans("returnx = 1", "return x") == []  # one word is not two
    assert spans('{"debugger": 1}', "debug") == []  # cut short at its end
    assert spans('a = "return x"', "return x") == [(4, 14)]  # with its quotes


def test_more_than_one_place_and_line_breaks_are_not_guessed() -> None:
    text = '{"a": 1, "b": {"a": 1}}'
    assert len(spans(text, "a: 1")) == 2 and edited(text, "a: 1", "a: 2") is None
    assert len(spans(text, "a: 1", limit=1)) == 1
    # The file's line break and indentation stay where the change is within a line ...
    assert edited("def f():\n    pass", "def f(): pass", "def f(): return 1") == (
        "def f():\n    return 1"
    )
    # ... and a change that adds or takes a line break is not made.
    assert edited("x  = 1", "x = 1", "x = 1\ny = 2") is None
    assert edited("x = 1\ny = 2", "x = 1 y = 2", "x = 1 y = 3") == "x = 1\ny = 3"
    assert edited("x = 1\ny = 2", "x = 1 y = 2", "x = 1; y = 2") == "x = 1;\ny = 2"
    assert edited("one = 1\ntwo = 2", "one = 1 two = 2", "one = 1 + two = 2") == (
        "one = 1\n+ two = 2"  # put before the word the model put it before
    )
    assert edited("aa\nbb = 1", "aa bb = 1", "aabb = 1") is None
    assert spans('"ab"', "ab") == []  # too little left to tell where it was meant


def test_a_random_change_changes_only_what_the_model_changed() -> None:
    """Texts of words, quotes and spacing; the model's old text is a piece of it with other
    quotes and spacing, its new text that piece with one word replaced. Compared loosely, the
    result is the file with that word replaced, and nothing outside the place changed."""
    rng = random.Random(31)
    words = ["alpha", "beta", "gamma", "delta", "x1", "y_2", ":", "=", ",", "(", ")", "42"]
    quotes, spaces = ['"', "'", "`", ""], [" ", "  ", "\t", ""]
    checked = 0
    for _ in range(400):
        tokens = [rng.choice(words) for _ in range(rng.randint(4, 14))]

        def render(part: list[str]) -> str:
            out = ""
            for k, token in enumerate(part):
                quote = rng.choice(quotes) if token[0].isalnum() else ""
                needed = k and token[0].isalnum() and part[k - 1][-1].isalnum()
                out += (rng.choice(spaces[:3]) if needed else rng.choice(spaces)) + quote
                out += token + quote
            return out

        text = render(tokens)
        a = rng.randint(0, len(tokens) - 3)
        b = rng.randint(a + 2, len(tokens))
        piece = tokens[a:b]
        old = render(piece)
        swap = rng.randrange(len(piece))
        new = _replace_nth_word(old, piece, swap, rng.choice(["omega", "zeta9"]))
        result = edited(text, old, new)
        if result is None:
            continue
        checked += 1
        start, end = spans(text, old)[0]
        assert result.startswith(text[:start]) and result.endswith(text[end:])
        loose_text, loose_old, loose_new = (GAPS.sub("", t) for t in (text, old, new))
        assert GAPS.sub("", result) == loose_text.replace(loose_old, loose_new, 1)
    assert checked >= 100  # the test saw enough changes made to mean something


def _replace_nth_word(rendered: str, piece: list[str], n: int, word: str) -> str:
    """`rendered` (piece rendered) with its n-th token replaced by `word`."""
    at = 0
    for k, token in enumerate(piece):
        at = rendered.index(token, at)
        if k == n:
            return rendered[:at] + word + rendered[at + len(token) :]
        at += len(token)
    raise AssertionError("no such token")
