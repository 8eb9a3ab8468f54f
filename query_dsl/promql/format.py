"""A syntax tree back to PromQL text, in one canonical form (what ``/api/v1/format_query``
answers): operators spaced, strings double-quoted, durations in their largest units."""

from __future__ import annotations

import json

from query_dsl.promql.ast import (
    Aggregation,
    BinaryOp,
    Call,
    Expr,
    MatrixSelector,
    NumberLiteral,
    Paren,
    StringLiteral,
    Subquery,
    Unary,
    VectorSelector,
)
from query_dsl.promql.result import format_value

__all__ = ["format_duration", "format_expr"]

_UNITS = (
    ("y", 31_536_000_000),
    ("w", 604_800_000),
    ("d", 86_400_000),
    ("h", 3_600_000),
    ("m", 60_000),
    ("s", 1000),
    ("ms", 1),
)


def format_duration(ms: int) -> str:
    if ms == 0:
        return "0s"
    sign, ms, parts = ("-" if ms < 0 else ""), abs(ms), []
    for unit, size in _UNITS:
        if ms >= size:
            parts.append(f"{ms // size}{unit}")
            ms %= size
    return sign + "".join(parts)


def _quote(text: str) -> str:
    return json.dumps(text, ensure_ascii=False)


def _selector(selector: VectorSelector) -> str:
    name = selector.name
    plain = name is not None and name.replace("_", "a").replace(":", "a").isalnum() and not name[0].isdigit()
    matchers = [
        f"{m.label}{m.op}{_quote(m.value)}"
        if m.label.replace("_", "a").isalnum()
        else f"{_quote(m.label)}{m.op}{_quote(m.value)}"
        for m in selector.matchers
        if not (m.label == "__name__" and m.op == "=" and m.value == name and (plain or name is not None))
    ]
    if name is not None and not plain:
        matchers.insert(0, _quote(name))
    head = name if plain and name is not None else ""
    text = head + ("{" + ", ".join(matchers) + "}" if matchers or not head else "")
    return text


def _modifiers(offset_ms: int, at: int | str | None) -> str:
    out = ""
    if at is not None:
        out += f" @ {at}()" if isinstance(at, str) else f" @ {format_value(at / 1000)}"
    if offset_ms:
        out += f" offset {format_duration(offset_ms)}"
    return out


def format_expr(expr: Expr) -> str:
    if isinstance(expr, NumberLiteral):
        return format_value(expr.value).replace("+Inf", "Inf")
    if isinstance(expr, StringLiteral):
        return _quote(expr.value)
    if isinstance(expr, VectorSelector):
        return _selector(expr) + _modifiers(expr.offset_ms, expr.at)
    if isinstance(expr, MatrixSelector):
        vector = expr.vector
        return f"{_selector(vector)}[{format_duration(expr.range_ms)}]" + _modifiers(
            vector.offset_ms, vector.at
        )
    if isinstance(expr, Subquery):
        step = format_duration(expr.step_ms) if expr.step_ms else ""
        return f"{format_expr(expr.expr)}[{format_duration(expr.range_ms)}:{step}]" + _modifiers(
            expr.offset_ms, expr.at
        )
    if isinstance(expr, Call):
        return f"{expr.name}(" + ", ".join(format_expr(a) for a in expr.args) + ")"
    if isinstance(expr, Aggregation):
        grouping = (
            f" {'without' if expr.without else 'by'} (" + ", ".join(expr.grouping) + ")"
            if expr.grouping or expr.without
            else ""
        )
        args = ([format_expr(expr.param)] if expr.param is not None else []) + [format_expr(expr.expr)]
        return f"{expr.op}{grouping} (" + ", ".join(args) + ")"
    if isinstance(expr, Unary):
        return f"-{format_expr(expr.expr)}"
    if isinstance(expr, Paren):
        return f"({format_expr(expr.expr)})"
    if isinstance(expr, BinaryOp):
        modifiers = " bool" if expr.return_bool else ""
        m = expr.matching
        if m is not None and (m.on or m.labels):
            modifiers += f" {'on' if m.on else 'ignoring'} (" + ", ".join(m.labels) + ")"
        if m is not None and m.card in ("many-to-one", "one-to-many"):
            side = "group_left" if m.card == "many-to-one" else "group_right"
            modifiers += f" {side}" + (" (" + ", ".join(m.include) + ")" if m.include else "")
        return f"{format_expr(expr.lhs)} {expr.op}{modifiers} {format_expr(expr.rhs)}"
    raise TypeError(f"not a PromQL expression: {expr!r}")
