"""Prometheus's annotation templates (Go's ``text/template``) turned into the engine's
sandboxed jinja2 templates (:mod:`query_dsl.alerts.templates`), once, when a rule file is read.

The part of Go's template language that alerting rules use is translated::

    {{ $labels.instance }}            the alert's label (an absent one renders empty, as in Go)
    {{ $labels }}                     the label map
    {{ $value }}                      the value, formatted as Go's %v formats a float64
    {{ .Labels.instance }} {{ .Value }}   the same through the dot
    {{ $value | humanize }}           pipelines, the left side given as the last argument
    {{ printf "%.2f" $value }}        calls of the functions below, with string and number literals
    {{- ... -}}                       whitespace trimming (jinja2 has the same markers)
    {{/* a comment */}}

Functions (Prometheus's, same output): ``humanize``, ``humanize1024``,
``humanizePercentage``, ``humanizeDuration``, ``humanizeTimestamp``, ``printf``,
``toUpper``, ``toLower``, ``title``. Refused when the file is read, with the action named:
control actions (``if``, ``range``, ``with``, ``define``, ``template``, ``block``),
variables other than ``$labels`` and ``$value`` (``$externalLabels``, ``$externalURL``:
Artimon has no external labels), ``query`` and the other functions, and anything else the
translation cannot read. Every refusal is a ``ValueError`` naming the action.
"""

from __future__ import annotations

import datetime
import json
import math
import re
from decimal import Decimal
from typing import Any

__all__ = ["FUNCTIONS", "go_float", "translate"]

_ACTION = re.compile(r"\{\{(-\s)?(.*?)(\s-)?\}\}", re.DOTALL)
_TOKEN = re.compile(r'\s*("(?:[^"\\]|\\.)*"|`[^`]*`|\||\(|\)|[^\s|()"`]+)')
_NUMBER = re.compile(r"[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?\Z")
_FIELD = re.compile(r"(\$labels|\.Labels)\.([A-Za-z_][A-Za-z0-9_]*)\Z")
_CONTROL = {"if", "else", "end", "range", "with", "define", "template", "block", "break", "continue"}


def go_float(value: float) -> str:
    """``value`` as Go's ``%v`` writes a float64 (``97``, ``0.5``, ``1e+06``, ``NaN``, ``+Inf``)."""
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "+Inf" if value > 0 else "-Inf"
    if value == 0:
        return "-0" if math.copysign(1.0, value) < 0 else "0"
    _, digit_tuple, exponent = Decimal(repr(abs(value))).normalize().as_tuple()
    digits = "".join(map(str, digit_tuple))
    point = len(digits) + int(exponent)  # the decimal point's place after the first digit
    exp = point - 1
    prefix = "-" if value < 0 else ""
    if exp < -4 or exp >= 6:  # Go's shortest %g: the exponent form outside [1e-4, 1e6)
        mantissa = digits[0] + ("." + digits[1:] if len(digits) > 1 else "")
        return f"{prefix}{mantissa}e{'-' if exp < 0 else '+'}{abs(exp):02d}"
    if point <= 0:
        return f"{prefix}0.{'0' * -point}{digits}"
    if point >= len(digits):
        return prefix + digits + "0" * (point - len(digits))
    return f"{prefix}{digits[:point]}.{digits[point:]}"


def _humanize(value: Any, base: int, prefixes: tuple[str, ...], small: tuple[str, ...]) -> str:
    number = float(value)
    if number == 0 or math.isnan(number) or math.isinf(number):
        return f"{_g4(number)}"
    index = 0
    if abs(number) >= 1:
        while abs(number) >= base and index < len(prefixes) - 1:
            number /= base
            index += 1
        return f"{_g4(number)}{prefixes[index]}"
    while abs(number) < 1 and index < len(small) - 1:
        number *= 1000
        index += 1
    return f"{_g4(number)}{small[index]}"


def _g4(number: float) -> str:
    """Go's ``%.4g`` (Python's, with Go's spelling of NaN, infinities and exponents)."""
    if math.isnan(number):
        return "NaN"
    if math.isinf(number):
        return "+Inf" if number > 0 else "-Inf"
    return f"{number:.4g}"


def humanize(value: Any) -> str:
    return _humanize(
        value,
        1000,
        ("", "k", "M", "G", "T", "P", "E", "Z", "Y"),
        ("", "m", "u", "n", "p", "f", "a", "z", "y"),
    )


def humanize1024(value: Any) -> str:
    return _humanize(value, 1024, ("", "ki", "Mi", "Gi", "Ti", "Pi", "Ei", "Zi", "Yi"), ("",))


def humanize_percentage(value: Any) -> str:
    return f"{_g4(float(value) * 100)}%"


def humanize_duration(value: Any) -> str:
    """Seconds as Prometheus writes them: ``1d 2h 3m 4s``, or ``1.5ms`` under a second."""
    seconds = float(value)
    if math.isnan(seconds) or math.isinf(seconds):
        return _g4(seconds)
    sign = "-" if seconds < 0 else ""
    seconds = abs(seconds)
    if seconds >= 1:
        whole = int(seconds)
        days, hours, minutes = whole // 86400, whole // 3600 % 24, whole // 60 % 60
        rest = seconds - whole + whole % 60
        if days:
            return f"{sign}{days}d {hours}h {minutes}m {int(rest)}s"
        if hours:
            return f"{sign}{hours}h {minutes}m {int(rest)}s"
        if minutes:
            return f"{sign}{minutes}m {int(rest)}s"
        return f"{sign}{rest:.4g}s"
    if seconds == 0:
        return "0s"
    for unit, scale in (("ms", 1e3), ("us", 1e6), ("ns", 1e9), ("ps", 1e12), ("fs", 1e15)):
        if seconds * scale >= 1:
            return f"{sign}{seconds * scale:.4g}{unit}"
    return f"{sign}{seconds * 1e18:.4g}as"


