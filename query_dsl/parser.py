"""Text to syntax tree, with lark (grammar in ``grammar.lark``); never ``eval``.

The tree is made of the small frozen dataclasses below; :mod:`query_dsl.evaluator` walks
it. Parse errors raise ``QuerySyntaxError`` with the line and column and what was expected.

Limits, each a ``QuerySyntaxError``: a query is at most :data:`MAX_QUERY_LENGTH` characters
and nests at most :data:`MAX_DEPTH` deep (operators, calls, pipes, lists, unary minus: the
evaluator walks the tree recursively, and ``1+1+...+1`` with 3,000 terms is a tree 3,000
deep); a duration is at most :data:`MAX_DURATION_MS` (100 years).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any

from lark import Lark, Token, Transformer, v_args
from lark.exceptions import UnexpectedCharacters, UnexpectedEOF, UnexpectedInput, UnexpectedToken, VisitError

from bookkeeper.ground import parse_duration as ground_parse_duration
from query_dsl.exceptions import QuerySyntaxError

__all__ = [
    "MAX_DEPTH",
    "MAX_DURATION_MS",
    "MAX_QUERY_LENGTH",
    "BinaryOp",
    "Call",
    "Duration",
    "Matching",
    "Negate",
    "Node",
    "Word",
    "parse",
    "parse_duration",
]

MAX_QUERY_LENGTH = 10_000
MAX_DEPTH = 100
MAX_DURATION_MS = 36_525 * 86_400_000  # 100 years of 365.25 days


def parse_duration(text: str) -> int:
    """A duration as the language writes it (``500ms 30s 10m 2h 1d 1w``, Prometheus's syntax:
    :func:`bookkeeper.ground.parse_duration`) in milliseconds; ``QuerySyntaxError`` for
    anything else, or longer than 100 years."""
    try:
        ms = ground_parse_duration(text)
    except ValueError:
        raise QuerySyntaxError(f"{text!r} is not a duration like 500ms, 30s, 10m, 2h, 1d or 1w") from None
    if ms > MAX_DURATION_MS:
        raise QuerySyntaxError(f"duration {text} is longer than 100 years ({MAX_DURATION_MS} ms)")
    return ms


@dataclass(frozen=True)
class Duration:
    ms: int


@dataclass(frozen=True)
class Word:
    name: str


@dataclass(frozen=True)
class Matching:
    as_bool: bool = False
    kind: str | None = None  # "on" | "ignoring"
    labels: tuple[str, ...] = ()
    group: str | None = None  # "left" | "right"


@dataclass(frozen=True)
class BinaryOp:
    op: str
    left: Any
    right: Any
    matching: Matching = field(default_factory=Matching)


@dataclass(frozen=True)
class Negate:
    operand: Any


@dataclass(frozen=True)
class Call:
    name: str
    args: tuple[Any, ...]
    kwargs: tuple[tuple[str, Any], ...]
    line: int = 0
    column: int = 0


Node = Any


@v_args(inline=True)
class _ToTree(Transformer[Token, Node]):
    def number(self, token: Token) -> float:
        return float(token)

    def duration(self, token: Token) -> Duration:
        return Duration(parse_duration(str(token)))

    def string(self, token: Token) -> str:
        body = str(token)[1:-1]
        return body.encode("utf-8").decode("unicode_escape") if "\\" in body else body

    def word(self, token: Token) -> Word:
        return Word(str(token))

    def list(self, *items: Node) -> list[Node]:
        return [item for item in items if item is not None]

    def keyword(self, name: Token, value: Node) -> tuple[str, Node]:
        return ("=kw", str(name), value)  # type: ignore[return-value]

    def call(self, name: Token, *args: Node) -> Call:
        positional, keywords = [], []
        for arg in args:
            if arg is None:
                continue
            if isinstance(arg, tuple) and len(arg) == 3 and arg[0] == "=kw":
                keywords.append((arg[1], arg[2]))
            elif keywords:
                raise QuerySyntaxError(
                    f"positional argument after keyword arguments in {name}(...) at line {name.line}, "
                    f"column {name.column}",
                    name.line or 0,
                    name.column or 0,
                )
            else:
                positional.append(arg)
        return Call(str(name), tuple(positional), tuple(keywords), name.line or 0, name.column or 0)

    def matching(self, *parts: Token | None) -> Matching:
        as_bool, kind, labels, group = False, None, [], None
        for part in parts:
            if part is None:
                continue
            if part.type == "BOOL":
                as_bool = True
            elif part.type == "MATCH_KIND":
                kind = str(part)
            elif part.type == "GROUP":
                group = "left" if str(part) == "group_left" else "right"
            elif part.type == "NAME":
                labels.append(str(part))
        return Matching(as_bool, kind, tuple(labels), group)

    def negate(self, _minus: Token, operand: Node) -> Negate:
        return Negate(operand)

    def pipe(self, head: Node, *calls: Call) -> Node:
        for call in calls:
            head = Call(call.name, (head, *call.args), call.kwargs, call.line, call.column)
        return head

    def _binary(self, first: Node, *rest: Any) -> Node:
        node = first
        for index in range(0, len(rest), 3):
            op, matching, right = rest[index : index + 3]
            node = BinaryOp(str(op), node, right, matching)
        return node

    or_expr = and_expr = cmp_expr = add_expr = mul_expr = pow_expr = _binary


def _children(node: Node) -> tuple[Any, ...]:
    if isinstance(node, BinaryOp):
        return (node.left, node.right)
    if isinstance(node, Negate):
        return (node.operand,)
    if isinstance(node, Call):
        return (*node.args, *(value for _, value in node.kwargs))
    if isinstance(node, list):
        return tuple(node)
    return ()


def _depth(node: Node) -> int:
    """How deep the tree nests (a leaf is 1), walked without recursion: the tree may be the
    deep one this is asked to refuse."""
    deepest = 0
    stack = [(node, 1)]
    while stack:
        current, level = stack.pop()
        deepest = max(deepest, level)
        stack.extend((child, level + 1) for child in _children(current))
    return deepest


@lru_cache(maxsize=1)
def _parser() -> Lark:
    return Lark(
        Path(__file__).with_name("grammar.lark").read_text(),
        parser="lalr",
        maybe_placeholders=True,
        propagate_positions=False,
    )


@lru_cache(maxsize=1024)
def parse(text: str) -> Node:
    """Parse a query; ``QuerySyntaxError`` (line, column, expectation) if it is not one."""
    if not isinstance(text, str):
        raise QuerySyntaxError(f"a query is text, got {type(text).__name__}")
    if len(text) > MAX_QUERY_LENGTH:
        raise QuerySyntaxError(f"a query is at most {MAX_QUERY_LENGTH} characters, this one has {len(text)}")
    if not text.strip():
        raise QuerySyntaxError("the query is empty", 1, 1)
    try:
        tree = _parser().parse(text)
        node = _ToTree().transform(tree)
    except VisitError as exc:
        if isinstance(exc.orig_exc, QuerySyntaxError):
            raise exc.orig_exc from None
        if isinstance(exc.orig_exc, RecursionError):
            raise _too_deep() from None
        raise QuerySyntaxError(f"cannot read the query: {exc.orig_exc}") from None
    except (UnexpectedCharacters, UnexpectedToken, UnexpectedEOF, UnexpectedInput) as exc:
        line = getattr(exc, "line", 0) or 0
        column = getattr(exc, "column", 0) or 0
        expected = _described(getattr(exc, "expected", None) or getattr(exc, "allowed", None) or ())
        hint = f"; expected {' or '.join(expected)}" if expected else ""
        token = getattr(exc, "token", None)
        what = "the query ends too early" if token is not None and token.type == "$END" else "syntax error"
        raise QuerySyntaxError(
            f"{what} at line {line}, column {column}{hint}\n{_pointed(text, line, column)}", line, column
        ) from None
    except RecursionError:
        raise _too_deep() from None
    levels = _depth(node)
    if levels > MAX_DEPTH:
        raise _too_deep(levels)
    return node


# what a terminal of the grammar is called in an error: its own text, or these words
_TERMINAL_WORDS = {
    "NAME": "a name",
    "STRING": "a string",
    "NUMBER": "a number",
    "DURATION": "a duration (such as 5m)",
    "CMP_OP": "a comparison (== != > < >= <=)",
    "MUL_OP": "* or / or %",
    "AND_OP": "and or unless",
    "MATCH_KIND": "on or ignoring",
    "GROUP": "group_left or group_right",
    "$END": "the end of the query",
}
_CONTEXT_WIDTH = 120


def _described(names: Any) -> list[str]:
    """The expected terminals in words, ``","`` rather than ``COMMA``."""
    literal = {t.name: t.pattern.value for t in _parser().terminals if t.pattern.type == "str"}
    words = {
        _TERMINAL_WORDS.get(name) or (f"'{literal[name]}'" if name in literal else name) for name in names
    }
    return sorted(words)


def _pointed(text: str, line: int, column: int) -> str:
    """The line of the error (up to 120 characters around the column) and a caret under it."""
    if line < 1:
        return ""
    source = text.split("\n")[line - 1] if line <= text.count("\n") + 1 else ""
    start = max(0, min(column - 1 - _CONTEXT_WIDTH // 2, len(source) - _CONTEXT_WIDTH))
    shown = source[start : start + _CONTEXT_WIDTH]
    return f"{shown}\n{' ' * (column - 1 - start)}^"


def _too_deep(levels: int | None = None) -> QuerySyntaxError:
    found = f"{levels} levels deep" if levels is not None else "too deeply"
    return QuerySyntaxError(
        f"the query nests {found}, at most {MAX_DEPTH} levels (operators, calls, pipes and "
        "lists each nest one: sum many series with reduce, not a chain of +)"
    )
