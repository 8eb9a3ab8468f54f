"""PromQL text to syntax tree (:mod:`query_dsl.promql.ast`) with lark's LALR parser over
``grammar.lark``; never ``eval``. Types are checked here, as Prometheus's parser does:
``rate(x)`` (a vector where a range is due) or ``a and 1`` never reach the engine.

Every error is a :class:`~query_dsl.exceptions.PromQLSyntaxError` with the line and column
it concerns (1-based). Limits: :data:`MAX_QUERY_LENGTH` characters, :data:`MAX_DEPTH` levels
of nesting (the engine walks the tree recursively), durations up to 100 years.
"""

from __future__ import annotations

import math
import re
from functools import lru_cache
from pathlib import Path
from typing import Any

from lark import Lark, Token, Transformer, v_args
from lark.exceptions import UnexpectedInput, VisitError
from lark.tree import Meta

from bookkeeper.ground import parse_duration
from query_dsl.evaluator import MAX_TIME_MS
from query_dsl.exceptions import PromQLSyntaxError
from query_dsl.parser import MAX_DURATION_MS, MAX_QUERY_LENGTH
from query_dsl.promql.ast import (
    Aggregation,
    BinaryOp,
    Call,
    Expr,
    LabelMatcher,
    MatrixSelector,
    NumberLiteral,
    Paren,
    StringLiteral,
    Subquery,
    Unary,
    VectorMatching,
    VectorSelector,
)
from query_dsl.promql.signatures import MATRIX, SCALAR, SIGNATURES, STRING, VARIADIC, VECTOR

__all__ = ["MAX_DEPTH", "MAX_QUERY_LENGTH", "parse", "value_type"]

MAX_DEPTH = 100
_LABEL = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")
_ESCAPES = {"a": "\a", "b": "\b", "f": "\f", "n": "\n", "r": "\r", "t": "\t", "v": "\v", "\\": "\\"}
_SET_OPS = ("and", "or", "unless")
_COMPARISONS = ("==", "!=", ">", "<", ">=", "<=")
_WITH_PARAM = {"topk": SCALAR, "bottomk": SCALAR, "quantile": SCALAR, "count_values": STRING}


def _unquote(text: str) -> str:
    """A PromQL string literal's value (Go's rules: ``\\n``, ``\\x41``, ``\\u00e9``, octal; raw
    in backticks)."""
    quote, body = text[0], text[1:-1]
    if quote == "`":
        return body
    out: list[str] = []
    i = 0
    while i < len(body):
        char = body[i]
        if char != "\\":
            out.append(char)
            i += 1
            continue
        code = body[i + 1]
        if code in _ESCAPES:
            out.append(_ESCAPES[code])
            i += 2
        elif code == quote:
            out.append(quote)
            i += 2
        elif code in "xuU":
            width = {"x": 2, "u": 4, "U": 8}[code]
            digits = body[i + 2 : i + 2 + width]
            if len(digits) != width or not all(c in "0123456789abcdefABCDEF" for c in digits):
                raise ValueError(f"invalid escape \\{code}{digits} in {text}")
            value = int(digits, 16)
            if value > 0x10FFFF or 0xD800 <= value <= 0xDFFF:
                raise ValueError(f"invalid code point \\{code}{digits} in {text}")
            out.append(chr(value))
            i += 2 + width
        elif code in "01234567":
            digits = body[i + 1 : i + 4]
            if len(digits) != 3 or not all(c in "01234567" for c in digits) or int(digits, 8) > 255:
                raise ValueError(f"invalid octal escape \\{digits} in {text}")
            out.append(chr(int(digits, 8)))
            i += 4
        else:
            raise ValueError(f"unknown escape sequence \\{code} in {text}")
    return "".join(out)


def _number(text: str) -> float:
    lowered = text.lower()
    if lowered.startswith("0x"):
        return float(int(lowered, 16))
    return float(text)


