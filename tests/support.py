"""What tests import by name (``from support import ...``): waiting with a deadline, the TLS
files of the ``tls_files`` fixture, a process's output lines waited for (``Lines``), a
process's memory, CPU time and threads from ``/proc``, the last values of series in a VHMS
shard, headers without their integrity stamp (``unstamped``), the source of a probe of a
process's allocators (``ALLOCATORS_PROBE``). A module of its own, not
``conftest``: a directory's own conftest would shadow the top one's name."""

from __future__ import annotations

import os
import queue
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from vhms.server import VhmsService


def unstamped(headers: dict[str, str], body: bytes) -> dict[str, str]:
    """``headers`` without the integrity stamp the receiving source added, checked first."""
    from collector_agent import STAMP_HEADER, event_checksum

    rest = dict(headers)
    assert rest.pop(STAMP_HEADER) == f"{event_checksum(body, rest):08x}"
    return rest


def wait_until(condition: Callable[[], object], timeout: float = 20.0, what: str = "condition") -> None:
    """Poll ``condition`` until it is true; fail after ``timeout`` seconds naming ``what``."""
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout} s waiting for {what}")
        time.sleep(0.02)


@dataclass(frozen=True)
class TlsFiles:
    """PEM files from a throwaway CA (trustme): a server certificate for 127.0.0.1 and
    localhost, a client certificate, and a second CA that signed neither."""

    ca: Path
    server: Path  # certificate chain and private key in one file
    client: Path
    other_ca: Path


class Lines:
    """A process's output lines, read by a thread, waited for with a deadline."""

    def __init__(self, stream: object) -> None:
        self.seen: list[str] = []
        self._queue: queue.Queue[str] = queue.Queue()
        self._thread = threading.Thread(target=self._read, args=(stream,), daemon=True)
        self._thread.start()

    def _read(self, stream: object) -> None:
        for line in stream:  # type: ignore[attr-defined]
            self._queue.put(line.rstrip("\n"))

    def until(self, predicate: Callable[[str], bool], timeout: float, what: str) -> str:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                line = self._queue.get(timeout=0.5)
            except queue.Empty:
                if not self._thread.is_alive() and self._queue.empty():
                    break  # the process ended: no line will come
                continue
            self.seen.append(line)
            if predicate(line):
                return line
        raise AssertionError(f"no {what} within {timeout} s; output so far:\n" + "\n".join(self.seen))

    def rest(self) -> list[str]:
        """Every line, once the process has ended (its output closed)."""
        self._thread.join(timeout=30)
        while not self._queue.empty():
            self.seen.append(self._queue.get())
        return self.seen


# Python source that defines ``allocators()``, for a test's child process: how many malloc
# arenas glibc's ``malloc_info`` lists (one more per thread that allocates, unless capped) and
# the backend of pyarrow's default memory pool where pyarrow is loaded (None where it is not:
# ``bookkeeper.ground.keep_freed_memory_returnable``)
ALLOCATORS_PROBE = """
import ctypes, sys

def allocators() -> dict:
    pyarrow = sys.modules.get("pyarrow")
    libc = ctypes.CDLL(None)
    libc.open_memstream.restype = ctypes.c_void_p
    text, size = ctypes.c_char_p(), ctypes.c_size_t()
    stream = ctypes.c_void_p(libc.open_memstream(ctypes.byref(text), ctypes.byref(size)))
    libc.malloc_info(0, stream)
    libc.fclose(stream)
    arenas = ctypes.string_at(text, size.value).decode().count("<heap nr=")
    pool = None if pyarrow is None else pyarrow.default_memory_pool().backend_name
    return {"arenas": arenas, "arrow_pool": pool}
"""


def vm_rss_kb(pid: int) -> int:
    """The resident set of process ``pid`` (``VmRSS`` of ``/proc/<pid>/status``), in KiB."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    raise AssertionError(f"no VmRSS for process {pid}")


def cpu_seconds(pid: int) -> float:
    """User plus system CPU time process ``pid`` has used (``/proc/<pid>/stat``)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def thread_count(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("Threads:"):
            return int(line.split()[1])
    raise AssertionError(f"no Threads for process {pid}")


def latest_values(shard: VhmsService, selector: str) -> dict[str, float]:
    """The last value of each selected series in the shard (the last ten minutes), by key."""
    now = int(time.time() * 1000)
    result = shard.store.fetch(selector, now - 600_000, now + 60_000)
    found = {}
    for key, row in zip(result.keys, result.values, strict=True):
        present = row[~np.isnan(row)]
        if len(present):
            found[key] = float(present[-1])
    return found
