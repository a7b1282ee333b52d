"""Run a command under a systemd unit's seccomp settings, the way systemd applies them.

    /usr/bin/python3 unit_seccomp.py SPEC.json -- COMMAND [ARG...]

Run by Debian's /usr/bin/python3 (python3-seccomp binds libseccomp for that interpreter), never
imported by the suite. SPEC is what tests/ops/test_systemd.py parsed from the unit:

    {"allow": [...syscalls...], "errno": "EPERM",            SystemCallFilter + SystemCallErrorNumber
     "namespaces": ["user", "mnt", ...],                     RestrictNamespaces (allowed kinds)
     "families": ["AF_UNIX", ...],                           RestrictAddressFamilies (allowed)
     "user": "nobody"}                                       optional: User= (setuid before exec)

Like systemd, each setting is its own seccomp program (the kernel applies the strictest answer of
all of them), no_new_privs is set (NoNewPrivileges=true), and the command is exec'd so that it and
everything it starts inherit the filters.
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import pwd
import socket
import sys

import seccomp

# RestrictNamespaces names -> CLONE_NEW* flags (linux/sched.h).
NAMESPACE_FLAGS = {
    "cgroup": 0x02000000,
    "ipc": 0x08000000,
    "net": 0x40000000,
    "mnt": 0x00020000,
    "pid": 0x20000000,
    "user": 0x10000000,
    "uts": 0x04000000,
}
AF_MAX = 46  # the kernel's address family count (linux/socket.h)


def syscall_filter(allow: list[str], err: str) -> seccomp.SyscallFilter:
    """SystemCallFilter: an allow list; everything else fails with SystemCallErrorNumber.

    `err` "kill" is a unit without SystemCallErrorNumber: systemd kills the process (SIGSYS).
    """
    action = seccomp.KILL_PROCESS if err == "kill" else seccomp.ERRNO(getattr(errno, err))
    program = seccomp.SyscallFilter(defaction=action)
    for name in allow:
        # A name this libseccomp or architecture does not know is skipped, as systemd does.
        with contextlib.suppress(RuntimeError, ValueError):
            program.add_rule(seccomp.ALLOW, name)
    return program


def namespace_filter(allowed: list[str]) -> seccomp.SyscallFilter:
    """RestrictNamespaces: unshare/clone/setns with a forbidden CLONE_NEW* flag fail with EPERM."""
    program = seccomp.SyscallFilter(defaction=seccomp.ALLOW)
    eperm = seccomp.ERRNO(errno.EPERM)
    for kind, flag in NAMESPACE_FLAGS.items():
        if kind in allowed:
            continue
        program.add_rule(eperm, "unshare", seccomp.Arg(0, seccomp.MASKED_EQ, flag, flag))
        program.add_rule(eperm, "clone", seccomp.Arg(0, seccomp.MASKED_EQ, flag, flag))
        program.add_rule(eperm, "setns", seccomp.Arg(1, seccomp.MASKED_EQ, flag, flag))
    if set(NAMESPACE_FLAGS) - set(allowed):
        # clone3 passes its flags in a struct seccomp cannot read: systemd answers ENOSYS, so libc
        # falls back to clone, whose flags it can check; setns(fd, 0) could join any kind.
        program.add_rule(seccomp.ERRNO(errno.ENOSYS), "clone3")
        program.add_rule(eperm, "setns", seccomp.Arg(1, seccomp.EQ, 0))
    return program


def family_filter(allowed: list[str]) -> seccomp.SyscallFilter:
    """RestrictAddressFamilies: socket() of any other family fails with EAFNOSUPPORT."""
    program = seccomp.SyscallFilter(defaction=seccomp.ALLOW)
    ok = {int(getattr(socket, name)) for name in allowed}
    for family in range(AF_MAX + 1):
        if family not in ok:
            program.add_rule(seccomp.ERRNO(errno.EAFNOSUPPORT), "socket", seccomp.Arg(0, seccomp.EQ, family))
    return program


def main(argv: list[str]) -> None:
    """Load the filters from SPEC and exec the command."""
    spec_file, sep, *command = argv
    if sep != "--" or not command:
        raise SystemExit(__doc__)
    with open(spec_file) as fh:
        spec = json.load(fh)
    if spec.get("user"):
        # User=: drop to the service user first (the filters are the service's, not root's).
        account = pwd.getpwnam(spec["user"])
        os.setgroups([])
        os.setgid(account.pw_gid)
        os.setuid(account.pw_uid)
    programs = [syscall_filter(spec["allow"], spec["errno"])]
    if spec.get("namespaces") is not None:
        programs.append(namespace_filter(spec["namespaces"]))
    if spec.get("families") is not None:
        programs.append(family_filter(spec["families"]))
    # libseccomp sets no_new_privs when loading (its default), as NoNewPrivileges=true does. The
    # syscall filter goes last: once loaded, the other two loads run under it like everything else.
    for program in reversed(programs):
        program.load()
    os.execvp(command[0], command)


if __name__ == "__main__":
    main(sys.argv[1:])