def value_type(expr: Expr) -> str:
    """The PromQL type (scalar, vector, matrix, string) of an expression."""
    if isinstance(expr, NumberLiteral):
        return SCALAR
    if isinstance(expr, StringLiteral):
        return STRING
    if isinstance(expr, VectorSelector | Aggregation):
        return VECTOR
    if isinstance(expr, MatrixSelector | Subquery):
        return MATRIX
    if isinstance(expr, Call):
        return SIGNATURES[expr.name].returns
    if isinstance(expr, Paren | Unary):
        return value_type(expr.expr)
    if isinstance(expr, BinaryOp):
        sides = (value_type(expr.lhs), value_type(expr.rhs))
        return SCALAR if sides == (SCALAR, SCALAR) else VECTOR
    raise TypeError(f"not a PromQL expression: {expr!r}")


class _Error(Exception):
    """A semantic error at a position, turned into PromQLSyntaxError by :func:`parse`."""

    def __init__(self, message: str, meta: Meta | Token | None) -> None:
        super().__init__(message)
        self.line = getattr(meta, "line", 1) or 1
        self.column = getattr(meta, "column", 1) or 1


def _expect(expr: Expr, wanted: str, what: str, meta: Meta) -> None:
    found = value_type(expr)
    if found != wanted:
        raise _Error(f"{what}: expected type {_article(wanted)}, got {_article(found)}", meta)


def _article(kind: str) -> str:
    return {SCALAR: "scalar", VECTOR: "instant vector", MATRIX: "range vector", STRING: "string"}[kind]


def _ms_of(token: Token, meta: Meta) -> int:
    try:
        if token.type == "DURATION":
            ms = parse_duration(str(token))
        else:
            seconds = _number(str(token))
            if not math.isfinite(seconds):
                raise ValueError(f"{token} is not a finite duration")
            ms = round(seconds * 1000)
    except ValueError as exc:
        raise _Error(str(exc), meta) from None
    if ms > MAX_DURATION_MS:
        raise _Error(f"duration {token} is longer than 100 years", meta)
    return ms


