"""Freed memory back to the kernel (``bookkeeper.ground.release_freed_memory``): a heap left
full of holes by transient work shrinks in resident memory once asked, in a process of its
own (so that no other test's heap is read)."""

from __future__ import annotations

import subprocess
import sys

PROGRAM = """
from pathlib import Path
from bookkeeper.ground import release_freed_memory

def anonymous() -> int:
    status = Path("/proc/self/status").read_text().splitlines()
    return next(int(line.split()[1]) for line in status if line.startswith("RssAnon")) * 1024

before = anonymous()
held = [bytes(1000) + bytes([i % 7]) for i in range(200_000)]  # malloc's, not pymalloc's
kept = held[::50]  # one in 50 survives: the heap is holes, its top is not free
del held
freed = anonymous()
release_freed_memory()
print(freed - before, anonymous() - before)
"""


def test_memory_freed_among_live_objects_goes_back_to_the_kernel() -> None:
    done = subprocess.run(
        [sys.executable, "-c", PROGRAM], capture_output=True, text=True, timeout=120, check=True
    )
    held, after = (int(field) for field in done.stdout.split())
    assert held > 150 << 20  # the 200K buffers of 1 KB stayed resident when freed
    assert after < held / 4
