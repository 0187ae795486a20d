"""The unprivileged user the sandbox tests run the server as: really not root, and able to
run the package (or the tests that need it would pass without testing anything)."""

from __future__ import annotations

import subprocess

from tests.support.unprivileged import unprivileged


def test_the_test_user_is_not_root_and_can_run_the_server() -> None:
    user = unprivileged()
    home = user.folder("home")
    code = "import os, acp_server.cli, httpx; print(os.geteuid(), os.getegid())"
    done = subprocess.run(
        [user.python, "-c", code],
        env=user.env(home),
        user=user.uid,
        group=user.gid,
        extra_groups=[],
        cwd=home,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    uid, gid = map(int, done.stdout.split())
    assert uid == user.uid != 0
    assert gid == user.gid != 0
