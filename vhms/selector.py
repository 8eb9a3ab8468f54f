"""Series selectors: which series a fetch reads.

Grammar (whitespace between tokens is free)::

    selector  := name? ( "{" matcher ( "," matcher )* ","? "}" )?
    name      := NAME                 exact name, e.g. http.requests
               | "~" REGEX            name matching REGEX (up to "{" or the end)
    matcher   := LABEL op value
    op        := "=" | "!=" | "~" | "!~"
    value     := '"' any text, \\" and \\\\ escaped '"'  |  text up to "," or "}"

Regexes match the whole value (as PromQL's do). ``!=`` and ``!~`` also select series that
lack the label; ``=`` and ``~`` need it. A selector with no name and no matcher selects
everything; the store's ``max_series_per_query`` still applies.

Examples: ``memcached{dc=jb}``, ``~http\\..*{dc=jb, rack~r1.*, env!=dev}``,
``{volume="/data", host!~test-.*}``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from vhms.exceptions import SelectorError

__all__ = ["Matcher", "Selector", "parse_selector"]

_LABEL_RE = re.compile(r"\s*([A-Za-z_][A-Za-z0-9_.\-]*)\s*(!=|!~|=|~)\s*")
_OPS = ("=", "!=", "~", "!~")


@dataclass(frozen=True)
class Matcher:
    label: str
    op: str
    value: str
    regex: re.Pattern[str] | None = field(default=None, compare=False, repr=False)

    def matches(self, candidate: str | None) -> bool:
        if self.op == "=":
            return candidate == self.value
        if self.op == "!=":
            return candidate != self.value
        hit = candidate is not None and self.regex is not None and self.regex.fullmatch(candidate) is not None
        return hit if self.op == "~" else not hit


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
            regex = re.compile(value)
        except re.error as exc:
            raise SelectorError(f"bad regex {value!r} at column {position + 1} of {text!r}: {exc}") from None
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
    depth = 0  # brackets and braces inside a regex value do not end it
    while end < len(text) and (depth or text[end] not in ",}"):
        if text[end] in "([":
            depth += 1
        elif text[end] in ")]" and depth:
            depth -= 1
        end += 1
    return text[position:end].strip(), end


def parse_selector(text: str) -> Selector:
    """Parse ``text``; ``SelectorError`` says what is wrong and at which column."""
    if not isinstance(text, str):
        raise SelectorError(f"a selector is text, got {type(text).__name__}")
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