@v_args(inline=True, meta=True)
class _ToAst(Transformer[Token, Expr]):
    def number(self, meta: Meta, token: Token) -> NumberLiteral:
        return NumberLiteral(_number(str(token)))

    def special_number(self, meta: Meta, token: Token) -> NumberLiteral:
        return NumberLiteral(math.inf if token.type == "INF" else math.nan)

    def string(self, meta: Meta, token: Token) -> StringLiteral:
        try:
            return StringLiteral(_unquote(str(token)))
        except ValueError as exc:
            raise _Error(str(exc), token) from None

    def paren(self, meta: Meta, expr: Expr) -> Paren:
        return Paren(expr)

    def label_name(self, meta: Meta, token: Token) -> str:
        if token.type == "STRING":
            return self.string(meta, token).value
        if not _LABEL.match(token):
            raise _Error(f'{token!r} is not a label name (quote it: "{token}")', token)
        return str(token)

    def label_list(self, meta: Meta, *names: str | None) -> tuple[str, ...]:
        return tuple(name for name in names if name is not None)

    def label_matcher(self, meta: Meta, label: str, op: Token, value: Token) -> LabelMatcher:
        return LabelMatcher(label, str(op), self.string(meta, value).value)

    def name_matcher(self, meta: Meta, token: Token) -> LabelMatcher:
        return LabelMatcher("__name__", "=", self.string(meta, token).value)

    def matchers(self, meta: Meta, *found: LabelMatcher | None) -> tuple[LabelMatcher, ...]:
        return tuple(m for m in found if m is not None)

    def named_selector(
        self, meta: Meta, name: Token, matchers: tuple[LabelMatcher, ...] | None
    ) -> VectorSelector:
        found = matchers or ()
        if any(m.label == "__name__" for m in found):
            raise _Error(f"metric name {name} given twice (also as __name__ or a quoted name)", meta)
        return self._selector(meta, (LabelMatcher("__name__", "=", str(name)), *found))

    def bare_selector(self, meta: Meta, matchers: tuple[LabelMatcher, ...]) -> VectorSelector:
        if sum(m.label == "__name__" and m.op == "=" and m.value != "" for m in matchers) > 1:
            raise _Error("a selector names its metric at most once", meta)
        return self._selector(meta, matchers)

    @staticmethod
    def _selector(meta: Meta, matchers: tuple[LabelMatcher, ...]) -> VectorSelector:
        from query_dsl.promql.selection import matches_empty

        if all(matches_empty(m) for m in matchers):
            raise _Error(
                "vector selector must contain at least one non-empty matcher (e.g. a metric name)", meta
            )
        return VectorSelector(matchers)

    def range_duration(self, meta: Meta, token: Token) -> int:
        ms = _ms_of(token, meta)
        if ms <= 0:
            raise _Error(f"a range or step must be positive, got {token}", meta)
        return ms

    def offset_duration(self, meta: Meta, sign: Token | None, token: Token) -> int:
        ms = _ms_of(token, meta)
        return -ms if sign is not None and str(sign) == "-" else ms

    def at_number(self, meta: Meta, sign: Token | None, token: Token) -> int:
        seconds = _number(str(token)) * (-1 if sign is not None and str(sign) == "-" else 1)
        if not math.isfinite(seconds) or abs(seconds) > MAX_TIME_MS / 1000:
            raise _Error(f"@ {seconds:g} is beyond the times PromQL can hold here (±{MAX_TIME_MS} ms)", meta)
        return round(seconds * 1000)

    def at_start(self, meta: Meta, token: Token) -> str:
        return "start"

    def at_end(self, meta: Meta, token: Token) -> str:
        return "end"

    def range_selector(self, meta: Meta, expr: Expr, range_ms: int) -> MatrixSelector:
        if not isinstance(expr, VectorSelector):
            raise _Error(
                "ranges only allowed for vector selectors (use a subquery, [range:step], for expressions)",
                meta,
            )
        return MatrixSelector(expr, range_ms)

    def subquery(self, meta: Meta, expr: Expr, range_ms: int, step_ms: int | None) -> Subquery:
        _expect(expr, VECTOR, "subquery", meta)
        return Subquery(expr, range_ms, step_ms)

    def offset(self, meta: Meta, expr: Expr, keyword: Token, ms: int) -> Expr:
        target = expr.vector if isinstance(expr, MatrixSelector) else expr
        if not isinstance(target, VectorSelector | Subquery):
            raise _Error("offset modifier must be preceded by a selector or a subquery", meta)
        if target.offset_ms:
            raise _Error("offset may not be set multiple times", meta)
        return self._modify(expr, offset_ms=ms)

    def at(self, meta: Meta, expr: Expr, when: int | str) -> Expr:
        target = expr.vector if isinstance(expr, MatrixSelector) else expr
        if not isinstance(target, VectorSelector | Subquery):
            raise _Error("@ modifier must be preceded by a selector or a subquery", meta)
        if target.at is not None:
            raise _Error("@ may not be set multiple times", meta)
        return self._modify(expr, at=when)

    @staticmethod
    def _modify(expr: Expr, **changes: Any) -> Expr:
        from dataclasses import replace

        if isinstance(expr, MatrixSelector):
            return MatrixSelector(replace(expr.vector, **changes), expr.range_ms)
        return replace(expr, **changes)

    def args(self, meta: Meta, *exprs: Expr) -> tuple[Expr, ...]:
        return exprs

    def call(self, meta: Meta, name: Token, args: tuple[Expr, ...] | None) -> Call:
        given = args or ()
        signature = SIGNATURES.get(str(name))
        if signature is None:
            raise _Error(f"unknown function with name {str(name)!r}", name)
        wanted = signature.args
        if signature.optional == VARIADIC:
            low, high = len(wanted) - 1, None
        else:
            low, high = len(wanted) - signature.optional, len(wanted)
        if len(given) < low or (high is not None and len(given) > high):
            expected = f"{low}" if low == high else f"{low} to {high}" if high else f"at least {low}"
            raise _Error(f"function {name} takes {expected} argument(s), got {len(given)}", meta)
        for position, arg in enumerate(given):
            kind = wanted[min(position, len(wanted) - 1)]
            _expect(arg, kind, f"argument {position + 1} of {name}()", meta)
        return Call(str(name), given)

    def grouping(self, meta: Meta, keyword: Token, labels: tuple[str, ...]) -> tuple[bool, tuple[str, ...]]:
        return keyword.type == "WITHOUT", labels

    def aggregation(self, meta: Meta, op: Token, *rest: Any) -> Aggregation:
        grouping = next(
            (
                part
                for part in rest
                if isinstance(part, tuple) and len(part) == 2 and isinstance(part[0], bool)
            ),
            None,
        )
        args = next((part for part in rest if isinstance(part, tuple) and part is not grouping), None) or ()
        name = str(op).lower()
        wants_param = name in _WITH_PARAM
        if len(args) != (2 if wants_param else 1):
            raise _Error(
                f"aggregation {name} takes {2 if wants_param else 1} argument(s), got {len(args)}", meta
            )
        expr = args[-1]
        _expect(expr, VECTOR, f"aggregation {name}", meta)
        param = args[0] if wants_param else None
        if param is not None:
            _expect(param, _WITH_PARAM[name], f"parameter of {name}", meta)
        without, labels = grouping if grouping is not None else (False, ())
        return Aggregation(name, expr, param, labels, without)

    def group_mod(
        self, meta: Meta, side: Token, labels: tuple[str, ...] | None
    ) -> tuple[str, tuple[str, ...]]:
        return ("many-to-one" if side.type == "GROUP_LEFT" else "one-to-many"), labels or ()

    def matching(
        self, meta: Meta, keyword: Token, labels: tuple[str, ...], group: tuple[str, tuple[str, ...]] | None
    ) -> VectorMatching:
        card, include = group if group is not None else ("one-to-one", ())
        if set(include) & set(labels) and keyword.type == "ON":
            label = sorted(set(include) & set(labels))[0]
            raise _Error(f"label {label!r} must not occur in ON and GROUP clause at once", meta)
        return VectorMatching(card, labels, keyword.type == "ON", include)

    def bin_mod(self, meta: Meta, as_bool: Token | None, matching: VectorMatching | None) -> tuple[bool, Any]:
        return as_bool is not None, matching

    def binary(self, meta: Meta, lhs: Expr, op: Token, modifiers: tuple[bool, Any], rhs: Expr) -> BinaryOp:
        name = str(op).lower()
        as_bool, matching = modifiers
        sides = (value_type(lhs), value_type(rhs))
        for side in sides:
            if side not in (SCALAR, VECTOR):
                raise _Error(
                    "binary expression must contain only scalar and instant vector types, "
                    f"got {_article(side)}",
                    meta,
                )
        if as_bool and name not in _COMPARISONS:
            raise _Error("bool modifier can only be used on comparison operators", meta)
        if name in _COMPARISONS and sides == (SCALAR, SCALAR) and not as_bool:
            raise _Error("comparisons between scalars must use BOOL modifier", meta)
        if name in _SET_OPS and sides != (VECTOR, VECTOR):
            raise _Error(f"set operator {name} not allowed in binary scalar expression", meta)
        if matching is not None and sides != (VECTOR, VECTOR):
            raise _Error("vector matching only allowed between instant vectors", meta)
        if name in _SET_OPS and matching is not None and matching.card != "one-to-one":
            raise _Error(f"no grouping allowed for {name} operation", meta)
        if sides == (VECTOR, VECTOR) and matching is None:
            matching = VectorMatching()
        if name in _SET_OPS and matching is not None:
            matching = VectorMatching("many-to-many", matching.labels, matching.on, ())
        return BinaryOp(name, lhs, rhs, matching, as_bool)

    def unary(self, meta: Meta, op: Token, expr: Expr) -> Expr:
        if value_type(expr) not in (SCALAR, VECTOR):
            raise _Error(
                "unary expression only allowed on expressions of type scalar or instant vector, "
                f"got {_article(value_type(expr))}",
                meta,
            )
        return expr if str(op) == "+" else Unary("-", expr)


