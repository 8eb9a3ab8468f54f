"""Operators between numbers only (``1 * 2 + 4 / 6 - (10 % 7) ^ 2``), evaluated once per
expression and number of evaluation times: each of their nodes costs the engine a value per
evaluation time, a step of its walk and a settling of the budget (about 10 us a node), so
the nine nodes of that one cost a small query more than its selector. The value is the one
the engine's walk made the first time (the same operators over arrays of the same length:
bit for bit what it makes again), kept for the expression object the parser answers for its
text (``parse`` remembers it), at most ``KEPT`` of them.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from query_dsl.promql.ast import BinaryOp, Expr, NumberLiteral, Paren, Unary
from query_dsl.promql.values import Scalar, Value

__all__ = ["KEPT", "constant", "folded"]

KEPT = 256
_VALUES: dict[int, tuple[BinaryOp, int, np.ndarray]] = {}


def constant(expr: Expr) -> bool:
    """Whether ``expr`` is numbers and operators between them only."""
    while isinstance(expr, Paren | Unary):
        expr = expr.expr
    if isinstance(expr, NumberLiteral):
        return True
    return isinstance(expr, BinaryOp) and constant(expr.lhs) and constant(expr.rhs)


def folded(expr: BinaryOp, times: np.ndarray, evaluate: Callable[[], Value]) -> Scalar:
    """The value of the :func:`constant` ``expr`` at ``times``: ``evaluate()``'s the first
    time, a copy of it after (the caller may change its value's array)."""
    found = _VALUES.get(id(expr))
    if found is not None and found[0] is expr and found[1] == len(times):
        return Scalar(found[2].copy())
    value = evaluate()
    assert isinstance(value, Scalar)  # numbers only: the parser typed it a scalar
    if len(_VALUES) >= KEPT:  # cleared whole: threads share it
        _VALUES.clear()
    _VALUES[id(expr)] = (expr, len(times), value.values.copy())
    return value
