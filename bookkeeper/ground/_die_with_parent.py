"""``python -I -S _die_with_parent.py <parent pid> <program> [args...]``: ask Linux to
SIGKILL this process when its parent dies (``prctl(PR_SET_PDEATHSIG, SIGKILL)``), then
become ``program`` (``execv``; the setting survives it).

Run as a script, not imported: it needs nothing but the standard library, and doing this
in the child itself rather than in a ``preexec_fn`` runs no Python code between ``fork``
and ``exec`` of a multi-threaded parent. If the parent died before ``prctl`` took effect,
the parent PID has changed already: exit instead of running orphaned.
"""

import ctypes
import os
import signal
import sys

PR_SET_PDEATHSIG = 1


def main() -> None:
    parent, program = int(sys.argv[1]), sys.argv[2:]
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0) != 0:
        errno = ctypes.get_errno()
        sys.exit(f"prctl(PR_SET_PDEATHSIG) failed: {os.strerror(errno)}")
    if os.getppid() != parent:
        sys.exit(f"parent {parent} exited before {program[0]} started")
    os.execv(program[0], program)


if __name__ == "__main__":
    main()
