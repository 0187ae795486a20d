"""Where secrets live: the paths a sandboxed command may never read or write, and that the file
tools and instruction files must not open (`is_secret`).

The list is broad on purpose: a credential the sandbox does not know of is readable by every
command that runs without asking. Home-relative entries are taken under `$HOME` and under the
home the password database gives the user (when they differ, both). Every path is also taken
as it really is (through symlinks: a HOME of `/home/u` where `/home -> var/home` hides
`/var/home/u/...` too), so a second name for a secret is no way round.

| where (under HOME unless absolute)                            | what it holds                   |
| ------------------------------------------------------------- | ------------------------------- |
| `.ssh`                                                        | SSH keys, authorized_keys       |
| `.gnupg`, `.password-store`                                   | GPG keys, `pass`'s store        |
| `.local/share/keyrings`, `.local/share/kwalletd`              | GNOME Keyring, KWallet          |
| `.aws`, `.config/gcloud`, `.azure`, `.oci`                    | cloud credentials               |
| `.kube`, `.docker`                                            | cluster tokens, registry logins |
| `.netrc`, `.git-credentials`, `.config/git/credentials`       | HTTP and git logins             |
| `.config/gh`, `.config/hub`                                   | GitHub CLI tokens (hosts.yml)   |
| `.npmrc`, `.pypirc`, `.gem/credentials`                       | package registry tokens         |
| `.cargo/credentials`, `.cargo/credentials.toml`               | crates.io token                 |
| `.m2/settings-security.xml`                                   | Maven's master password         |
| `.claude/.credentials.json`, `.claude.json`,                  |                                 |
| `.codex/auth.json`, `.gemini/oauth_creds.json`                | other agents' logins            |
| `.claude/projects`, `.codex/sessions`                         | other agents' transcripts       |
| `.cache/huggingface/token`, `.huggingface/token`              | Hugging Face token              |
| `.vault-token`                                                | HashiCorp Vault token           |
| `.terraform.d/credentials.tfrc.json`, `.terraformrc`          | Terraform Cloud tokens          |
| `.pgpass`, `.my.cnf`                                          | database passwords              |
| `.s3cfg`, `.boto`, `.config/rclone`, `.config/sops`           | storage credentials, age keys   |
| `.config/op`, `.config/doctl`                                 | 1Password, DigitalOcean tokens  |
| `.mozilla`, `.config/google-chrome`, `.config/chromium`       | browser cookies, saved logins   |
| `.bash_history`, `.zsh_history`, `.sh_history`, `.histfile`,  |                                 |
| `.local/share/fish/fish_history`                              | shell history                   |
| `.python_history`, `.node_repl_history`, `.psql_history`,     |                                 |
| `.mysql_history`, `.sqlite_history`, `.rediscli_history`      | REPL history                    |
| `/etc/shadow`, `/etc/gshadow`, `/etc/ssh/ssh_host_*_key`      | hashes, host keys (root)        |
| the agent's data folder (`ACP_SERVER_DATA_DIR`)               | every project's transcripts     |
| the agent's state folder (`$XDG_STATE_HOME/acp-server`)       | its logs                        |
| its configuration folder, and the file ACP_SERVER_CONFIG names | stored API keys                |
"""

from __future__ import annotations

import functools
import os
import pwd
from collections.abc import Iterator
from pathlib import Path

IN_HOME = (
    ".ssh", ".gnupg", ".password-store", ".local/share/keyrings", ".local/share/kwalletd",
    ".aws", ".config/gcloud", ".azure", ".oci", ".kube", ".docker",
    ".netrc", ".git-credentials", ".config/git/credentials", ".config/gh", ".config/hub",
    ".npmrc", ".pypirc", ".gem/credentials", ".cargo/credentials", ".cargo/credentials.toml",
    ".m2/settings-security.xml",
    ".claude/.credentials.json", ".claude.json", ".claude/projects", ".codex/sessions",
    ".codex/auth.json", ".gemini/oauth_creds.json",
    ".cache/huggingface/token", ".huggingface/token", ".vault-token",
    ".terraform.d/credentials.tfrc.json", ".terraformrc", ".pgpass", ".my.cnf",
    ".s3cfg", ".boto", ".config/rclone", ".config/sops", ".config/op", ".config/doctl",
    ".mozilla", ".config/google-chrome", ".config/chromium",
    ".bash_history", ".zsh_history", ".sh_history", ".histfile",
    ".local/share/fish/fish_history", ".python_history", ".node_repl_history",
    ".psql_history", ".mysql_history", ".sqlite_history", ".rediscli_history",
)  # fmt: skip
CONFIG_ENV = "ACP_SERVER_CONFIG"
SYSTEM = (
    "/etc/shadow", "/etc/gshadow", "/etc/ssh/ssh_host_rsa_key", "/etc/ssh/ssh_host_ecdsa_key",
    "/etc/ssh/ssh_host_ed25519_key", "/etc/ssh/ssh_host_dsa_key",
)  # fmt: skip


def homes() -> list[Path]:
    """`$HOME`, and the user's home in the password database when that is another folder."""
    found = [Path(os.path.expanduser("~"))]
    try:
        listed = Path(pwd.getpwuid(os.getuid()).pw_dir)
    except (KeyError, OSError):
        return found
    return found if listed in found or not listed.is_absolute() else [*found, listed]


def agent_folders() -> list[Path]:
    """The agent's own data (session transcripts), state (logs) and configuration (keys)."""
    from acp_server.settings import data_dir, log_dir

    base = os.environ.get("XDG_CONFIG_HOME", "").strip() or "~/.config"
    found = [data_dir(), log_dir().parent, Path(base).expanduser() / "acp-server"]
    named = os.environ.get(CONFIG_ENV, "").strip()
    if named:
        found.append(Path(named).expanduser())
    return [Path(os.path.abspath(p)) for p in found]


def locations() -> list[Path]:
    """Every secret location, existing or not, as named and as it really is (symlinks
    resolved), without repeats. Worked out once for each environment that names them (the
    symlinks on the way are read then: ~5 ms)."""
    names = ("HOME", "ACP_SERVER_DATA_DIR", "XDG_STATE_HOME", "XDG_CONFIG_HOME", CONFIG_ENV)
    return list(_locations(tuple(os.environ.get(name) for name in names), os.getuid()))


@functools.lru_cache(maxsize=8)
def _locations(_environment: tuple[str | None, ...], _uid: int) -> tuple[Path, ...]:
    named = [home / entry for home in homes() for entry in IN_HOME]
    named += [Path(p) for p in SYSTEM] + agent_folders()
    return tuple(dict.fromkeys(_both(named)))


def hidden_paths() -> tuple[Path, ...]:
    """The secret locations that exist now, without those inside another one: what a
    sandbox covers (a secret inside a covered folder is covered already, and a rule or a mount
    for it would open or need its folder)."""
    found = [str(path) for path in locations() if os.path.lexists(path)]
    return tuple(Path(p) for p in found if not any(p.startswith(q + "/") for q in found))


def is_secret(path: str | os.PathLike[str]) -> bool:
    """Whether `path` (as named, or where it really leads) is a secret location or lies
    under one. Relative paths are taken from the current directory."""
    given = os.path.abspath(os.path.expanduser(os.fspath(path)))
    candidates = {given, os.path.realpath(given)}
    for location in map(str, locations()):
        prefix = location.rstrip("/") + "/"
        if any(c == location or c.startswith(prefix) for c in candidates):
            return True
    return False


def _both(paths: list[Path]) -> Iterator[Path]:
    for path in paths:
        yield path
        yield Path(os.path.realpath(path))
