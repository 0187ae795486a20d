"""File tools: write_file, edit_file, list_directory (and their schemas).

Tools run against a real ToolContext: local disk through `NoEditor`, or an in-memory editor
that advertises fs and records what it was asked, to prove the tools go through the editor
when it can. The permit callable records each request; a refusing one proves nothing is
written without permission.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from jsonschema import Draft202012Validator

from acp_server import schemas
from acp_server.editor_api import ClientRequestFailed, EditorApi, NoEditor
from acp_server.permissions import Permit
from acp_server.tools.base import Tool, ToolContext, ToolFailure, ToolOutcome
from acp_server.tools.files.edit import EDIT_FILE, first_changed_line
from acp_server.tools.files.fs import LIST_DIRECTORY, READ_FILE, WRITE_FILE


class MemoryEditor:
    """An editor that advertises fs and serves its open buffers from memory."""

    can_read = True
    can_write = True
    can_terminal = False
    can_notice = False
    can_show_compaction = False
    can_plan = False
    can_subagents = False
    can_elicit_form = False
    can_elicit_url = False

    async def elicit(self, request: dict[str, Any], tool_call_id: str | None) -> dict[str, Any]:
        return {"action": "decline"}

    def elicitation_complete(self, elicitation_id: str) -> None:
        return None

    def __init__(self, files: dict[str, str]) -> None:
        self.files = files
        self.reads: list[str] = []
        self.writes: list[tuple[str, str]] = []

    async def request_permission(
        self, tool_call: dict[str, Any], options: list[dict[str, Any]]
    ) -> dict[str, Any]:
        raise AssertionError("tools never ask the editor directly")

    async def read_text_file(self, path: str, line: int | None, limit: int | None) -> str:
        self.reads.append(path)
        if path not in self.files:
            raise ClientRequestFailed("fs/read_text_file", "Resource not found", about=path)
        return self.files[path]

    async def write_text_file(self, path: str, content: str) -> None:
        self.writes.append((path, content))
        self.files[path] = content

    async def create_terminal(
        self,
        command: str,
        args: list[str],
        cwd: str,
        output_byte_limit: int,
        env: list[dict[str, str]],
    ) -> str:
        raise NotImplementedError

    async def terminal_output(self, terminal_id: str) -> dict[str, Any]:
        raise NotImplementedError

    async def wait_for_terminal_exit(self, terminal_id: str) -> dict[str, Any]:
        raise NotImplementedError

    async def kill_terminal(self, terminal_id: str) -> None:
        raise NotImplementedError

    async def release_terminal(self, terminal_id: str) -> None:
        raise NotImplementedError


@dataclass
class Harness:
    cwd: Path
    client: EditorApi = field(default_factory=NoEditor)
    refuse: bool = False
    permits: list[Permit] = field(default_factory=list)
    read_probes: list[Permit] = field(default_factory=list)
    updates: list[dict[str, Any]] = field(default_factory=list)

    def context(self) -> ToolContext:
        async def permit(request: Permit) -> None:
            if request.effect == "read":  # an edit tool asking to read the old text first
                self.read_probes.append(request)
                return
            self.permits.append(request)
            if self.refuse:
                raise ToolFailure("denied")

        return ToolContext(
            "call_1", self.cwd, (self.cwd,), self.client, self.updates.append, permit
        )

    async def run(self, tool: Tool, **args: Any) -> ToolOutcome:
        return await tool.run(args, self.context())


@pytest.fixture
def h(tmp_path: Path) -> Harness:
    return Harness(tmp_path)


# -- write_file --------------------------------------------------------------------------------


async def test_write_creates_a_new_file_with_a_diff_without_old_text(h: Harness) -> None:
    out = await h.run(WRITE_FILE, path="docs/notes.md", content="one\ntwo\n")
    target = h.cwd / "docs" / "notes.md"
    assert target.read_text() == "one\ntwo\n"
    assert out.ok and out.text == "Created docs/notes.md (2 lines)"
    assert out.content == [{"type": "diff", "path": str(target), "newText": "one\ntwo\n"}]
    assert [p.paths for p in h.permits] == [(target,)]
    assert h.permits[0].preview == out.content


async def test_write_overwrites_and_shows_the_old_text(h: Harness) -> None:
    (h.cwd / "a.txt").write_text("old\n")
    out = await h.run(WRITE_FILE, path="a.txt", content="new\nmore\nlines\n")
    assert (h.cwd / "a.txt").read_text() == "new\nmore\nlines\n"
    assert out.text == "Wrote 3 lines to a.txt"
    assert out.content is not None and out.content[0]["oldText"] == "old\n"


async def test_write_refused_writes_nothing(h: Harness) -> None:
    h.refuse = True
    (h.cwd / "keep.txt").write_text("keep\n")
    with pytest.raises(ToolFailure, match="denied"):
        await h.run(WRITE_FILE, path="keep.txt", content="gone\n")
    with pytest.raises(ToolFailure):
        await h.run(WRITE_FILE, path="new.txt", content="x")
    assert (h.cwd / "keep.txt").read_text() == "keep\n"
    assert not (h.cwd / "new.txt").exists()
    assert len(h.permits) == 2


async def test_write_keeps_a_crlf_file_crlf(h: Harness) -> None:
    (h.cwd / "w.bat").write_bytes(b"echo 1\r\necho 2\r\n")
    await h.run(WRITE_FILE, path="w.bat", content="echo 3\necho 4\n")
    assert (h.cwd / "w.bat").read_bytes() == b"echo 3\r\necho 4\r\n"


async def test_write_to_a_directory_fails(h: Harness) -> None:
    (h.cwd / "d").mkdir()
    with pytest.raises(ToolFailure, match="directory"):
        await h.run(WRITE_FILE, path="d", content="x")
    assert h.permits == []


async def test_write_goes_through_an_editor_that_can(h: Harness) -> None:
    disk = h.cwd / "app.py"
    disk.write_text("on disk\n")
    editor = MemoryEditor({str(disk): "unsaved buffer\n"})
    h.client = editor
    out = await h.run(WRITE_FILE, path="app.py", content="new\n")
    assert out.content is not None and out.content[0]["oldText"] == "unsaved buffer\n"
    assert editor.writes == [(str(disk), "new\n")]
    assert disk.read_text() == "on disk\n"


async def test_editor_refusal_reaches_the_toolbox_in_words(h: Harness) -> None:
    """The toolbox turns it into the call's failure (tests/e2e/test_client_answers.py)."""
    (h.cwd / "gone.txt").write_text("x")
    h.client = MemoryEditor({})
    with pytest.raises(ClientRequestFailed, match=r'read_text_file for .*gone.txt; it said "Reso'):
        await h.run(WRITE_FILE, path="gone.txt", content="y")


