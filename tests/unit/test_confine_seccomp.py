"""The seccomp filter of confined commands (confine/seccomp.py): its program run through a small
classic-BPF interpreter for each architecture it knows, then installed for real in a child
process that tries the sockets."""

from __future__ import annotations

import os
import struct
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from acp_server.confine import seccomp
from acp_server.confine.seccomp import ALLOW, EPERM, ERRNO, KILL_PROCESS, SYSCALLS

X86_64, I386, AARCH64, ARM = 0xC000003E, 0x40000003, 0xC00000B7, 0x40000028
DENIED = ERRNO | EPERM
AF_UNIX, AF_INET, AF_INET6, AF_NETLINK, AF_VSOCK = 1, 2, 10, 16, 40
STREAM, DGRAM, RAW, CLOEXEC = 1, 2, 3, 0o2000000
TCP, UDP, MPTCP = 6, 17, 262


def run_filter(compiled: bytes, nr: int, arch: int, *args: int) -> int:
    """What the kernel would decide: a classic BPF interpreter for the instructions the
    filter uses."""
    data = struct.pack("=iIQ6Q", nr, arch, 0, *args, *[0] * (6 - len(args)))
    program = seccomp.decode(compiled)
    acc, pc = 0, 0
    for _ in range(len(program)):  # no loops in classic BPF: each instruction once at most
        code, jt, jf, k = program[pc]
        pc += 1
        if code == seccomp.LD_W_ABS:
            (acc,) = struct.unpack_from("=I", data, k)
        elif code == seccomp.AND:
            acc &= k
        elif code in (seccomp.JEQ, seccomp.JGE, seccomp.JSET):
            taken = {seccomp.JEQ: acc == k, seccomp.JGE: acc >= k, seccomp.JSET: acc & k}[code]
            pc += jt if taken else jf
        elif code == seccomp.RET:
            return k
        else:
            raise AssertionError(f"instruction {code:#x} is not one the filter should use")
    raise AssertionError("the program ran off its end")


ARCHES = [X86_64, I386, AARCH64, ARM]


def socket_call(compiled: bytes, arch: int, *args: int) -> int:
    return run_filter(compiled, SYSCALLS[arch]["socket"], arch, *args)


@pytest.mark.parametrize("arch", ARCHES, ids=["x86_64", "i386", "aarch64", "arm"])
def test_with_the_network_off_only_tcp_is_left_for_landlock(arch: int) -> None:
    tcp_only = seccomp.program(ip="tcp", unix=False)
    assert socket_call(tcp_only, arch, AF_INET, STREAM, 0) == ALLOW
    assert socket_call(tcp_only, arch, AF_INET6, STREAM | CLOEXEC, TCP) == ALLOW
    for refused in [
        (AF_INET, STREAM, MPTCP),
        (AF_INET6, STREAM, MPTCP),
        (AF_INET, DGRAM, 0),
        (AF_INET6, DGRAM, UDP),
        (AF_INET, RAW, 1),
        (AF_UNIX, STREAM, 0),
        (AF_UNIX, DGRAM, 0),
        (AF_VSOCK, STREAM, 0),
        (AF_NETLINK, RAW, 4),  # sock_diag: the host's sockets
        (0x1_0000_0000 | AF_UNIX, STREAM, 0),  # the kernel reads the low 32 bits only
    ]:
        assert socket_call(tcp_only, arch, *refused) == DENIED, refused
    assert socket_call(tcp_only, arch, AF_NETLINK, RAW, 0) == ALLOW  # NETLINK_ROUTE
    no_ip = seccomp.program(ip="none", unix=False)
    assert socket_call(no_ip, arch, AF_INET, STREAM, 0) == DENIED


@pytest.mark.parametrize("arch", ARCHES, ids=["x86_64", "i386", "aarch64", "arm"])
def test_with_the_network_on_unix_sockets_stay_refused(arch: int) -> None:
    network = seccomp.program(ip="all", unix=False)
    for allowed in [(AF_INET, DGRAM, 0), (AF_INET6, STREAM, MPTCP), (AF_NETLINK, RAW, 4)]:
        assert socket_call(network, arch, *allowed) == ALLOW, allowed
    assert socket_call(network, arch, AF_UNIX, STREAM, 0) == DENIED
    assert socket_call(seccomp.program(ip="all", unix=True), arch, AF_UNIX, STREAM, 0) == ALLOW


