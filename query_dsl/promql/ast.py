"""PromQL's syntax tree: what :func:`query_dsl.promql.parse` returns, immutable.

Times and durations are integer milliseconds. ``offset_ms`` is positive for the past, as
``offset 5m`` reads; ``at`` is an epoch-ms time, or ``"start"`` / ``"end"`` of the query.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

__all__ = [
    "Aggregation",
    "BinaryOp",
    "Call",
    "Expr",
    "LabelMatcher",
    "MatrixSelector",
    "NumberLiteral",
    "Paren",
    "StringLiteral",
    "Subquery",
    "Unary",
    "VectorMatching",
    "VectorSelector",
    "repeated_selectors",
    "selectors",
]


@dataclass(frozen=True)
class LabelMatcher:
    """``label op value``: op one of ``=``, ``!=``, ``=~``, ``!~``."""

    label: str
    op: str
    value: str


@dataclass(frozen=True)
class NumberLiteral:
    value: float


@dataclass(frozen=True)
class StringLiteral:
    value: str


@dataclass(frozen=True)
class VectorSelector:
    matchers: tuple[LabelMatcher, ...]
    offset_ms: int = 0
    at: int | str | None = None

    @property
    def name(self) -> str | None:
        """The metric name an ``=`` matcher on ``__name__`` gives, if any."""
        for matcher in self.matchers:
            if matcher.label == "__name__" and matcher.op == "=":
                return matcher.value
        return None


@dataclass(frozen=True)
class MatrixSelector:
    vector: VectorSelector
    range_ms: int


@dataclass(frozen=True)
class Subquery:
    expr: Expr
    range_ms: int
    step_ms: int | None  # None: the default evaluation interval (one minute)
    offset_ms: int = 0
    at: int | str | None = None


@dataclass(frozen=True)
class Call:
    name: str
    args: tuple[Expr, ...]


@dataclass(frozen=True)
class Aggregation:
    op: str
    expr: Expr
    param: Expr | None
    grouping: tuple[str, ...]
    without: bool


@dataclass(frozen=True)
class VectorMatching:
    """``on(...)`` (``on=True``) or ``ignoring(...)``, ``group_left``/``group_right``
    (``card``: ``"one-to-one"``, ``"many-to-one"``, ``"one-to-many"``) with the labels to
    include from the "one" side."""

    card: str = "one-to-one"
    labels: tuple[str, ...] = ()
    on: bool = False
    include: tuple[str, ...] = ()


@dataclass(frozen=True)
class BinaryOp:
    op: str
    lhs: Expr
    rhs: Expr
    matching: VectorMatching | None
    return_bool: bool = False


@dataclass(frozen=True)
class Unary:
    op: str
    expr: Expr


@dataclass(frozen=True)
class Paren:
    expr: Expr


Expr = (
    NumberLiteral
    | StringLiteral
    | VectorSelector
    | MatrixSelector
    | Subquery
    | Call
    | Aggregation
    | BinaryOp
    | Unary
    | Paren
)


def selectors(expr: Expr) -> Iterator[VectorSelector]:
    """Every vector selector of ``expr`` (a range selector's too), in the order written."""
    if isinstance(expr, VectorSelector):
        yield expr
    elif isinstance(expr, MatrixSelector):
        yield expr.vector
    elif isinstance(expr, Subquery | Unary | Paren):
        yield from selectors(expr.expr)
    elif isinstance(expr, Call):
        for arg in expr.args:
            yield from selectors(arg)
    elif isinstance(expr, Aggregation):
        if expr.param is not None:
            yield from selectors(expr.param)
        yield from selectors(expr.expr)
    elif isinstance(expr, BinaryOp):
        yield from selectors(expr.lhs)
        yield from selectors(expr.rhs)


def repeated_selectors(expr: Expr) -> frozenset[tuple[LabelMatcher, ...]]:
    """The matchers of the selectors ``expr`` writes more than once (read once, kept for
    every reader)."""
    seen: set[tuple[LabelMatcher, ...]] = set()
    repeated: set[tuple[LabelMatcher, ...]] = set()
    for selector in selectors(expr):
        (repeated if selector.matchers in seen else seen).add(selector.matchers)
    return frozenset(repeated)