# -- edit_file ---------------------------------------------------------------------------------

SOURCE = "def main():\n    print('hi')\n    return 0\n"


async def test_edit_replaces_text_and_reports_the_first_changed_line(h: Harness) -> None:
    target = h.cwd / "app.py"
    target.write_text(SOURCE)
    out = await h.run(
        EDIT_FILE,
        path="app.py",
        edits=[
            {"old_text": "print('hi')", "new_text": "print('hello')"},
            {"old_text": "return 0", "new_text": "return 1"},
        ],
    )
    new = "def main():\n    print('hello')\n    return 1\n"
    assert target.read_text() == new
    assert out.ok and out.text.startswith("Applied 2 edits to app.py")
    diff = {"type": "diff", "path": str(target), "oldText": SOURCE, "newText": new}
    assert out.content == [diff]
    assert h.permits[0].preview == [diff] and h.permits[0].paths == (target,)
    assert out.locations == [{"path": str(target), "line": 2}]


async def test_edits_apply_in_order_to_the_edited_text(h: Harness) -> None:
    (h.cwd / "f.txt").write_text("alpha\n")
    out = await h.run(
        EDIT_FILE,
        path="f.txt",
        edits=[
            {"old_text": "alpha", "new_text": "beta"},
            {"old_text": "beta", "new_text": "gamma"},
        ],
    )
    assert (h.cwd / "f.txt").read_text() == "gamma\n"
    assert "2 edits" in out.text


async def test_replace_all_changes_every_occurrence(h: Harness) -> None:
    (h.cwd / "f.txt").write_text("x = 1\ny = x + x\n")
    edit = {"old_text": "x", "new_text": "z", "replace_all": True}
    out = await h.run(EDIT_FILE, path="f.txt", edits=[edit])
    assert (h.cwd / "f.txt").read_text() == "z = 1\ny = z + z\n"
    assert out.text.startswith("Applied 1 edit to f.txt")


