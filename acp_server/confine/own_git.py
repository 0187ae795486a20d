"""How the agent runs its own git in a project: so that the project makes it run nothing.

A repository's settings can make git start programs: `core.fsmonitor` (at every `git status`),
hooks, clean/smudge/process filters named by `.gitattributes`, textconv and external diff
drivers, the pager, the ssh command, credential helpers. The repository's own `.git/config`, the
files it includes, a worktree's config (and, when HOME is one of the session's roots, even the
user's `~/.gitconfig`) can be written by whoever made the checkout, or by a command the model ran
in the sandbox; the agent's git, which asks for the environment block at every turn without a
prompt, must not run what they name. So it:

1. lists the names of every setting git sees (`git config --list --name-only`: reading the
   configuration starts nothing) and turns off, with `-c`, every one that can start a program:
   the fixed ones (`core.fsmonitor`, `core.hooksPath` pointed at a path that cannot exist, the
   pager, ssh, askpass, credential helpers) and each named driver found (`filter.<name>.clean`,
   `smudge`, `process`, `diff.<name>.textconv`, `command`, `merge.<name>.driver`, …);
2. runs with a minimal environment: no API keys, no `GIT_*` of the agent's own beyond the ones
   that say where the user's global configuration is;
3. runs inside the read-only sandbox with no network, where the machine has one
   (`sandbox.forced_mechanism`): a setting added between the listing and the run (a background
   command rewriting an included file) can then do no more than the command that wrote it.

`git status` is asked with `--ignore-submodules=dirty`: a submodule's own status would be a git
of its own, reading the submodule's configuration, which the listing did not see.
"""

from __future__ import annotations

import asyncio
import atexit
import contextlib
import os
import subprocess
from collections.abc import Sequence
from pathlib import Path

from acp_server.confine.sandbox import Sandbox

# A path below /dev/null is never a folder: no hook can be found there, nor put there.
NO_HOOKS = "/dev/null/no-hooks"
# Settings that name a program to start, set to what starts none.
FIXED: dict[str, str] = {
    "core.fsmonitor": "false",
    "core.hooksPath": NO_HOOKS,
    "core.pager": "cat",
    "core.editor": ":",
    "sequence.editor": ":",
    "core.askPass": "",
    "core.sshCommand": "",
    "core.gitProxy": "",
    "core.alternateRefsCommand": "",
    "credential.helper": "",
    "diff.external": "",
    "gpg.program": "",
    "gpg.openpgp.program": "",
    "gpg.x509.program": "",
    "gpg.ssh.program": "",
    "gpg.ssh.defaultKeyCommand": "",
    "uploadpack.packObjectsHook": "",
    "protocol.allow": "never",
    "submodule.recurse": "false",
    "gc.auto": "0",
    "maintenance.auto": "false",
    "safe.bareRepository": "explicit",  # a project folder shaped like a bare repository
}
# `<section>.<name>.<key>` settings that name a program, per section; the value that turns
# each off. A filter marked `required` would fail the run without its program: not required.
NAMED: dict[str, dict[str, str]] = {
    "filter": {"clean": "", "smudge": "", "process": "", "required": "false"},
    "diff": {"textconv": "", "command": ""},
    "merge": {"driver": ""},
    "credential": {"helper": ""},
    "remote": {"uploadpack": "", "receivepack": ""},
    "hook": {"command": ""},
    "difftool": {"cmd": ""},
    "mergetool": {"cmd": ""},
}
# What the agent's environment may pass on to its git: where things are, not secrets.
PASSED = ("PATH", "HOME", "USER", "LOGNAME", "XDG_CONFIG_HOME", "GIT_CONFIG_GLOBAL", "TZ")


def environment(env: dict[str, str] | None = None) -> dict[str, str]:
    """The minimal environment git runs with: no keys, no locks taken, no prompts."""
    source = os.environ if env is None else env
    kept = {name: source[name] for name in PASSED if source.get(name)}
    kept.setdefault("PATH", os.defpath)
    return {
        **kept,
        "LANG": "C",
        "LC_ALL": "C",
        "GIT_OPTIONAL_LOCKS": "0",  # never take the index lock from the user's own git
        "GIT_TERMINAL_PROMPT": "0",
        "GIT_NO_LAZY_FETCH": "1",  # a partial clone's missing object is not fetched
        "GIT_PAGER": "cat",
        "PAGER": "cat",
    }


