"""Secrets stay out of the commands the model runs (issue 29, finding 7), through the real
console script, under bubblewrap and Landlock, locally and in an editor terminal, as root and as
an ordinary user the suite makes:

- the credential files of a fake HOME (gh, git, cargo, Claude, Codex, Hugging Face, shell
  history, pgpass, Vault, Terraform, keyrings, pass, ssh, cloud and registry logins) cannot be
  read by a sandboxed command;
- another project's session transcript in the agent's data folder cannot be read;
- a session whose folder IS the HOME: the SSH key stays unreadable and unwritable, the agent's
  configuration unreadable, and (under bubblewrap) a new file in HOME can still be written;
- a HOME reached through a symlinked parent (`home -> var/home`) hides them all the same;
- tokens and agent sockets in the server's environment do not reach a command at any level,
  while PATH, HOME and LANG do, and so does a name the configuration file adds.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.test_sandbox_e2e import way as way  # the fixture: mechanism x terminal
from tests.e2e.test_tools_e2e import call, final_updates, open_session, run_prompt
from tests.support.fake_editor import FakeEditor
from tests.support.mock_llm import MockLLM
from tests.support.unprivileged import User, unprivileged
from tests.unit.test_confine_sandbox import available

Start = Callable[..., Any]
# The review's twelve, and the classics, as files in HOME.
CREDENTIALS = (
    ".config/gh/hosts.yml", ".git-credentials", ".cargo/credentials",
    ".cargo/credentials.toml", ".claude/.credentials.json", ".codex/auth.json",
    ".cache/huggingface/token", ".bash_history", ".zsh_history", ".pgpass", ".vault-token",
    ".terraform.d/credentials.tfrc.json", ".local/share/keyrings/login.keyring",
    ".password-store/mail.gpg", ".ssh/id_ed25519", ".aws/credentials",
    ".gnupg/private-keys-v1.d/k.key", ".config/gcloud/credentials.db",
    ".azure/msal_token_cache.json", ".docker/config.json", ".kube/config", ".netrc", ".npmrc",
    ".pypirc", ".config/git/credentials",
)  # fmt: skip
END = "END-OF-COMMAND"


def plant(home: Path, names: tuple[str, ...] = CREDENTIALS) -> dict[str, str]:
    """Each credential file made in `home`, holding a marker of its own (in a comment: one is
    the agent's configuration file); name -> marker."""
    planted = {}
    for name in names:
        marker = f"SECRET-{uuid.uuid4().hex}"
        (home / name).parent.mkdir(parents=True, exist_ok=True)
        (home / name).write_text(f"# {marker}\n", encoding="utf-8")
        planted[name] = marker
    return planted


def cat_all(home: Path, names: list[str] | tuple[str, ...]) -> str:
    return "".join(f"cat '{home / name}' 2>&1; " for name in names) + f"echo {END}"


def output(frames: list[dict[str, Any]], editor: FakeEditor, terminal: bool) -> str:
    """Everything the commands printed: the editor's terminals, or the tool results."""
    if terminal:
        return b"".join(editor.outputs.values()).decode("utf-8", "replace")
    return json.dumps(list(final_updates(frames).values()))


async def run(
    server_factory: Start,
    rounds: list[dict[str, Any]],
    env: dict[str, str],
    cwd: Path,
    terminal: bool,
    *,
    user: User | None = None,
    script_dir: Path,
    mode: str | None = None,
) -> str:
    """One session in `cwd` playing `rounds`; what its commands printed."""
    script = script_dir / f"script-{uuid.uuid4().hex}.json"
    script.write_text(json.dumps(rounds), encoding="utf-8")
    editor = FakeEditor(fs=False, terminal=terminal)
    server = await server_factory(
        "--script", str(script), env=env, as_user=user, cwd=str(cwd) if user else None
    )
    session = await open_session(server, editor, cwd, mode)
    stop, frames = await run_prompt(server, session)
    assert stop == "end_turn"
    printed = output(frames, editor, terminal)
    await editor.close()
    return printed


def server_env(base: Path, home: Path, how: str, user: User | None) -> dict[str, str]:
    extra = {
        "ACP_SERVER_SANDBOX": "workspace-write",
        "ACP_SERVER_SANDBOX_WITH": how,
        "ACP_SERVER_DATA_DIR": str(base / "data"),
        "XDG_STATE_HOME": str(base / "state"),
        "XDG_CONFIG_HOME": str(home / ".config"),
    }
    return user.env(home, extra) if user else {"HOME": str(home), **extra}


@pytest.fixture(params=["root", "user"])
def who(request: pytest.FixtureRequest, tmp_path: Path) -> tuple[User | None, Path]:
    """Root with pytest's folder, or the ordinary user with a folder of theirs."""
    if request.param == "root":
        return None, tmp_path
    user = unprivileged()
    return user, user.folder("secrets")


def local_way(how: str) -> None:
    if not available(how):  # type: ignore[arg-type]
        pytest.skip(f"{how} is not available on this machine")


# --- credential files ---------------------------------------------------------------------------


async def test_credential_files_in_home_are_unreadable(
    server_factory: Start, tmp_path: Path, way: tuple[str, bool]
) -> None:
    how, terminal = way
    home, project = tmp_path / "home", tmp_path / "project"
    project.mkdir(parents=True)
    planted = plant(home)
    rounds = [call("run_command", command=cat_all(home, CREDENTIALS)), {"text": "Read."}]
    env = server_env(tmp_path, home, how, None)
    printed = await run(server_factory, rounds, env, project, terminal, script_dir=tmp_path)
    assert END in printed, printed
    assert [name for name, marker in planted.items() if marker in printed] == []


@pytest.mark.parametrize("how", ["bubblewrap", "landlock"])
async def test_credential_files_are_unreadable_as_an_ordinary_user(
    server_factory: Start, how: str
) -> None:
    local_way(how)
    user = unprivileged()
    base = user.folder("creds")
    home, project = base / "home", base / "project"
    project.mkdir()
    planted = plant(home)
    user.own(home, project)
    rounds = [call("run_command", command=cat_all(home, CREDENTIALS)), {"text": "Read."}]
    env = server_env(base, home, how, user)
    printed = await run(server_factory, rounds, env, project, False, user=user, script_dir=base)
    assert END in printed, printed
    assert [name for name, marker in planted.items() if marker in printed] == []


# --- the agent's own data -----------------------------------------------------------------------


@pytest.mark.parametrize("how", ["bubblewrap", "landlock"])
async def test_another_projects_transcript_is_unreadable(
    server_factory: Start, tmp_path: Path, how: str, who: tuple[User | None, Path]
) -> None:
    """A first session says a secret (it is stored in the data folder); a command of a second
    session, in another project, looks for it there."""
    local_way(how)
    user, base = who
    home, first, second = base / "home", base / "first", base / "second"
    for folder in (home, first, second):
        folder.mkdir()
    if user:
        user.own(home, first, second)
    marker = f"TRANSCRIPT-{uuid.uuid4().hex}"
    data = base / "data"
    half = len(marker) // 2  # the command line must not hold the marker itself
    found = f'grep -rl "{marker[:half]}""{marker[half:]}" \'{data}\' >/dev/null 2>&1'
    look = f"{found} && echo LEAK-'FOUND'; echo {END}"
    rounds = [{"text": f"Noted: {marker}"}, call("run_command", command=look), {"text": "."}]
    script = base / "script.json"
    script.write_text(json.dumps(rounds), encoding="utf-8")
    env = server_env(base, home, how, user)
    server = await server_factory("--script", str(script), env=env, as_user=user)
    editor = FakeEditor(fs=False, terminal=False)
    one = await open_session(server, editor, first)
    await run_prompt(server, one)
    assert any(marker.encode() in p.read_bytes() for p in data.rglob("*") if p.is_file())
    two = await server.request("session/new", {"cwd": str(second), "mcpServers": []})
    _, frames = await run_prompt(server, two["result"]["sessionId"])
    printed = output(frames, editor, False)
    assert END in printed and "LEAK-FOUND" not in printed, printed


# --- a session in HOME --------------------------------------------------------------------------


async def test_a_session_in_home_keeps_its_secrets_hidden_and_unwritable(
    server_factory: Start, tmp_path: Path, way: tuple[str, bool]
) -> None:
    how, terminal = way
    home = tmp_path / "home"
    planted = plant(home, (".ssh/id_ed25519", ".config/acp-server/config.toml", ".netrc"))
    key = home / ".ssh" / "id_ed25519"
    rounds = [
        call("run_command", command=cat_all(home, list(planted))),
        call("run_command", command=f"echo overwritten > '{key}'; echo new > '{home}/.netrc'"),
        call("run_command", command=f"echo fine > '{home}/notes.txt'"),
        {"text": "Done."},
    ]
    env = server_env(tmp_path, home, how, None)
    printed = await run(server_factory, rounds, env, home, terminal, script_dir=tmp_path)
    assert END in printed
    assert [name for name, marker in planted.items() if marker in printed] == []
    assert key.read_text() == f"# {planted['.ssh/id_ed25519']}\n"
    assert (home / ".netrc").read_text() == f"# {planted['.netrc']}\n"
    if how == "bubblewrap":  # Landlock cannot let a file be made beside ~/.ssh: see the docs
        assert (home / "notes.txt").read_text() == "fine\n"


@pytest.mark.parametrize("how", ["bubblewrap", "landlock"])
async def test_a_session_in_home_as_an_ordinary_user(server_factory: Start, how: str) -> None:
    local_way(how)
    user = unprivileged()
    home = user.folder("home")
    planted = plant(home, (".ssh/id_ed25519", ".config/acp-server/config.toml"))
    (home / "project").mkdir()
    (home / "project" / "old.txt").write_text("old\n")
    user.own(home)
    key = home / ".ssh" / "id_ed25519"
    rounds = [
        call("run_command", command=cat_all(home, list(planted))),
        call("run_command", command=f"echo overwritten > '{key}'; rm -f '{key}'"),
        call("run_command", command=f"echo new > '{home}/project/old.txt'"),
        {"text": "Done."},
    ]
    env = server_env(home / ".agent", home, how, user)
    printed = await run(server_factory, rounds, env, home, False, user=user, script_dir=home)
    assert END in printed
    assert [name for name, marker in planted.items() if marker in printed] == []
    assert key.read_text() == f"# {planted['.ssh/id_ed25519']}\n"
    assert (home / "project" / "old.txt").read_text() == "new\n"  # the rest of HOME is writable


@pytest.mark.parametrize("how", ["bubblewrap", "landlock"])
async def test_home_as_an_additional_directory_keeps_its_secrets_hidden(
    server_factory: Start, script: Any, tmp_path: Path, how: str
) -> None:
    """A multi-root workspace whose second root is HOME (`additionalDirectories`)."""
    local_way(how)
    home, project = tmp_path / "home", tmp_path / "project"
    project.mkdir()
    planted = plant(home, (".ssh/id_ed25519", ".config/gh/hosts.yml"))
    (home / "work").mkdir()
    key = home / ".ssh" / "id_ed25519"
    rounds = [
        call("run_command", command=cat_all(home, list(planted))),
        call("run_command", command=f"echo overwritten > '{key}'; echo ok > '{home}/work/a'"),
        {"text": "Done."},
    ]
    server = await server_factory(
        "--script", str(script(rounds)), env=server_env(tmp_path, home, how, None)
    )
    editor = FakeEditor(fs=False, terminal=False)
    editor.attach(server)
    capabilities = {"clientCapabilities": editor.capabilities(), "protocolVersion": 1}
    await server.request("initialize", capabilities)
    params = {"cwd": str(project), "mcpServers": [], "additionalDirectories": [str(home)]}
    session = (await server.request("session/new", params))["result"]["sessionId"]
    _, frames = await run_prompt(server, session)
    printed = output(frames, editor, False)
    assert END in printed
    assert [name for name, marker in planted.items() if marker in printed] == []
    assert key.read_text() == f"# {planted['.ssh/id_ed25519']}\n"
    assert (home / "work" / "a").read_text() == "ok\n"  # the root itself is writable


# --- a HOME reached through a symlink -----------------------------------------------------------


async def test_a_home_behind_a_symlinked_parent_still_hides_them(
    server_factory: Start, tmp_path: Path, way: tuple[str, bool]
) -> None:
    """HOME is `tmp/home/u` where `tmp/home -> var/home`: the secrets are hidden under both
    names, from a project beside HOME and from a session in HOME."""
    how, terminal = way
    real = tmp_path / "var" / "home" / "u"
    real.mkdir(parents=True)
    (tmp_path / "home").symlink_to("var/home")
    home = tmp_path / "home" / "u"
    project = tmp_path / "project"
    project.mkdir()
    planted = plant(home)
    both = cat_all(home, CREDENTIALS) + "; " + cat_all(real, CREDENTIALS)
    rounds = [call("run_command", command=both), {"text": "Read."}]
    env = server_env(tmp_path, home, how, None)
    for cwd in (project, home):
        printed = await run(server_factory, rounds, env, cwd, terminal, script_dir=tmp_path)
        assert END in printed
        assert [name for name, marker in planted.items() if marker in printed] == [], cwd


# --- the environment ----------------------------------------------------------------------------

TOKENS = ("GEMINI_API_KEY", "AWS_SECRET_ACCESS_KEY", "GITHUB_TOKEN", "SSH_AUTH_SOCK")


@pytest.mark.parametrize("level", ["workspace-write", "off"])
async def test_commands_get_an_allowlisted_environment(
    server_factory: Start,
    mock_llm: MockLLM,
    tmp_path: Path,
    way: tuple[str, bool],
    level: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Tokens and the ssh-agent's socket set in the server's environment (and the editor's:
    its terminals start from it) reach no command; PATH, HOME and LANG do, and so does a
    variable the configuration file names."""
    how, terminal = way
    values = {name: f"value-of-{name}-{uuid.uuid4().hex}" for name in TOKENS}
    values["OPENAI_API_KEY"] = f"sk-live-{uuid.uuid4().hex}"  # the agent's own key
    values["MY_BUILD_FLAVOUR"] = f"flavour-{uuid.uuid4().hex}"
    for name, value in values.items():
        monkeypatch.setenv(name, value)  # the editor's environment
    monkeypatch.setenv("LANG", "C.UTF-8")
    config = tmp_path / "config.toml"
    config.write_text('command_env = ["MY_BUILD_FLAVOUR"]\n', encoding="utf-8")
    home = tmp_path / "home"
    home.mkdir()
    env = {
        **server_env(tmp_path, home, how, None),
        **values,
        "ACP_SERVER_SANDBOX": level,
        "ACP_SERVER_CONFIG": str(config),
        "ACP_SERVER_RETRY_ATTEMPTS": "1",
        "OPENAI_BASE_URL": f"{mock_llm.url}/v1",
        "LANG": "C.UTF-8",
    }
    mock_llm.queue(
        {"tool_calls": [{"name": "run_command", "arguments": {"command": f"env; echo {END}"}}]},
        {"text": "done"},
    )
    editor = FakeEditor(fs=False, terminal=terminal)
    server = await server_factory("--model", "openai:mock-model", env=env)
    project = tmp_path / "project"
    project.mkdir()
    session = await open_session(server, editor, project, "bypass")
    stop, frames = await run_prompt(server, session)
    assert stop == "end_turn"
    printed = output(frames, editor, terminal)
    await editor.close()
    assert END in printed, printed
    lines = printed.replace("\\n", "\n")
    assert "PATH=" in lines and "LANG=C.UTF-8" in lines
    # An editor terminal keeps the editor's HOME; a local command gets ours.
    assert "HOME=" in lines and (terminal or f"HOME={home}" in lines)
    assert f"MY_BUILD_FLAVOUR={values['MY_BUILD_FLAVOUR']}" in lines
    leaked = [
        name for name in (*TOKENS, "OPENAI_API_KEY") if name in lines or values[name] in lines
    ]
    assert leaked == []
