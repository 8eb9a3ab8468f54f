"""Annotation templates: jinja2 in its immutable sandbox, with undefined names an error.

A template sees ``labels`` (the alert's labels), ``value`` (the series' last value),
``series`` (its key), ``rule`` (the rule's name), ``state`` and ``active_since`` (ISO 8601,
UTC): ``"{{ labels.host }} is at {{ value | round(1) }}%"``; Prometheus's template functions
(``humanize(value)``, ``printf("%.2f", value)``... :mod:`query_dsl.alerts.go_templates`, which
also turns a Prometheus rule file's Go templates into these) are there too. The sandbox keeps a template
from reaching Python's internals or changing its inputs; rules files are still trusted
configuration (a template can loop for a long time). Syntax errors are found when the rules
file is read; a failure while rendering gives the error's text instead, so a notification
still goes out.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from functools import lru_cache
from typing import Any

from jinja2 import StrictUndefined, Template, TemplateError
from jinja2.sandbox import ImmutableSandboxedEnvironment

from query_dsl.alerts.go_templates import FUNCTIONS

__all__ = ["MAX_RENDERED_LENGTH", "check_template", "render"]

log = logging.getLogger(__name__)

MAX_RENDERED_LENGTH = 16_384
_ENVIRONMENT = ImmutableSandboxedEnvironment(undefined=StrictUndefined, autoescape=False)
_ENVIRONMENT.globals.update(FUNCTIONS)


@lru_cache(maxsize=4096)
def _compiled(text: str) -> Template:
    return _ENVIRONMENT.from_string(text)


def check_template(text: str) -> None:
    """Raise ``ValueError`` (with the line) if ``text`` is not a valid template."""
    try:
        _compiled(text)
    except TemplateError as exc:
        line = getattr(exc, "lineno", None)
        raise ValueError(f"template error{f' at line {line}' if line else ''}: {exc}") from None


def render(text: str, context: Mapping[str, Any]) -> str:
    """``text`` rendered with ``context``, cut at ``MAX_RENDERED_LENGTH`` characters; a
    failing template renders as ``(template error: ...)``."""
    try:
        out = _compiled(text).render(context)
    except Exception as exc:  # a template (1/0, a bad filter argument) must never stop an evaluation
        log.warning("annotation template %r failed: %s", text[:80], exc)
        return f"(template error: {exc})"
    return out if len(out) <= MAX_RENDERED_LENGTH else out[:MAX_RENDERED_LENGTH] + "..."
