"""Series selectors: which series a fetch reads.

Grammar (whitespace between tokens is free)::

    selector  := name? ( "{" matcher ( "," matcher )* ","? "}" )?
    name      := NAME                 exact name, e.g. http.requests
               | "~" REGEX            name matching REGEX (up to "{" or the end)
    matcher   := LABEL op value
    op        := "=" | "!=" | "~" | "!~"
    value     := '"' any text, \\" and \\\\ escaped '"'  |  text up to "," or "}" outside
                 brackets, parentheses and braces (so r{1,3} and (a|b) need no quotes)

Regexes are RE2's (Prometheus's syntax, linear time: :mod:`vhms.regex`) and match the
whole value (as PromQL's do). ``!=`` and ``!~`` also select series that lack the label;
``=`` and ``~`` need it. A selector with no name and no matcher selects everything; the
store's ``max_series_per_query`` still applies. A selector is at most
:data:`MAX_SELECTOR_LENGTH` characters, a regex at most ``vhms.regex.MAX_REGEX_LENGTH``.

Examples: ``memcached{dc=jb}``, ``~http\\..*{dc=jb, rack~r1.*, env!=dev}``,
``{volume="/data", host!~test-.*}``.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np

from vhms.exceptions import SelectorError
from vhms.regex import Regex

__all__ = ["MAX_SELECTOR_LENGTH", "Matcher", "Selector", "parse_selector"]

MAX_SELECTOR_LENGTH = 10_000

_LABEL_RE = re.compile(r"\s*([A-Za-z_][A-Za-z0-9_.\-]*)\s*(!=|!~|=|~)\s*")
_OPS = ("=", "!=", "~", "!~")


@dataclass(frozen=True)
class Matcher:
    label: str
    op: str
    value: str
    regex: Regex | None = field(default=None, compare=False, repr=False)

    def matches(self, candidate: str | None) -> bool:
        """Whether a series whose label is ``candidate`` (None: it lacks the label) is kept."""
        if self.op == "=":
            return candidate == self.value
        if self.op == "!=":
            return candidate != self.value
        hit = candidate is not None and self.regex is not None and self.regex.fullmatch(candidate)
        return hit if self.op == "~" else not hit

    def matching(self, values: Sequence[str], check: Callable[[], None] | None = None) -> np.ndarray:
        """:meth:`matches` for each of ``values`` (all present), as a bool array; ``check``
        is called between slices of a regex's work and stops it by raising (a deadline)."""
        if self.regex is None:
            equal = np.fromiter((value == self.value for value in values), dtype=bool, count=len(values))
            return equal if self.op == "=" else ~equal
        hits = self.regex.matching(values, check)
        return hits if self.op == "~" else ~hits


@dataclass(frozen=True)
class Selector:
    name: Matcher | None
    matchers: tuple[Matcher, ...]
    text: str = ""

    def __str__(self) -> str:
        return self.text


def _matcher(label: str, op: str, value: str, text: str, position: int) -> Matcher:
    regex = None
    if op in ("~", "!~"):
        try:
            regex = Regex(value)
        except SelectorError as exc:
            raise SelectorError(f"{exc}, at column {position + 1} of {text[:200]!r}") from None
    return Matcher(label, op, value, regex)


def _value(text: str, position: int) -> tuple[str, int]:
    if position < len(text) and text[position] == '"':
        out = []
        position += 1
        while position < len(text):
            char = text[position]
            if char == "\\" and position + 1 < len(text):
                out.append(text[position + 1])
                position += 2
                continue
            if char == '"':
                return "".join(out), position + 1
            out.append(char)
            position += 1
        raise SelectorError(f"unterminated quoted value in {text!r}")
    end = position
    depth = 0  # brackets, parentheses and braces inside a regex value (r{1,3}) do not end it
    while end < len(text) and (depth or text[end] not in ",}"):
        if text[end] in "([{":
            depth += 1
        elif text[end] in ")]}" and depth:
            depth -= 1
        end += 1
    return text[position:end].strip(), end


def parse_selector(text: str) -> Selector:
    """Parse ``text``; ``SelectorError`` says what is wrong and at which column."""
    if not isinstance(text, str):
        raise SelectorError(f"a selector is text, got {type(text).__name__}")
    if len(text) > MAX_SELECTOR_LENGTH:
        raise SelectorError(
            f"a selector is at most {MAX_SELECTOR_LENGTH} characters, this one has {len(text)}: "
            f"{text[:60]!r}..."
        )
    stripped = text.strip()
    brace = stripped.find("{")
    head = (stripped if brace < 0 else stripped[:brace]).strip()
    name = None
    if head.startswith("~"):
        name = _matcher("__name__", "~", head[1:].strip(), text, 0)
    elif head:
        if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_.:\-]*", head):
            raise SelectorError(f"{head!r} is not a variable name (use ~regex to match names) in {text!r}")
        name = Matcher("__name__", "=", head)
    matchers: list[Matcher] = []
    if brace >= 0:
        position = brace + 1
        while True:
            while position < len(stripped) and stripped[position] in " \t,":
                position += 1
            if position < len(stripped) and stripped[position] == "}":
                position += 1
                break
            match = _LABEL_RE.match(stripped, position)
            if not match:
                raise SelectorError(
                    f"expected <label><op><value> with op one of {', '.join(_OPS)} "
                    f"at column {position + 1} of {text!r}"
                )
            label, op = match.groups()
            value, position = _value(stripped, match.end())
            if not value and op in ("=", "~"):
                raise SelectorError(f"label {label!r} needs a value at column {match.end() + 1} of {text!r}")
            matchers.append(_matcher(label, op, value, text, match.end()))
            if position >= len(stripped):
                raise SelectorError(f"missing '}}' at the end of {text!r}")
        if stripped[position:].strip():
            raise SelectorError(f"unexpected {stripped[position:]!r} after '}}' in {text!r}")
    return Selector(name, tuple(matchers), stripped)
