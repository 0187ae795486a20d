"""Run a command with only the named environment variables: what an editor terminal runs first.

An editor's terminal starts with the editor's own environment, and ACP's `terminal/create` can
only add variables, not remove them; so the command line given to the editor starts with this
script (`python -I -S keep_env.py NAMES -- ARGV...`, NAMES comma-separated, a name ending in `*`
keeping every variable it begins), which drops every other variable and replaces itself with
the command. Like `landlock_exec`, it imports nothing of the package.
"""

from __future__ import annotations

import os
import sys


def kept(environ: dict[str, str], names: str) -> dict[str, str]:
    """The variables of `environ` that `names` keeps."""
    wanted = [name for name in names.split(",") if name]
    exact = {name for name in wanted if not name.endswith("*")}
    prefixes = tuple(name[:-1] for name in wanted if name.endswith("*"))
    return {k: v for k, v in environ.items() if k in exact or (prefixes and k.startswith(prefixes))}


def main(argv: list[str]) -> int:
    if len(argv) < 3 or argv[1] != "--":
        sys.stderr.write("usage: keep_env.py NAME,NAME,PREFIX* -- COMMAND [ARGS...]\n")
        return 2
    try:
        os.execvpe(argv[2], argv[2:], kept(dict(os.environ), argv[0]))
    except OSError as exc:
        sys.stderr.write(f"acp-server: cannot run {argv[2]}: {exc.strerror}\n")
        return 127


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