@pytest.mark.parametrize("arch", ARCHES, ids=["x86_64", "i386", "aarch64", "arm"])
def test_what_else_is_refused_and_what_is_left_alone(arch: int) -> None:
    compiled, numbers = seccomp.program(ip="tcp"), SYSCALLS[arch]
    for name in ("io_uring_setup", "add_key", "request_key", "keyctl", "socketcall"):
        if name in numbers:
            assert run_filter(compiled, numbers[name], arch) == DENIED, name
    socketpair = numbers["socketpair"]
    assert run_filter(compiled, socketpair, arch, AF_UNIX, STREAM | CLOEXEC, 0) == ALLOW
    assert run_filter(compiled, socketpair, arch, AF_UNIX, DGRAM, 0) == DENIED
    ioctl = numbers["ioctl"]
    assert run_filter(compiled, ioctl, arch, 0, 0x5412, 0) == DENIED  # TIOCSTI
    assert run_filter(compiled, ioctl, arch, 0, 0x541C, 0) == DENIED  # TIOCLINUX
    assert run_filter(compiled, ioctl, arch, 0, 0x5401, 0) == ALLOW  # TCGETS
    assert run_filter(compiled, ioctl, arch, 0, 0x1_0000_5401, 0) == ALLOW
    for ordinary in (0, 1, 3, 59, 60, 231):  # read, write, close, ... on x86_64
        assert run_filter(compiled, ordinary, arch) == ALLOW


def test_x32_calls_and_unknown_architectures_get_nothing() -> None:
    compiled = seccomp.program(ip="all")
    assert run_filter(compiled, 0x40000000 | 41, X86_64, AF_UNIX, STREAM, 0) == DENIED
    assert run_filter(compiled, 0, 0xC00000F3) == KILL_PROCESS  # riscv64: unknown numbers


CHILD = textwrap.dedent(
    """
    import ctypes, errno, socket, sys
    sys.path[:0] = [sys.argv[1]]
    from acp_server.confine import launch, seccomp
    assert launch.prctl(launch.PR_SET_NO_NEW_PRIVS, 1) == 0
    launch.install(seccomp.program(ip="tcp", unix=False))
    tries = {
        "tcp": (socket.AF_INET, socket.SOCK_STREAM, 0),
        "mptcp": (socket.AF_INET, socket.SOCK_STREAM, 262),
        "udp": (socket.AF_INET, socket.SOCK_DGRAM, 0),
        "unix": (socket.AF_UNIX, socket.SOCK_STREAM, 0),
    }
    for name, args in tries.items():
        try:
            socket.socket(*args).close()
            print(name, "made")
        except OSError as exc:
            print(name, errno.errorcode[exc.errno])
    a, b = socket.socketpair()
    a.sendall(b"x")
    print("socketpair", b.recv(1).decode())
    """
)


def test_the_installed_filter_refuses_the_sockets_in_a_real_process() -> None:
    if not seccomp.works():
        pytest.skip("this kernel takes no seccomp filter (or its system calls are unknown)")
    import acp_server

    checkout = str(Path(acp_server.__file__).parent.parent)
    done = subprocess.run(
        [sys.executable, "-c", CHILD, checkout], capture_output=True, text=True, timeout=30
    )
    assert done.returncode == 0, done.stderr
    said = dict(line.split(" ", 1) for line in done.stdout.splitlines())
    assert said == {
        "tcp": "made",
        "mptcp": "EPERM",
        "udp": "EPERM",
        "unix": "EPERM",
        "socketpair": "x",
    }


def test_the_filter_is_known_to_work_only_where_its_numbers_are_right() -> None:
    """Elsewhere `sandbox.mechanism()` finds no way to keep a level and commands ask."""
    assert seccomp.machine_supported("x86_64") and seccomp.machine_supported("aarch64")
    assert not seccomp.machine_supported("riscv64") and not seccomp.machine_supported("ppc64le")
    if sys.platform.startswith("linux") and seccomp.machine_supported(os.uname().machine):
        assert seccomp.works()