@pytest.mark.parametrize(
    ("before", "edit", "after"),
    [
        # Seen on Qwen2.5-Coder-1.5B, asked to remove the line "buy milk": a blank line stayed.
        (b"write report\nbuy milk\ncall bank\n", {}, b"write report\ncall bank\n"),
        (b"write report\r\nbuy milk\r\ncall bank\r\n", {}, b"write report\r\ncall bank\r\n"),
        (b"buy milk\nbuy milk now\nbuy milk\n", {"replace_all": True}, b" now\n"),
        (b"please buy milk\nnow\n", {}, b"please \nnow\n"),  # part of a line: only that
        (b"write report\nbuy milk", {}, b"write report\n"),  # no line break after it to take
    ],
)
async def test_deleting_a_whole_line_takes_its_line_break(
    h: Harness, before: bytes, edit: dict[str, Any], after: bytes
) -> None:
    (h.cwd / "todo.txt").write_bytes(before)
    await h.run(
        EDIT_FILE, path="todo.txt", edits=[{"old_text": "buy milk", "new_text": "", **edit}]
    )
    assert (h.cwd / "todo.txt").read_bytes() == after


@pytest.mark.parametrize(
    ("edits", "expected"),
    [
        ([{"old_text": "print('bye')", "new_text": "x"}], r"Edit 1: old_text was not found"),
        (
            [{"old_text": "def main", "new_text": "def go"}, {"old_text": "nope", "new_text": ""}],
            r"Edit 2: old_text was not found",
        ),
        ([{"old_text": "    ", "new_text": "\t"}], r"Edit 1: old_text occurs 2 times.*replace_all"),
        ([{"old_text": "", "new_text": "x"}], r"Edit 1: old_text is empty.*write_file"),
        ([{"old_text": "return 0", "new_text": "return 0"}], r"changes nothing"),
    ],
)
async def test_a_failed_edit_asks_nothing_and_writes_nothing(
    h: Harness, edits: list[dict[str, Any]], expected: str
) -> None:
    target = h.cwd / "app.py"
    target.write_text(SOURCE)
    with pytest.raises(ToolFailure, match=expected):
        await h.run(EDIT_FILE, path="app.py", edits=edits)
    assert target.read_text() == SOURCE
    assert h.permits == [] and h.updates == []


async def test_not_found_points_at_the_closest_line(h: Harness) -> None:
    (h.cwd / "app.py").write_text(SOURCE)
    with pytest.raises(ToolFailure) as failure:
        await h.run(EDIT_FILE, path="app.py", edits=[{"old_text": "print('hj')", "new_text": ""}])
    assert "closest line is line 2" in str(failure.value)
    assert "whitespace" in str(failure.value)


async def test_wrong_indentation_shows_what_the_file_has(h: Harness) -> None:
    (h.cwd / "app.py").write_text(SOURCE)
    wrong = "  print('hi')\n  return 0"
    with pytest.raises(ToolFailure) as failure:
        await h.run(EDIT_FILE, path="app.py", edits=[{"old_text": wrong, "new_text": ""}])
    message = str(failure.value)
    assert "matches line 2" in message and "    print('hi')\n    return 0" in message


async def test_edit_of_a_missing_file_suggests_write_file(h: Harness) -> None:
    with pytest.raises(ToolFailure, match="write_file"):
        await h.run(EDIT_FILE, path="nope.py", edits=[{"old_text": "a", "new_text": "b"}])
    assert h.permits == []


async def test_edit_refuses_a_file_that_is_not_utf8(h: Harness) -> None:
    (h.cwd / "latin1.txt").write_bytes(b"caf\xe9 = 1\n")
    with pytest.raises(ToolFailure, match="not valid UTF-8"):
        await h.run(EDIT_FILE, path="latin1.txt", edits=[{"old_text": "1", "new_text": "2"}])
    assert (h.cwd / "latin1.txt").read_bytes() == b"caf\xe9 = 1\n"
    assert h.permits == []


async def test_edit_refused_leaves_the_file(h: Harness) -> None:
    h.refuse = True
    (h.cwd / "app.py").write_text(SOURCE)
    with pytest.raises(ToolFailure, match="denied"):
        await h.run(EDIT_FILE, path="app.py", edits=[{"old_text": "hi", "new_text": "yo"}])
    assert (h.cwd / "app.py").read_text() == SOURCE
    assert len(h.permits) == 1