def neutral(names: Sequence[str]) -> list[str]:
    """The `-c` arguments that turn off every program-starting setting: the fixed ones and
    those among `names` (setting names as `git config --list --name-only` gives them).
    ValueError for a name `-c` cannot carry (one holding `=`): nothing is run then."""
    values = dict(FIXED)
    for name in names:
        section, _, rest = name.partition(".")
        subsection, _, key = rest.rpartition(".")
        off = NAMED.get(section.lower(), {})
        if subsection and key.lower() in off:
            if "=" in name or "\n" in name:
                raise ValueError(f"the repository has a setting git's -c cannot override: {name}")
            for each, value in off.items():  # the whole driver: a filter's `required` too
                values[f"{section}.{subsection}.{each}"] = value
    args: list[str] = []
    for name, value in values.items():
        args += ["-c", f"{name}={value}"]
    return args


def parse_names(out: bytes) -> list[str]:
    """`git config --list --name-only -z` output as names."""
    return [n for n in out.decode("utf-8", "surrogateescape").split("\0") if n]


def config_get(git: str, cwd: Path, name: str, timeout: float, *extra: str) -> str | None:
    """The value of one setting as git in `cwd` sees it (None when unset or git fails).
    Reading a setting starts nothing: this runs without the sandbox, but with the minimal
    environment and no pager."""
    argv = [git, "--no-pager", *neutral(()), "config", *extra, "--get", name]
    try:
        done = subprocess.run(
            argv, cwd=cwd, env=environment(), capture_output=True, timeout=timeout, check=False
        )
    except (OSError, subprocess.SubprocessError):
        return None
    value = done.stdout.decode("utf-8", "surrogateescape").strip()
    return value if done.returncode == 0 and value else None


async def run(git: str, args: Sequence[str], cwd: Path, timeout: float) -> tuple[int, bytes, bytes]:
    """Run `git ARGS` in `cwd` as the agent's own git (see the module's docstring): its exit
    status, output and errors. TimeoutError past `timeout` seconds (the process killed),
    OSError when it cannot be started, ValueError when the settings cannot be neutralised."""
    env = environment()
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    code, out, err = await _communicate([git, "--no-pager", *neutral(()), "config", "--list",
                                         "--name-only", "-z"], cwd, env, timeout)  # fmt: skip
    if code != 0:
        return code, out, err
    argv = [git, "--no-pager", *neutral(parse_names(out)), *args]
    box = await _sandbox()
    return await _communicate(box.argv(argv), cwd, box.env(env), max(deadline - loop.time(), 0))


async def _communicate(
    argv: list[str], cwd: Path, env: dict[str, str], timeout: float
) -> tuple[int, bytes, bytes]:
    proc = await asyncio.create_subprocess_exec(
        *argv,
        cwd=cwd,
        env=env,
        stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    try:
        out, err = await asyncio.wait_for(proc.communicate(), timeout)
    except TimeoutError:
        with contextlib.suppress(ProcessLookupError):  # it may have ended meanwhile
            proc.kill()
        await proc.wait()
        raise
    return proc.returncode if proc.returncode is not None else -1, out, err


_BOX: list[Sandbox] = []  # the process's one read-only sandbox for git (made at first use)


async def _sandbox() -> Sandbox:
    """The read-only sandbox the agent's git runs in: no roots are writable, the secrets are
    hidden, no network. Working out the machine's mechanism may start bubblewrap once
    (~8 ms): done in a thread, not on the event loop."""
    if not _BOX:
        box = Sandbox("read-only", ())
        _BOX.append(box)
        atexit.register(box.close)
    box = _BOX[0]
    if not box.decided:
        await asyncio.to_thread(lambda: box.how)
    return box