@lru_cache(maxsize=1)
def _parser() -> Lark:
    return Lark(
        Path(__file__).with_name("grammar.lark").read_text(),
        parser="lalr",
        maybe_placeholders=True,
        propagate_positions=True,
    )


def _depth(expr: Any, level: int = 1) -> int:
    children = [value for value in vars(expr).values() if hasattr(value, "__dataclass_fields__")]
    children += [
        item
        for value in vars(expr).values()
        if isinstance(value, tuple)
        for item in value
        if hasattr(item, "__dataclass_fields__") and not isinstance(item, LabelMatcher)
    ]
    return max((_depth(child, level + 1) for child in children), default=level)


@lru_cache(maxsize=1024)
def parse(text: str) -> Expr:
    """Parse PromQL; :class:`PromQLSyntaxError` with line and column when it is not valid."""
    if not isinstance(text, str):
        raise PromQLSyntaxError(f"a query is text, got {type(text).__name__}", 1, 1)
    if len(text) > MAX_QUERY_LENGTH:
        raise PromQLSyntaxError(
            f"a query is at most {MAX_QUERY_LENGTH} characters, this one has {len(text)}", 1, 1
        )
    if not text.strip():
        raise PromQLSyntaxError("no expression found in input", 1, 1)
    if text.count("(") + text.count("[") + text.count("{") > MAX_DEPTH * 2:
        raise PromQLSyntaxError(f"the query nests more than {MAX_DEPTH} levels", 1, 1)
    try:
        tree = _parser().parse(text)
        expr: Expr = _ToAst().transform(tree)
    except VisitError as exc:
        orig = exc.orig_exc
        if isinstance(orig, _Error):
            raise PromQLSyntaxError(
                f"{orig} (line {orig.line}, column {orig.column})", orig.line, orig.column
            ) from None
        if isinstance(orig, RecursionError):
            raise PromQLSyntaxError(f"the query nests more than {MAX_DEPTH} levels", 1, 1) from None
        raise PromQLSyntaxError(f"cannot read the query: {orig}", 1, 1) from None
    except UnexpectedInput as exc:
        line = getattr(exc, "line", 1) or 1
        column = getattr(exc, "column", 1) or 1
        if line < 0 or column < 0:  # the end of the input
            line = text.count("\n") + 1
            column = len(text) - (text.rfind("\n") + 1) + 1
        token = getattr(exc, "token", None)
        if token is not None and getattr(token, "type", None) == "$END":
            what = "unexpected end of input"
        elif token is not None:
            what = f"unexpected {str(token)[:40]!r}"
        else:
            char = getattr(exc, "char", "")
            what = f"unexpected character {char!r}"
        hint = _dotted_hint(text, getattr(exc, "pos_in_stream", -1))
        raise PromQLSyntaxError(f"{what} at line {line}, column {column}{hint}", line, column) from None
    except RecursionError:
        raise PromQLSyntaxError(f"the query nests more than {MAX_DEPTH} levels", 1, 1) from None
    if _depth(expr) > MAX_DEPTH:
        raise PromQLSyntaxError(f"the query nests more than {MAX_DEPTH} levels", 1, 1)
    return expr


_NAME_CHARS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_:.")


def _dotted_hint(text: str, pos: int) -> str:
    """A name with dots (every Artimon name has some) is written quoted in PromQL: the
    suggestion, when the unexpected character is a dot inside a name."""
    if not 0 < pos < len(text) or text[pos] != "." or text[pos - 1] not in _NAME_CHARS:
        return ""
    start, end = pos, pos
    while start > 0 and text[start - 1] in _NAME_CHARS:
        start -= 1
    while end < len(text) and text[end] in _NAME_CHARS:
        end += 1
    name = text[start:end]
    return f': a name with dots is written quoted, {{"{name}"}} (or {{"{name}", label="value"}})'
