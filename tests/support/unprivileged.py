"""Run the real server as an ordinary user that the test suite creates, for the attacks that
are about what a user (not root) can reach.

The suite runs as root here (CI, dev containers). `unprivileged()` makes the system user
`acp-test` once (useradd), finds an interpreter that user may run (this one, or the system's
python3 of the same version when this one lies under a folder only root may enter, as pyenv's
does under /root) and a copy of the package and its dependencies that user can read (the
checkout itself when every folder above it lets others in). Each test gets a folder of its own
under the system's temporary directory, owned by that user (`User.folder`), for HOME, the
project and the agent's data: pytest's tmp_path is private to root. They are all made in one
folder per test process, removed at the end of the run (`remove_folders`, called by the
session fixture in tests/conftest.py): each run used to leave ~30 behind.

Where that is impossible (not root, no useradd, no interpreter the user can run) the test is
skipped with the reason.
"""

from __future__ import annotations

import grp
import os
import pwd
import shutil
import site
import stat
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

import pytest

import acp_server

NAME = "acp-test"
# What the server does not need of the test environment (kept out of the copy made when the
# checkout cannot be read by other users): the model runtime, the linters, the build tools.
HEAVY = ("llama_cpp", "mypy", "ruff", "pip", "setuptools", "numpy", "_distutils_hack", "pytest")


@dataclass(frozen=True)
class User:
    """The unprivileged user and how to start the server as them."""

    name: str
    uid: int
    gid: int
    python: str
    path: str  # PYTHONPATH: the package and its dependencies, readable by the user

    def folder(self, label: str = "t") -> Path:
        """A new folder owned by the user (mode 0755) under the system's temporary directory."""
        made = Path(tempfile.mkdtemp(prefix=f"{label}-", dir=_run_folder()))
        os.chown(made, self.uid, self.gid)
        made.chmod(0o755)
        return made

    def own(self, *paths: Path) -> None:
        """Give `paths` (and everything under a folder) to the user."""
        for path in paths:
            for entry in [path, *(path.rglob("*") if path.is_dir() else [])]:
                os.lchown(entry, self.uid, self.gid)

    def argv(self, *args: str) -> list[str]:
        return [self.python, "-m", "acp_server", *args]

    def env(self, home: Path, extra: dict[str, str] | None = None) -> dict[str, str]:
        """The server's environment as this user: its own HOME, data, state and config."""
        base = {k: v for k, v in os.environ.items() if not k.startswith(("PYENV", "VIRTUAL_ENV"))}
        return {
            **base,
            "HOME": str(home),
            "USER": self.name,
            "LOGNAME": self.name,
            "PYTHONPATH": self.path,
            "PYTHONDONTWRITEBYTECODE": "1",
            "ACP_SERVER_DATA_DIR": str(home / ".local" / "share" / "acp-server"),
            "XDG_STATE_HOME": str(home / ".local" / "state"),
            "XDG_CONFIG_HOME": str(home / ".config"),
            "XDG_CACHE_HOME": str(home / ".cache"),
            **(extra or {}),
        }


_MADE: list[User] = []
_RUN: list[Path] = []  # this test process's folder for the user's folders (made at first use)


def _run_folder() -> Path:
    """The folder, under the system's temporary directory, that holds every folder made for
    the user in this test process (others may enter it, as the user must)."""
    if not _RUN:
        folder = Path(tempfile.mkdtemp(prefix="acp-u-"))
        folder.chmod(0o755)
        _RUN.append(folder)
    return _RUN[0]


def remove_folders() -> None:
    """Remove everything made for the user in this test process (at the end of the run)."""
    while _RUN:
        shutil.rmtree(_RUN.pop(), ignore_errors=True)


def unprivileged() -> User:
    """The test suite's ordinary user (made at the first call); skips the test, saying why,
    where one cannot be had."""
    if _MADE:
        return _MADE[0]
    if os.geteuid() != 0:
        pytest.skip("creating an unprivileged user needs root; this suite runs as a user already")
    if shutil.which("useradd") is None:
        pytest.skip("useradd is not installed, so no unprivileged user can be made")
    entry = _made_once()
    python = _interpreter()
    if python is None:
        pytest.skip(
            f"no Python {sys.version_info[0]}.{sys.version_info[1]} that an ordinary user may "
            f"run ({sys.executable} lies under a folder only root may enter, and the system has "
            "no python3 of that version)"
        )
    user = User(NAME, entry.pw_uid, grp.getgrgid(entry.pw_gid).gr_gid, python, _readable_path())
    _MADE.append(user)
    return user


def _made_once() -> pwd.struct_passwd:
    """The user's entry, made first if need be; one test process at a time (the suite runs
    in several: a second useradd while the first holds /etc/passwd fails)."""
    import fcntl

    with open(Path(tempfile.gettempdir()) / "acp-test-user.lock", "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            return pwd.getpwnam(NAME)
        except KeyError:
            subprocess.run(
                ["useradd", "--system", "--no-create-home", "--shell", "/usr/sbin/nologin", NAME],
                check=False,
                capture_output=True,
                timeout=30,
            )
            return pwd.getpwnam(NAME)  # KeyError here: useradd failed, and the test errors


def open_to_others(path: Path) -> bool:
    """Whether every folder from / down to `path` lets other users in (and `path` is readable)."""
    real = Path(os.path.realpath(path))
    for folder in [*reversed(real.parents), real]:
        try:
            mode = folder.stat().st_mode
        except OSError:
            return False
        if stat.S_ISDIR(mode) and not mode & stat.S_IXOTH:
            return False
    return bool(real.stat().st_mode & stat.S_IROTH)


def _interpreter() -> str | None:
    if open_to_others(Path(sys.executable)):
        return sys.executable
    major, minor = sys.version_info[:2]
    system = Path(f"/usr/bin/python{major}.{minor}")
    return str(system) if system.exists() and open_to_others(system) else None


def _readable_path() -> str:
    """PYTHONPATH for the user: the checkout and site-packages as they are when others may read
    them, else a copy (made once per test run) under the temporary directory."""
    package = Path(acp_server.__file__).parent
    packages = [Path(p) for p in site.getsitepackages() if Path(p).is_dir()]
    if open_to_others(package) and all(open_to_others(p) for p in packages):
        return os.pathsep.join([str(package.parent), *map(str, packages)])
    copy = Path(tempfile.mkdtemp(prefix="python-", dir=_run_folder()))
    copy.chmod(0o755)
    ignore = shutil.ignore_patterns("__pycache__", *(f"{n}*" for n in HEAVY))
    shutil.copytree(package, copy / "acp_server", ignore=ignore)
    for folder in packages:
        shutil.copytree(folder, copy, ignore=ignore, dirs_exist_ok=True)
    for entry in [copy, *copy.rglob("*")]:
        entry.chmod(entry.stat().st_mode | stat.S_IROTH | (stat.S_IXOTH if entry.is_dir() else 0))
    return str(copy)
