"""A small seccomp filter for sandbox workers: no exec, no sockets, no new namespaces.

The filter is a classic BPF program installed with `prctl(PR_SET_SECCOMP)` after
`PR_SET_NO_NEW_PRIVS`, so it needs no privilege and binds root and non-root alike; it is inherited
by every child and cannot be removed. It makes these system calls fail with EPERM:

- `execve`, `execveat`: no other program can ever start (so `os.system`, `subprocess` and
  `_posixsubprocess.fork_exec` fail in the kernel, whatever Python-level tricks got there);
- `socket`, `socketpair`, `io_uring_setup`: no network, even where a network namespace is not
  available (io_uring can open sockets without the `socket` call);
- `unshare`, `setns`, `mount`, `umount2`, `pivot_root`, `chroot`, `ptrace`, `process_vm_writev`,
  `bpf`, `perf_event_open`, `kexec_load`, and `clone` with any namespace flag;
- `clone3` gets ENOSYS (its flags live in memory a filter cannot read) so the C library falls back
  to `clone`, whose flags the filter checks.

A system call of a foreign architecture (or the x32 ABI) kills the process.
"""

from __future__ import annotations

import ctypes
import errno
import platform
import struct

PR_SET_NO_NEW_PRIVS = 38
PR_SET_SECCOMP = 22
SECCOMP_MODE_FILTER = 2

_LD_ABS_W = 0x20  # BPF_LD | BPF_W | BPF_ABS
_JEQ_K = 0x15  # BPF_JMP | BPF_JEQ | BPF_K
_JGE_K = 0x35  # BPF_JMP | BPF_JGE | BPF_K
_JSET_K = 0x45  # BPF_JMP | BPF_JSET | BPF_K
_RET_K = 0x06  # BPF_RET | BPF_K

_RET_ALLOW = 0x7FFF0000
_RET_KILL_PROCESS = 0x80000000
_RET_ERRNO = 0x00050000

# offsets in struct seccomp_data
_NR, _ARCH, _ARG0_LO = 0, 4, 16

# Every CLONE_NEW* flag clone() accepts: NEWNS, NEWCGROUP, NEWUTS, NEWIPC, NEWUSER,
# NEWPID, NEWNET.
_CLONE_NS_FLAGS = 0x00020000 | 0x02000000 | 0x04000000 | 0x08000000 | 0x10000000 | 0x20000000 | 0x40000000

_ARCHES: dict[str, tuple[int, dict[str, int]]] = {
    "x86_64": (
        0xC000003E,
        {
            "execve": 59,
            "execveat": 322,
            "socket": 41,
            "socketpair": 53,
            "io_uring_setup": 425,
            "unshare": 272,
            "setns": 308,
            "mount": 165,
            "umount2": 166,
            "pivot_root": 155,
            "chroot": 161,
            "ptrace": 101,
            "process_vm_writev": 311,
            "bpf": 321,
            "perf_event_open": 298,
            "kexec_load": 246,
            "clone": 56,
            "clone3": 435,
        },
    ),
    "aarch64": (
        0xC00000B7,
        {
            "execve": 221,
            "execveat": 281,
            "socket": 198,
            "socketpair": 199,
            "io_uring_setup": 425,
            "unshare": 97,
            "setns": 268,
            "mount": 40,
            "umount2": 39,
            "pivot_root": 41,
            "chroot": 51,
            "ptrace": 117,
            "process_vm_writev": 271,
            "bpf": 280,
            "perf_event_open": 241,
            "kexec_load": 104,
            "clone": 220,
            "clone3": 435,
        },
    ),
}
_ARCHES["arm64"] = _ARCHES["aarch64"]


def _ins(code: int, jt: int, jf: int, k: int) -> bytes:
    return struct.pack("HBBI", code, jt, jf, k & 0xFFFFFFFF)


def build_filter(machine: str | None = None) -> bytes:
    """The BPF program for this machine's architecture (raises OSError if unsupported)."""
    machine = machine or platform.machine()
    if machine not in _ARCHES:
        raise OSError(f"no seccomp syscall table for architecture {machine!r}")
    arch, nrs = _ARCHES[machine]
    eperm = _RET_ERRNO | errno.EPERM
    denied = [nrs[name] for name in nrs if name not in ("clone", "clone3")]
    prog = [
        _ins(_LD_ABS_W, 0, 0, _ARCH),
        _ins(_JEQ_K, 1, 0, arch),
        _ins(_RET_K, 0, 0, _RET_KILL_PROCESS),
        _ins(_LD_ABS_W, 0, 0, _NR),
        # x32 system calls on x86_64 carry bit 30; nothing here uses them.
        _ins(_JGE_K, 0, 1, 0x40000000),
        _ins(_RET_K, 0, 0, _RET_KILL_PROCESS),
        _ins(_JEQ_K, 0, 1, nrs["clone3"]),
        _ins(_RET_K, 0, 0, _RET_ERRNO | errno.ENOSYS),
    ]
    for nr in denied:
        prog += [_ins(_JEQ_K, 0, 1, nr), _ins(_RET_K, 0, 0, eperm)]
    prog += [
        _ins(_JEQ_K, 0, 3, nrs["clone"]),
        _ins(_LD_ABS_W, 0, 0, _ARG0_LO),  # clone flags (low 32 bits: all namespace flags are there)
        _ins(_JSET_K, 0, 1, _CLONE_NS_FLAGS),
        _ins(_RET_K, 0, 0, eperm),
        _ins(_RET_K, 0, 0, _RET_ALLOW),
    ]
    return b"".join(prog)


class _SockFprog(ctypes.Structure):
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]


def install(libc: ctypes.CDLL) -> None:
    """Set no-new-privileges and install the filter on the calling process (raises OSError)."""
    program = build_filter()
    buf = ctypes.create_string_buffer(program, len(program))
    fprog = _SockFprog(len(program) // 8, ctypes.addressof(buf))
    if libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"prctl(PR_SET_NO_NEW_PRIVS) failed: {errno.errorcode.get(err, err)}")
    if libc.prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, ctypes.byref(fprog), 0, 0) != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"prctl(PR_SET_SECCOMP) failed: {errno.errorcode.get(err, err)}")
