"""Regexes that come from users (a selector's ``~`` and ``!~``, ``~name``): RE2, in time
linear in the text matched.

Python's ``re`` backtracks, holding the GIL: ``(.+)+(.+)+Z`` against one 30-character value
takes seconds, and a selector meets thousands of values. RE2 (the ``google-re2`` package)
never backtracks; its syntax is Prometheus's (https://github.com/google/re2/wiki/Syntax),
and it refuses what only backtracking can do (backreferences ``\\1``, lookaround ``(?=``
``(?!`` ``(?<=``, possessive and atomic groups): those are a :class:`SelectorError` saying
so. A regex matches the whole value, as PromQL's do.

Limits: at most :data:`MAX_REGEX_LENGTH` characters; RE2's program and DFA memory stay
within its ``max_mem`` (8 MiB), a larger program is refused ("pattern too large"). Linear
is not free: a regex whose DFA explodes (``[ab]*a[ab]{20}``) costs about 0.3 ms per
1,000-character value, so :meth:`Regex.matching` calls a ``check`` between slices of
values, by which a caller stops a selection that runs too long.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np
import re2

from vhms.exceptions import SelectorError

__all__ = ["MAX_REGEX_LENGTH", "Regex"]

MAX_REGEX_LENGTH = 4096
# values tested between two calls of ``check``: at the slowest (1,000-character values, an
# exploding DFA) about 20 ms of work
_SLICE = 64
# RE2::Set matches with its DFA alone and answers "no match" without a word if that DFA
# runs out of memory, which only a very large program can make happen; larger programs go
# through RE2's full matcher, which falls back to its NFA instead
_SET_PROGRAM_LIMIT = 10_000


def _options() -> re2.Options:
    options = re2.Options()
    options.log_errors = False  # a user's bad regex is their error, not a line on our stderr
    options.never_capture = True  # only whether it matches is ever asked
    return options


_OPTIONS = _options()


class Regex:
    """``text`` compiled by RE2, anchored at both ends; :class:`SelectorError` when it is
    too long or RE2 cannot compile it (the message names the regex and RE2's reason)."""

    __slots__ = ("_compiled", "_set", "text")

    def __init__(self, text: str) -> None:
        if len(text) > MAX_REGEX_LENGTH:
            raise SelectorError(
                f"a regex is at most {MAX_REGEX_LENGTH} characters, this one has {len(text)}: "
                f"{text[:60]!r}..."
            )
        try:
            self._compiled = re2.compile(text, _OPTIONS)
        except re2.error as exc:
            reason = exc.args[0].decode(errors="replace") if exc.args else "cannot compile"
            raise SelectorError(
                f"bad regex {text!r}: {reason} (RE2 syntax: no backreferences or lookaround)"
            ) from None
        self.text = text
        self._set: re2.Set | None = None
        if self._compiled.programsize <= _SET_PROGRAM_LIMIT:
            whole = re2.Set.FullMatchSet(_OPTIONS)  # 0.5 us a value, against 2.7 through fullmatch
            whole.Add(text)
            whole.Compile()
            self._set = whole

    def __repr__(self) -> str:
        return f"Regex({self.text!r})"

    def fullmatch(self, value: str) -> bool:
        """Whether the whole of ``value`` matches."""
        if self._set is not None:
            return bool(self._set.Match(value))
        return self._compiled.fullmatch(value) is not None

    def matching(self, values: Sequence[str], check: Callable[[], None] | None = None) -> np.ndarray:
        """Whether each of ``values`` matches, as a bool array; ``check`` is called before
        each slice of values, and whatever it raises stops the matching."""
        out = np.zeros(len(values), dtype=bool)
        one = self.fullmatch
        for start in range(0, len(values), _SLICE):
            if check is not None:
                check()
            stop = min(start + _SLICE, len(values))
            out[start:stop] = [one(value) for value in values[start:stop]]
        return out