def humanize_timestamp(value: Any) -> str:
    moment = datetime.datetime.fromtimestamp(float(value), tz=datetime.UTC)
    return moment.strftime("%Y-%m-%d %H:%M:%S.%f").rstrip("0").rstrip(".") + " +0000 UTC"


_VERB = re.compile(r"%([-+# 0]*\d*(?:\.\d+)?)([vdsfgeqx%])")


def printf(fmt: str, *args: Any) -> str:
    """Go's ``printf`` for the verbs rules use: ``%v %s %d %f %g %e %q %x %%``."""
    values = iter(args)

    def one(match: re.Match[str]) -> str:
        flags, verb = match[1], match[2]
        if verb == "%":
            return "%"
        arg = next(values, None)
        if arg is None:
            return f"%!{verb}(MISSING)"
        if verb in "vs":
            text = go_float(arg) if isinstance(arg, float) else str(arg)
            return f"%{flags}s" % text
        if verb == "q":
            return json.dumps(str(arg), ensure_ascii=False)
        if verb in "dx":
            return f"%{flags}{verb}" % int(arg)
        return f"%{flags}{verb}" % float(arg)

    return _VERB.sub(one, fmt)


FUNCTIONS: dict[str, Any] = {
    "humanize": humanize,
    "humanize1024": humanize1024,
    "humanizePercentage": humanize_percentage,
    "humanizeDuration": humanize_duration,
    "humanizeTimestamp": humanize_timestamp,
    "printf": printf,
    "toUpper": lambda text: str(text).upper(),
    "toLower": lambda text: str(text).lower(),
    "title": lambda text: str(text).title(),
    "go_float": go_float,
}
"""Go template functions by name, jinja2 globals of the engine's templates (``go_float``
renders ``$value``)."""


def _operand(token: str, action: str) -> str:
    """One argument as a jinja2 expression."""
    if token in ("$value", ".Value"):
        return "go_float(value)"
    if token in ("$labels", ".Labels"):
        return "labels"
    field = _FIELD.match(token)
    if field:
        return f"labels.get({json.dumps(field[2])}, '')"
    if token.startswith('"'):
        try:
            return json.dumps(json.loads(token), ensure_ascii=False)
        except ValueError:
            raise ValueError(f"{{{{{action}}}}}: {token} is not a string literal") from None
    if token.startswith("`"):
        return json.dumps(token[1:-1], ensure_ascii=False)
    if _NUMBER.match(token):
        return token
    if token.startswith("$"):
        raise ValueError(f"{{{{{action}}}}}: the variable {token} is not supported (only $labels and $value)")
    raise ValueError(f"{{{{{action}}}}}: {token!r} is not supported")


def _command(tokens: list[str], piped: str | None, action: str) -> str:
    head = tokens[0]
    if head in _CONTROL:
        raise ValueError(f"{{{{{action}}}}}: the control action {head!r} is not supported")
    if head in FUNCTIONS and head != "go_float":
        args = [_operand(token, action) for token in tokens[1:]]
        if piped is not None:
            args.append(piped)
        if head == "printf" or head.startswith(
            "humanize"
        ):  # %v of a number is Go's spelling: printf gets the raw value
            args = [a.replace("go_float(value)", "value") for a in args]
        return f"{head}({', '.join(args)})"
    if len(tokens) > 1 or piped is not None:
        raise ValueError(
            f"{{{{{action}}}}}: {head!r} is not a function Artimon knows ({', '.join(sorted(FUNCTIONS))})"
        )
    return _operand(head, action)


def _expression(action: str) -> str:
    tokens = _TOKEN.findall(action)
    if "".join(tokens).replace(" ", "") != action.replace(" ", "").replace("\n", "").replace("\t", ""):
        raise ValueError(f"{{{{{action}}}}}: cannot be read")
    if "(" in tokens or ")" in tokens:
        raise ValueError(f"{{{{{action}}}}}: parenthesized pipelines are not supported")
    commands: list[list[str]] = [[]]
    for token in tokens:
        if token == "|":
            commands.append([])
        else:
            commands[-1].append(token)
    if any(not command for command in commands):
        raise ValueError(f"{{{{{action}}}}}: an empty command in the pipeline")
    expression: str | None = None
    for command in commands:
        expression = _command(command, expression, action)
    return expression or "''"


def translate(text: str) -> str:
    """The jinja2 template of the Go template ``text``; ``ValueError`` naming the action it
    cannot translate (see the module doc)."""
    out: list[str] = []
    position = 0
    for match in _ACTION.finditer(text):
        out.append(_literal(text[position : match.start()]))
        position = match.end()
        left, inside, right = match[1] or "", match[2].strip(), match[3] or ""
        if inside.startswith("/*") and inside.endswith("*/"):
            out.append("{{" + left + "''" + right + "}}")
            continue
        if not inside:
            raise ValueError("{{}}: an empty action")
        out.append("{{" + left + " " + _expression(inside) + " " + right + "}}")
    tail = text[position:]
    if "{{" in tail:
        raise ValueError(f"an action that is not closed: {tail[tail.index('{{') :][:40]!r}")
    out.append(_literal(tail))
    return "".join(out)


def _literal(text: str) -> str:
    """Text outside actions, kept as it is unless jinja2 would read it as a tag."""
    if "{%" in text or "{#" in text or "}}" in text:
        return "{{ " + json.dumps(text, ensure_ascii=False) + " }}"
    return text