async def test_edit_keeps_crlf_line_endings(h: Harness) -> None:
    target = h.cwd / "win.txt"
    target.write_bytes(b"one\r\ntwo\r\nthree\r\n")
    edit = {"old_text": "one\ntwo\n", "new_text": "uno\ndos\nextra\n"}
    await h.run(EDIT_FILE, path="win.txt", edits=[edit])
    assert target.read_bytes() == b"uno\r\ndos\r\nextra\r\nthree\r\n"


async def test_edit_goes_through_an_editor_that_can(h: Harness) -> None:
    disk = h.cwd / "app.py"
    disk.write_text("stale\n")
    editor = MemoryEditor({str(disk): "fresh = 1\n"})
    h.client = editor
    await h.run(EDIT_FILE, path="app.py", edits=[{"old_text": "1", "new_text": "2"}])
    assert editor.reads == [str(disk)]
    assert editor.writes == [(str(disk), "fresh = 2\n")]
    assert disk.read_text() == "stale\n"


def test_first_changed_line() -> None:
    assert first_changed_line("a\nb\nc\n", "a\nB\nc\n") == 2
    assert first_changed_line("a\n", "a\nb\n") == 2
    assert first_changed_line("a\nb\nc\n", "a\n") == 1
    assert first_changed_line("a", "a\n") == 1
    assert first_changed_line("", "") == 1


# -- list_directory ----------------------------------------------------------------------------


async def test_list_sorts_marks_directories_and_counts_hidden_and_ignored(h: Harness) -> None:
    for name in ("b.txt", ".env", "a.py", "gen.py", ".gitignore"):
        (h.cwd / name).write_text("gen.py\n" if name == ".gitignore" else "")
    (h.cwd / "src").mkdir()
    (h.cwd / ".git").mkdir()
    out = await h.run(LIST_DIRECTORY)
    assert out.text.splitlines() == [
        "a.py",
        "b.txt",
        "src/",
        "[3 hidden or ignored entries not shown: include_hidden / include_ignored show them.]",
    ]
    assert h.permits[0].paths == (h.cwd,)
    assert out.content == [{"type": "content", "content": {"type": "text", "text": out.text}}]
    everything = await h.run(LIST_DIRECTORY, include_hidden=True, include_ignored=True)
    assert everything.text.splitlines() == [
        ".env",
        ".gitignore",
        "a.py",
        "b.txt",
        "gen.py",
        "src/",
    ]  # .git is never shown


async def test_list_caps_entries_and_says_how_many_more(h: Harness) -> None:
    (h.cwd / "many").mkdir()
    for i in range(503):
        (h.cwd / "many" / f"f{i:04}").write_text("")
    out = await h.run(LIST_DIRECTORY, path="many")
    lines = out.text.splitlines()
    assert len(lines) == 501 and lines[0] == "f0000" and lines[499] == "f0499"
    assert "3 more entries" in lines[-1]


async def test_list_failures(h: Harness) -> None:
    (h.cwd / "file.txt").write_text("x")
    (h.cwd / "empty").mkdir()
    with pytest.raises(ToolFailure, match="not a directory"):
        await h.run(LIST_DIRECTORY, path="file.txt")
    with pytest.raises(ToolFailure, match="not found"):
        await h.run(LIST_DIRECTORY, path="missing")
    assert (await h.run(LIST_DIRECTORY, path="empty")).text == "(empty directory)"


# -- presentation and schemas ------------------------------------------------------------------


def test_titles(h: Harness) -> None:
    ctx = h.context()
    src = str(h.cwd / "src" / "app.py")
    assert EDIT_FILE.present({"path": "src/app.py"}, ctx).title == "Edit src/app.py"
    assert EDIT_FILE.present({"path": "src/app.py"}, ctx).locations == [{"path": src}]
    assert WRITE_FILE.present({"path": "notes.md", "content": ""}, ctx).title == "Write notes.md"
    assert LIST_DIRECTORY.present({"path": "src"}, ctx).title == "List src/"
    assert LIST_DIRECTORY.present({}, ctx).title == f"List {h.cwd}/"


@pytest.mark.parametrize("tool", [READ_FILE, WRITE_FILE, EDIT_FILE, LIST_DIRECTORY])
@pytest.mark.parametrize(
    "args", [{}, {"path": 3}, {"path": ""}, {"path": None, "edits": "x", "line": "2"}]
)
def test_present_never_raises(h: Harness, tool: Tool, args: dict[str, Any]) -> None:
    assert tool.present(args, h.context()).title


