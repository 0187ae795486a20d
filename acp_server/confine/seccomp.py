"""The seccomp filter of confined commands: what Landlock and bubblewrap cannot say about
sockets and a few kernel interfaces, said as a classic BPF program the kernel runs at each
system call.

Standard library only, and nothing of the package: the Landlock launcher (`landlock_exec`,
run as `python -I -S`) loads this file by its path; bubblewrap gets the compiled program
through a file descriptor (`--seccomp FD`, see `sandbox._bwrap`).

What the filter refuses (errno EPERM, never a kill, so a program sees an ordinary failure):
- `socket()` of AF_UNIX: no new unix socket, so no connection to the pathname or abstract
  sockets of the host (docker.sock, D-Bus, the user's ssh-agent, X11). `socketpair()` stays
  allowed (shells, Python, git and libuv use it between their own processes), except of
  datagrams: a datagram pair can still `sendto` a pathname socket.
- IP sockets as the level says (`ip`): "all"; "tcp" (stream sockets of TCP only: Landlock then
  refuses their bind and connect; UDP, raw, SCTP and MPTCP, which Landlock does not see, are
  refused); "none" (no IP socket at all: the kernel's Landlock cannot refuse TCP).
- netlink but NETLINK_ROUTE (what libc reads interfaces with) unless `ip` is "all"; every
  other family (vsock to a hypervisor, bluetooth, packet, ...).
- `io_uring_setup` (its requests open and connect sockets without passing through the
  socket() system call this filter sees); `socketcall` of 32-bit programs, whose arguments
  a filter cannot read.
- the kernel keyrings (`add_key`, `request_key`, `keyctl`): the user's session keyring can
  hold credentials (Kerberos tickets, fscrypt keys).
- `ioctl` TIOCSTI and TIOCLINUX: typing into a terminal as if the user had.

Calls of an architecture the filter does not know (neither x86_64 nor aarch64, nor their
32-bit and x32 forms) kill the process: nothing of them could be checked.
"""

from __future__ import annotations

import struct
import sys

# struct seccomp_data: int nr; u32 arch; u64 instruction_pointer; u64 args[6] (native order).
NR, ARCH = 0, 4
LOW = 0 if sys.byteorder == "little" else 4  # where an argument's low 32 bits lie


def arg(index: int) -> int:
    """The offset of argument `index`'s low 32 bits (the kernel reads these as ints)."""
    return 16 + 8 * index + LOW


# Classic BPF opcodes: load a word, jump if equal / greater or equal / any bit set, return.
LD_W_ABS, JEQ, JGE, JSET, AND, RET = 0x20, 0x15, 0x35, 0x45, 0x54, 0x06
ALLOW, KILL_PROCESS, ERRNO = 0x7FFF0000, 0x80000000, 0x00050000
EPERM, EFAULT = 1, 14
PR_SET_SECCOMP, SECCOMP_MODE_FILTER = 22, 2
AF_UNIX, AF_INET, AF_INET6, AF_NETLINK = 1, 2, 10, 16
SOCK_STREAM, SOCK_DGRAM, SOCK_TYPE_MASK = 1, 2, 0xF
IPPROTO_IP, IPPROTO_TCP, NETLINK_ROUTE = 0, 6, 0
TIOCSTI, TIOCLINUX = 0x5412, 0x541C
X32_BIT = 0x40000000

# Per architecture (AUDIT_ARCH_*): the system calls the filter looks at. Numbers from the
# kernel's tables: arch/x86/entry/syscalls/syscall_{64,32}.tbl, include/uapi/asm-generic/
# unistd.h (aarch64), arch/arm/tools/syscall.tbl.
SYSCALLS: dict[int, dict[str, int]] = {
    0xC000003E: {"socket": 41, "socketpair": 53, "ioctl": 16, "io_uring_setup": 425,
                 "add_key": 248, "request_key": 249, "keyctl": 250},  # x86_64
    0x40000003: {"socket": 359, "socketpair": 360, "ioctl": 54, "io_uring_setup": 425,
                 "add_key": 286, "request_key": 287, "keyctl": 288, "socketcall": 102},  # i386
    0xC00000B7: {"socket": 198, "socketpair": 199, "ioctl": 29, "io_uring_setup": 425,
                 "add_key": 217, "request_key": 218, "keyctl": 219},  # aarch64
    0x40000028: {"socket": 281, "socketpair": 288, "ioctl": 54, "io_uring_setup": 425,
                 "add_key": 309, "request_key": 310, "keyctl": 311, "socketcall": 102},  # arm
}  # fmt: skip
REFUSED = ("io_uring_setup", "add_key", "request_key", "keyctl", "socketcall")
MACHINES = ("x86_64", "amd64", "aarch64", "arm64")  # where the filter knows the numbers

Op = tuple[int, int, object, object]  # code, k, jump-if-true label, jump-if-false label


def _arch_block(arch: int, numbers: dict[str, int]) -> list[Op | str]:
    ops: list[Op | str] = [f"arch{arch}", (LD_W_ABS, NR, None, None)]
    if arch == 0xC000003E:
        ops.append((JGE, X32_BIT, "deny", None))  # x32 calls: socket() at another number
    for name in REFUSED:
        if name in numbers:
            ops.append((JEQ, numbers[name], "deny", None))
    ops += [
        (JEQ, numbers["socket"], "socket", None),
        (JEQ, numbers["socketpair"], "socketpair", None),
        (JEQ, numbers["ioctl"], "ioctl", "allow"),
    ]
    return ops


