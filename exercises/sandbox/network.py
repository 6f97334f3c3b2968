"""Turning the network off in this process and every process it starts, without a namespace.

Where a sandbox can have a network namespace of its own (bubblewrap, unshare) it has no network
at all. Where none can be made (a container that refuses namespaces), a seccomp filter does it:
once installed it can never be removed, it is inherited by every child and kept across
``exec``, and it makes ``socket()`` refuse every address family but ``AF_UNIX`` (the pipes
between a vector env and its workers, and the runner's own socket, are Unix sockets made
before). It also refuses ``io_uring_setup`` (io_uring can open sockets of its own) and every
system call of another ABI (a 32-bit program's ``socketcall``). A refused call fails with
``PermissionError``.

Linux on x86-64 and ARM64 only, with ``PR_SET_NO_NEW_PRIVS`` (which an unprivileged process
may set). This module uses only the standard library: the sandbox's probe runs it by path.

    python network.py        # (the probe) turns the network off, then tries it; prints what happened
"""

from __future__ import annotations

import ctypes
import ctypes.util
import errno
import platform
import socket
import struct
import sys

# From <linux/filter.h>, <linux/seccomp.h>, <linux/audit.h>, <linux/prctl.h>.
_LD_W_ABS, _JEQ_K, _JGE_K, _RET_K = 0x20, 0x15, 0x35, 0x06
_ALLOW, _ERRNO = 0x7FFF0000, 0x00050000
_PR_SET_NO_NEW_PRIVS, _PR_SET_SECCOMP, _SECCOMP_MODE_FILTER = 38, 22, 2
#: machine -> (its audit arch, socket's syscall number, io_uring_setup's)
_ARCHES = {
    "x86_64": (0xC000003E, 41, 425),
    "aarch64": (0xC00000B7, 198, 425),
}
#: Syscall numbers from here up are x86-64's x32 ABI (none on ARM64).
_X32 = 0x40000000


class _Filter(ctypes.Structure):
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]


def _statement(code: int, k: int, jt: int = 0, jf: int = 0) -> bytes:
    return struct.pack("=HBBI", code, jt, jf, k)


def program() -> bytes:
    """The filter, as the kernel reads it (raises OSError on an architecture it does not know)."""
    machine = platform.machine()
    if machine not in _ARCHES:
        raise OSError(f"no filter for this machine ({machine})")
    arch, socket_nr, io_uring_nr = _ARCHES[machine]
    domain = 16 + (4 if sys.byteorder == "big" else 0)  # args[0]'s low 32 bits
    deny, allow = _statement(_RET_K, _ERRNO | errno.EACCES), _statement(_RET_K, _ALLOW)
    return b"".join(
        [
            _statement(_LD_W_ABS, 4),  # 0: the call's ABI
            _statement(_JEQ_K, arch, jt=1),  # 1: ours -> 3
            deny,  # 2
            _statement(_LD_W_ABS, 0),  # 3: the call
            _statement(_JGE_K, _X32, jf=1),  # 4: x32 -> 5, else 6
            deny,  # 5
            _statement(_JEQ_K, io_uring_nr, jf=1),  # 6: io_uring_setup -> 7, else 8
            deny,  # 7
            _statement(_JEQ_K, socket_nr, jt=1),  # 8: socket -> 10, else 9
            allow,  # 9
            _statement(_LD_W_ABS, domain),  # 10: its address family
            _statement(_JEQ_K, socket.AF_UNIX, jf=1),  # 11: AF_UNIX -> 12, else 13
            allow,  # 12
            deny,  # 13
        ]
    )


def turn_off() -> str:
    """Installs the filter in this process (for good); returns what now holds, for the log:
    ``"off (a seccomp filter)"``, or ``"on: ..."`` saying why it could not be turned off."""
    if not sys.platform.startswith("linux"):
        return f"on: no seccomp on {sys.platform}"
    try:
        code = program()
        libc = ctypes.CDLL(ctypes.util.find_library("c"), use_errno=True)
        buffer = ctypes.create_string_buffer(code, len(code))
        fprog = _Filter(len(code) // 8, ctypes.cast(buffer, ctypes.c_void_p))
        if libc.prctl(_PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
            raise OSError(ctypes.get_errno(), "prctl(PR_SET_NO_NEW_PRIVS)")
        if libc.prctl(_PR_SET_SECCOMP, _SECCOMP_MODE_FILTER, ctypes.byref(fprog), 0, 0) != 0:
            raise OSError(ctypes.get_errno(), "prctl(PR_SET_SECCOMP)")
    except (OSError, AttributeError) as error:
        return f"on: a seccomp filter could not be installed ({error})"
    return "off (a seccomp filter)"


def main() -> int:
    state = turn_off()
    if state.startswith("off"):
        try:
            socket.socket(socket.AF_INET, socket.SOCK_STREAM).close()
            state = "on: the seccomp filter let a network socket through"
        except PermissionError:
            pass
    print(state)
    return 0


if __name__ == "__main__":
    sys.exit(main())
