"""Version-control folders stay read-only in a writable root (`.git`, `.hg`, `.jj`).

What is in them decides what the user's own version control runs: git's hooks, its settings
(`core.fsmonitor`, filters, the pager), Mercurial's `[hooks]`. A command confined to the
project must not be able to plant one there for the user's next `git commit`, so in every
writable root the control folder (or a worktree's `.git` file, and the folder it points to when
that lies in a writable root too) is bound read-only again above the root's writable bind. A
command that must commit, fetch or change the repository's settings fails with a read-only
error and asks to run outside the sandbox.

bubblewrap and sandbox-exec express this directly. Landlock cannot: its rules only ever add
rights, a right granted on a root holds in every folder below it, `.git` included, and creating
and writing a new file at the top of the project needs exactly those rights on the root
(MAKE_REG, WRITE_FILE, REMOVE_FILE for a rename over a file: all `git config` needs to replace
`.git/config`). So the Landlock launcher first binds the control folders read-only in a mount
namespace of its own (`landlock_exec.read_only_binds`; a user namespace too when not root), then
applies Landlock, which forbids unmounting them. Where the kernel refuses such a namespace (a
container without the right, user namespaces turned off) the folders stay writable there, and
the agent's own git (`own_git`) is what keeps a repository from running anything through it.
"""

from __future__ import annotations

from pathlib import Path

CONTROL_FOLDERS = (".git", ".hg", ".jj")


def protected(roots: tuple[Path, ...]) -> list[Path]:
    """The control folders and files in `roots` to keep read-only (those that exist now)."""
    found: list[Path] = []

    def keep(path: Path) -> None:
        if path not in found and any(path == r or path.is_relative_to(r) for r in roots):
            found.append(path)

    for root in roots:
        for name in CONTROL_FOLDERS:
            entry = root / name
            if entry.is_symlink():  # bound where it leads: a mount follows the link
                keep(entry.resolve())
            elif entry.is_dir():
                keep(entry)
            elif entry.is_file() and name == ".git":  # a worktree's or a submodule's pointer
                keep(entry)
                for target in _pointed_to(entry):
                    keep(target)
    # One bind covers what lies below it (a worktree's folder inside the main `.git`).
    return [p for p in found if not any(p != q and p.is_relative_to(q) for q in found)]


def _pointed_to(pointer: Path) -> list[Path]:
    """The git folder a `.git` file names (`gitdir: ...`), and the common folder it shares
    with the main worktree (its `commondir`), where they exist."""
    try:
        text = pointer.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return []
    first = text.splitlines()[0] if text else ""
    if not first.startswith("gitdir:"):
        return []
    gitdir = (pointer.parent / first.removeprefix("gitdir:").strip()).resolve()
    found = [gitdir] if gitdir.is_dir() else []
    try:
        common = (gitdir / "commondir").read_text(encoding="utf-8", errors="replace").strip()
    except OSError:
        return found
    if common:
        folder = (gitdir / common).resolve()
        if folder.is_dir():
            found.append(folder)
    return found


def bwrap_args(roots: tuple[Path, ...]) -> list[str]:
    """bubblewrap arguments binding each control folder read-only (after the roots' binds).
    A mount point cannot be renamed or removed either: `mv .git x` fails too."""
    args: list[str] = []
    for path in protected(roots):
        args += ["--ro-bind", str(path), str(path)]
    return args


def seatbelt_rules(roots: tuple[Path, ...]) -> list[str]:
    """sandbox-exec rules refusing writes in each control folder (a later rule wins)."""
    return [f'(deny file-write* (subpath "{path}"))' for path in protected(roots)]