def _socket_block(ip: str, unix: bool) -> list[Op | str]:
    ip_target = {"all": "allow", "tcp": "tcp", "none": "deny"}[ip]
    netlink_target = "allow" if ip == "all" else "netlink"
    return [
        "socket",
        (LD_W_ABS, arg(0), None, None),
        (JEQ, AF_UNIX, "allow" if unix else "deny", None),
        (JEQ, AF_INET, ip_target, None),
        (JEQ, AF_INET6, ip_target, None),
        (JEQ, AF_NETLINK, netlink_target, "deny"),
        "tcp",
        (LD_W_ABS, arg(1), None, None),
        (AND, SOCK_TYPE_MASK, None, None),
        (JEQ, SOCK_STREAM, None, "deny"),
        (LD_W_ABS, arg(2), None, None),
        (JEQ, IPPROTO_IP, "allow", None),
        (JEQ, IPPROTO_TCP, "allow", "deny"),
        "netlink",
        (LD_W_ABS, arg(2), None, None),
        (JEQ, NETLINK_ROUTE, "allow", "deny"),
        "socketpair",
        (LD_W_ABS, arg(1), None, None),
        (AND, SOCK_TYPE_MASK, None, None),
        (JEQ, SOCK_DGRAM, "deny", "allow"),
        "ioctl",
        (LD_W_ABS, arg(1), None, None),
        (JEQ, TIOCSTI, "deny", None),
        (JEQ, TIOCLINUX, "deny", "allow"),
        "deny",
        (RET, ERRNO | EPERM, None, None),
        "allow",
        (RET, ALLOW, None, None),
    ]


def program(ip: str = "all", unix: bool = False) -> bytes:
    """The filter as the kernel takes it (an array of struct sock_filter): `ip` is "all",
    "tcp" or "none" (see the module's doc); `unix`: whether AF_UNIX sockets may be made."""
    ops: list[Op | str] = [(LD_W_ABS, ARCH, None, None)]
    for arch in SYSCALLS:
        ops.append((JEQ, arch, f"arch{arch}", None))
    ops.append((RET, KILL_PROCESS, None, None))
    for arch, numbers in SYSCALLS.items():
        ops += _arch_block(arch, numbers)
    ops += _socket_block(ip, unix)
    return _assemble(ops)


def _assemble(ops: list[Op | str]) -> bytes:
    """Instructions with labels -> bytes; a jump's offset counts from the next instruction."""
    where: dict[str, int] = {}
    code: list[Op] = []
    for op in ops:
        if isinstance(op, str):
            where[op] = len(code)
        else:
            code.append(op)
    out = bytearray()
    for index, (opcode, k, if_true, if_false) in enumerate(code):
        jt = where[if_true] - index - 1 if isinstance(if_true, str) else 0
        jf = where[if_false] - index - 1 if isinstance(if_false, str) else 0
        if not (0 <= jt < 256 and 0 <= jf < 256):
            raise ValueError("seccomp program: a jump is out of reach")
        out += struct.pack("=HBBI", opcode, jt, jf, k)
    return bytes(out)


def decode(compiled: bytes) -> list[tuple[int, int, int, int]]:
    """The program's instructions as (code, jt, jf, k): for tests and for reading it."""
    return [struct.unpack_from("=HBBI", compiled, at) for at in range(0, len(compiled), 8)]


def machine_supported(machine: str) -> bool:
    """Whether the filter knows this machine's system call numbers (`os.uname().machine`)."""
    return machine.lower() in MACHINES


def works() -> bool:
    """Whether this kernel takes seccomp filters and the filter knows its system calls: a
    filter given as a null pointer is refused with EFAULT where filters exist (and nothing is
    installed), EINVAL where they do not."""
    import ctypes
    import os

    if not sys.platform.startswith("linux") or not machine_supported(os.uname().machine):
        return False
    libc = ctypes.CDLL(None, use_errno=True)
    zero = ctypes.c_ulong(0)
    libc.prctl(PR_SET_SECCOMP, ctypes.c_ulong(SECCOMP_MODE_FILTER), zero, zero, zero)
    return ctypes.get_errno() == EFAULT


_SEALED: dict[tuple[int, bytes], str] = {}  # (this process's id, filter) -> its sealed copy


def sealed_copy(compiled: bytes) -> str:
    """A path to read `compiled` from: a sealed memory file this process holds open (made once
    per filter), reached through /proc as long as it runs, and which nothing can change."""
    import fcntl
    import os

    key = (os.getpid(), compiled)
    if key not in _SEALED:
        fd = os.memfd_create("acp-server-seccomp", os.MFD_CLOEXEC | os.MFD_ALLOW_SEALING)
        os.write(fd, compiled)
        seals = fcntl.F_SEAL_SEAL | fcntl.F_SEAL_SHRINK | fcntl.F_SEAL_GROW | fcntl.F_SEAL_WRITE
        fcntl.fcntl(fd, fcntl.F_ADD_SEALS, seals)
        _SEALED[key] = f"/proc/{key[0]}/fd/{fd}"
    return _SEALED[key]