CANONICAL = {
    "write_file": ({"path": "a.txt", "content": "x"}, {"path": "a.txt"}),
    "edit_file": (
        {"path": "a", "edits": [{"old_text": "a", "new_text": "b", "replace_all": True}]},
        {"path": "a", "edits": []},
    ),
    "list_directory": ({"path": "src"}, {"path": "src", "recursive": True}),
}


@pytest.mark.parametrize("name", sorted(CANONICAL))
def test_schema_accepts_canonical_args_and_rejects_bad_ones(name: str) -> None:
    schema = schemas.load(f"tools/{name}.json")
    Draft202012Validator.check_schema(schema)
    good, bad = CANONICAL[name]
    validator = Draft202012Validator(schema)
    assert validator.is_valid(good)
    assert not validator.is_valid(bad)
    assert schema["additionalProperties"] is False


def test_edit_items_reject_unknown_keys() -> None:
    validator = Draft202012Validator(schemas.load("tools/edit_file.json"))
    assert not validator.is_valid(
        {"path": "a", "edits": [{"old_text": "a", "new_text": "b", "x": 1}]}
    )
    assert not validator.is_valid({"path": "a", "edits": [{"old_text": "a"}]})
    assert not validator.is_valid({"path": "a"})


async def test_edit_tools_ask_to_read_before_reading(tmp_path: Path) -> None:
    """Outside the project, even reading the old text for a diff needs permission first."""
    h = Harness(tmp_path)
    target = tmp_path / "a.txt"
    target.write_text("x\n")
    await h.run(WRITE_FILE, path="a.txt", content="y\n")
    await h.run(EDIT_FILE, path="a.txt", edits=[{"old_text": "y", "new_text": "z"}])
    assert [p.paths for p in h.read_probes] == [(target,), (target,)]


# -- links -------------------------------------------------------------------------------------


async def test_list_marks_links_that_lead_out_of_the_project(tmp_path: Path) -> None:
    project, outside = tmp_path / "project", tmp_path / "outside"
    project.mkdir()
    outside.mkdir()
    (outside / "secret.txt").write_text("TOPSECRET")
    (project / "leak.txt").symlink_to(outside / "secret.txt")
    (project / "outdir").symlink_to(outside)
    (project / "dangling").symlink_to(project / "gone")
    (project / "inner").symlink_to(project / "leak.txt")  # inside, but leads out in the end
    (project / "plain.txt").write_text("")
    out = await Harness(project).run(LIST_DIRECTORY)
    secret = outside / "secret.txt"
    assert out.text.splitlines() == [
        f"dangling -> {project / 'gone'} (broken link)",
        f"inner -> {secret} (outside the project; reading it asks the user)",
        f"leak.txt -> {secret} (outside the project; reading it asks the user)",
        f"outdir/ -> {outside} (outside the project; reading it asks the user)",
        "plain.txt",
    ]


async def test_write_through_a_link_keeps_the_link(h: Harness) -> None:
    (h.cwd / "real.txt").write_text("old\n")
    (h.cwd / "alias.txt").symlink_to(h.cwd / "real.txt")
    await h.run(WRITE_FILE, path="alias.txt", content="new\n")
    assert (h.cwd / "alias.txt").is_symlink()
    assert (h.cwd / "real.txt").read_text() == "new\n"
    await h.run(EDIT_FILE, path="alias.txt", edits=[{"old_text": "new", "new_text": "newer"}])
    assert (h.cwd / "alias.txt").is_symlink()
    assert (h.cwd / "real.txt").read_text() == "newer\n"


async def test_an_edit_that_differs_only_in_quotes_or_spacing_is_made_where_it_occurs_once(
    h: Harness,
) -> None:
    """A 1.5B model asked to set debug to false in config.json wrote `debug: true` for the
    file's `"debug": true`, was shown the file's text, and explained instead of trying again:
    the change is made there, with the file's own quotes, and the result says so."""
    (h.cwd / "config.json").write_text('{"debug": true, "port": 8080}\n')
    edit = {"old_text": "debug: true", "new_text": "debug: false"}
    done = await h.run(EDIT_FILE, path="config.json", edits=[edit])
    assert (h.cwd / "config.json").read_text() == '{"debug": false, "port": 8080}\n'
    assert done.text == (
        "Applied 1 edit to config.json (first change at line 1): "
        '"debug": true → "debug": false, the file\'s own quotes and spacing kept.'
    )
    (h.cwd / "app.py").write_text("def f():\n    x  =  'a'\n    return x\n")
    edits = [
        {"old_text": 'x = "a"', "new_text": 'x = "b"'},
        {"old_text": "return x", "new_text": "return x * 2"},
    ]
    done = await h.run(EDIT_FILE, path="app.py", edits=edits)
    assert (h.cwd / "app.py").read_text() == "def f():\n    x  =  'b'\n    return x * 2\n"
    assert done.text.endswith(
        "(first change at line 2). Edit 1: x  =  'a' → x  =  'b', the file's own quotes and "
        "spacing kept."
    )  # edit 2 matched exactly: nothing said of it


