"""What keeps a confined command in, named for `doctor`'s sandbox line: per mechanism, how root
is disarmed, how the network is kept off, whether unix sockets are reachable, and what the
command's environment holds."""

from __future__ import annotations

import os

from acp_server.confine.sandbox import Level, Mechanism

# What a command's environment holds: confine/command_env.py's allowlist (issue 29, item 4).
ENVIRONMENT_POLICY = "allowlist (and the names command_env adds)"


def protections(level: Level, how: Mechanism) -> str:
    """`root ...; network ...; unix sockets ...; leftover processes ...; environment: ...`
    for a level kept by `how` on this machine."""
    network_on = level == "workspace-net"
    if how == "bubblewrap":
        root = "root without capabilities (user namespace)"
        network = "network on" if network_on else "network off (a namespace of its own)"
        unix = "unix sockets refused (seccomp)"
        ended = "leftover processes end with the command (PID namespace)"
    elif how == "landlock":
        from acp_server.confine.landlock_exec import abi

        version = abi()
        root = "root without capabilities"
        network = "network on"
        if not network_on and version >= 4:
            network = "network off (Landlock for TCP, seccomp for UDP, MPTCP, raw IP)"
        elif not network_on:
            network = f"network off (seccomp: no IP socket, as Landlock ABI {version} has no TCP)"
        unix = "unix sockets refused (seccomp" + (", Landlock scopes)" if version >= 6 else ")")
        ended = "leftover processes end with the command (PID namespace" + (
            ")" if os.geteuid() == 0 else ", where user namespaces are allowed)"
        )
    else:
        root = "root bound by the profile too"
        network = "network on" if network_on else "network off (the profile)"
        unix = "unix sockets refused but name resolution (the profile)"
        ended = "leftover processes end with their process group"
    return f"{root}; {network}; {unix}; {ended}; environment: {ENVIRONMENT_POLICY}"
