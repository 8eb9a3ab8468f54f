"""Regexes that come from users (a selector's ``~`` and ``!~``, ``~name``): RE2, in time
linear in the text matched.

Python's ``re`` backtracks, holding the GIL: ``(.+)+(.+)+Z`` against one 30-character value
takes seconds, and a selector meets thousands of values. RE2 (the ``google-re2`` package)
never backtracks; its syntax is Prometheus's (https://github.com/google/re2/wiki/Syntax),
and it refuses what only backtracking can do (backreferences ``\\1``, lookaround ``(?=``
``(?!`` ``(?<=``, possessive and atomic groups): those are a :class:`SelectorError` saying
so. A regex matches the whole value, as PromQL's do.

Limits: at most :data:`MAX_REGEX_LENGTH` characters, and a compiled program of at most
:data:`MAX_PROGRAM_SIZE` instructions (``(.*a){1000}`` is 9,004; ``(\\pL|\\pN){150}``, 200,000,
is refused). Matching runs on an ``RE2::Set`` of the one regex (0.5 us a value against 2.7
through the module's ``fullmatch``: ``host~h1.*`` over 100,000 values selects in 80 ms, where
Python's ``re`` took 100); a Set answers from its DFA alone and says nothing if
that DFA cannot start, which the program bound rules out (RE2 starts a DFA when about 20
states fit: some 2 MB for 10,000 instructions, a quarter of ``_MAX_MEM``). Linear is not
free: a regex whose DFA explodes costs about 0.3 ms per 1,000-character value
(``[ab]*a[ab]{20}``), up to 50 ms with a large program (``[abcd]*a[abcd]{14}(.*){1,900}``),
so :meth:`Regex.matching` calls a ``check`` between slices of values (up to 64 while they
go quickly, one at a time when they do not), by which a caller stops a selection that runs
too long.

Memory: ``google-re2`` keeps its last 128 compiled regexes in a module cache, about 12 bytes
an instruction: 128 refused regexes of 200,000 instructions pinned 300 MB. A regex from a
user is compiled, measured and dropped, and the cache purged (nothing else in Artimon uses
``re2``), so it holds memory only while its selector lives: its program and a DFA of at
most ``_MAX_MEM``.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence

import numpy as np
import re2

from vhms.exceptions import SelectorError

__all__ = ["MAX_PROGRAM_SIZE", "MAX_REGEX_LENGTH", "Regex"]

MAX_REGEX_LENGTH = 4096
MAX_PROGRAM_SIZE = 10_000
_SLICE = 64  # values tested between two calls of ``check`` at most
_MAX_MEM = 8 << 20  # per regex: its program, and the DFA states it caches (RE2's default)
_SLOW_SLICE_S = 0.005  # a slice slower than this: the next ones go a value at a time


def _options() -> re2.Options:
    options = re2.Options()
    options.log_errors = False  # a user's bad regex is their error, not a line on our stderr
    options.never_capture = True  # only whether it matches is ever asked
    options.max_mem = _MAX_MEM
    return options


_OPTIONS = _options()


def _refusal(text: str) -> str | None:
    """Why RE2 refuses ``text`` (None: it does not), leaving nothing in the module's cache."""
    try:
        size = re2.compile(text, _OPTIONS).programsize
    except re2.error as exc:
        reason = exc.args[0].decode(errors="replace") if exc.args else "cannot compile"
        return f"{reason} (RE2 syntax: no backreferences or lookaround)"
    finally:
        re2.purge()
    if size > MAX_PROGRAM_SIZE:
        return f"it compiles to {size:,} instructions, more than {MAX_PROGRAM_SIZE:,}: simplify it"
    return None


class Regex:
    """``text`` compiled by RE2, anchored at both ends; :class:`SelectorError` when it is
    too long or RE2 cannot compile it (the message names the regex and RE2's reason)."""

    __slots__ = ("_set", "text")

    def __init__(self, text: str) -> None:
        if len(text) > MAX_REGEX_LENGTH:
            raise SelectorError(
                f"a regex is at most {MAX_REGEX_LENGTH} characters, this one has {len(text)}: "
                f"{text[:60]!r}..."
            )
        reason = _refusal(text)
        if reason is not None:
            raise SelectorError(f"bad regex {text!r}: {reason}")
        self.text = text
        self._set = re2.Set.FullMatchSet(_OPTIONS)
        self._set.Add(text)
        self._set.Compile()

    def __repr__(self) -> str:
        return f"Regex({self.text!r})"

    def fullmatch(self, value: str) -> bool:
        """Whether the whole of ``value`` matches."""
        return self._set.Match(value) is not None

    def matching(self, values: Sequence[str], check: Callable[[], None] | None = None) -> np.ndarray:
        """Whether each of ``values`` matches, as a bool array; ``check`` is called before
        each slice of values, and whatever it raises stops the matching."""
        out = np.zeros(len(values), dtype=bool)
        match = self._set.Match  # a list of the regexes matched (ours), or None
        start, size = 0, 1  # slices double while they are quick, and drop to one value when not
        while start < len(values):
            if check is not None:
                check()
            stop = min(start + size, len(values))
            began = time.perf_counter()
            out[start:stop] = [match(value) is not None for value in values[start:stop]]
            size = 1 if time.perf_counter() - began > _SLOW_SLICE_S else min(2 * size, _SLICE)
            start = stop
        return out