async def test_a_loose_match_that_is_not_one_place_or_splits_a_word_changes_nothing(
    h: Harness,
) -> None:
    """Where the loose match is not one clear place, the edit fails as before, with the hint."""
    original = '{"debug": true, "x": {"debug": true}}\n'
    (h.cwd / "config.json").write_text(original)
    tries = [
        ({"old_text": "debug: true", "new_text": "debug: false"}, "quotes or spacing, at line 1"),
        ({"old_text": "bug: true", "new_text": "bug: false"}, "Nothing similar"),  # in "debug"
    ]
    for edit, said in tries:
        with pytest.raises(ToolFailure) as failure:
            await h.run(EDIT_FILE, path="config.json", edits=[edit])
        assert said in str(failure.value)
    assert (h.cwd / "config.json").read_text() == original
    (h.cwd / "app.py").write_text("x = 1\ncall( 'a',\n  'b')\n")
    edit = {"old_text": 'call("a", "b")', "new_text": ""}  # it would take a line break away
    with pytest.raises(ToolFailure) as failure:
        await h.run(EDIT_FILE, path="app.py", edits=[edit])
    assert "at line 2:\ncall( 'a',\n  'b')\n" in str(failure.value)
    edit = {"old_text": 'call("a", "b")', "new_text": 'call("a",\n  "c")'}  # it would add one
    with pytest.raises(ToolFailure) as failure:
        await h.run(EDIT_FILE, path="app.py", edits=[edit])
    assert "Use that text exactly as old_text" in str(failure.value)
    edit = {"old_text": '"a"', "new_text": ""}  # too little left to tell where it was meant
    with pytest.raises(ToolFailure) as failure:
        await h.run(EDIT_FILE, path="app.py", edits=[edit])
    assert "quotes or spacing" not in str(failure.value)
    edit = {"old_text": "call('a', 'b')", "new_text": 'call("a", "b")'}  # what it already has
    with pytest.raises(ToolFailure) as failure:
        await h.run(EDIT_FILE, path="app.py", edits=[edit])
    assert "It changes nothing" not in str(failure.value)  # a line break: not carried
    (h.cwd / "one.py").write_text("print('hi')\n")
    with pytest.raises(ToolFailure) as failure:
        edit = {"old_text": 'print("hi")', "new_text": "print('hi')"}
        await h.run(EDIT_FILE, path="one.py", edits=[edit])
    assert "already has this" in str(failure.value)
    assert (h.cwd / "app.py").read_text() == "x = 1\ncall( 'a',\n  'b')\n"
    assert (h.cwd / "one.py").read_text() == "print('hi')\n"


async def test_a_path_that_starts_with_the_projects_own_name_means_inside_it(
    tmp_path: Path,
) -> None:
    """Models shown the project's path write `shop/a.txt` for `a.txt` in …/shop; a folder that
    is really called `shop` inside it keeps its meaning."""
    h = Harness(tmp_path / "shop")
    h.cwd.mkdir()
    (h.cwd / "a.txt").write_text("alpha\n")
    assert (await h.run(READ_FILE, path="shop/a.txt")).text.endswith("alpha\n")
    await h.run(WRITE_FILE, path="shop/new.txt", content="n\n")
    assert (h.cwd / "new.txt").read_text() == "n\n" and not (h.cwd / "shop").exists()
    listed = await h.run(LIST_DIRECTORY, path="shop")
    assert "a.txt" in listed.text and "new.txt" in listed.text
    (h.cwd / "shop").mkdir()
    (h.cwd / "shop" / "a.txt").write_text("inner\n")
    assert (await h.run(READ_FILE, path="shop/a.txt")).text.endswith("inner\n")
    assert (await h.run(READ_FILE, path="a.txt")).text.endswith("alpha\n")
