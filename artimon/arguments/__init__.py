"""Each command's arguments, apart from the command: ``artimon/arguments/<name>.py`` holds
``add_arguments(parser)`` for ``artimon/commands/<name>.py``'s ``run(args)``, and imports
nothing but the standard library, so that parsing (``--help`` included) never loads what a
command runs (Spark, the store, the HTTP server).

A :class:`LazyParser` is filled on first use: ``artimon --help`` lists the commands from
``artimon.cli.COMMANDS`` without reading any of them; ``artimon up ...`` fills ``up``'s
parser only."""

from __future__ import annotations

import argparse
import ast
import importlib.util
import re
from collections.abc import Callable, Sequence
from typing import Any

__all__ = ["HelpFormatter", "LazyParser", "module_doc", "plain"]

# reST roles and literals of docstrings, as a terminal shows them: ``x`` -> x, :class:`~a.B` -> B
_LITERAL = re.compile(r"``([^`]+)``")
_ROLE = re.compile(r":[a-z]+:`~?(?:[\w.]*\.)?([^`]+)`")


def plain(text: str) -> str:
    """``text`` without the reST markup of docstrings."""
    return _ROLE.sub(r"\1", _LITERAL.sub(r"\1", text))


class HelpFormatter(argparse.RawDescriptionHelpFormatter):
    """Descriptions as written (their paragraphs kept), and each option's default after its
    help when it has one that says something (not None, False or an empty list) and the help
    does not already say it."""

    def _get_help_string(self, action: argparse.Action) -> str:
        text = action.help or ""
        default = action.default
        if not action.option_strings or "default" in text or default in (None, False, [], argparse.SUPPRESS):
            return text
        return f"{text} (default: %(default)s)"


def module_doc(module: str) -> str:
    """The docstring of ``module``, read from its source without importing it (the module
    of a command imports what the command runs)."""
    spec = importlib.util.find_spec(module)
    if spec is None or spec.origin is None:
        raise ModuleNotFoundError(f"no module {module}")
    with open(spec.origin, encoding="utf-8") as source:
        return plain(ast.get_docstring(ast.parse(source.read(), spec.origin)) or "")


class LazyParser(argparse.ArgumentParser):
    """A sub-command's parser whose ``fill(parser)`` (its arguments, its description) runs
    once, when it parses or prints its help: not for the sub-commands not chosen. Its help
    is laid out by :class:`HelpFormatter`."""

    def __init__(self, *args: Any, fill: Callable[[argparse.ArgumentParser], None] | None = None, **kw: Any):
        super().__init__(*args, **{"formatter_class": HelpFormatter, **kw})
        self._fill = fill

    def _filled(self) -> None:
        fill, self._fill = self._fill, None
        if fill is not None:
            fill(self)

    def parse_known_args(  # type: ignore[override]
        self, args: Sequence[str] | None = None, namespace: argparse.Namespace | None = None
    ) -> tuple[argparse.Namespace, list[str]]:
        self._filled()
        return super().parse_known_args(args, namespace)

    def format_help(self) -> str:
        self._filled()
        return super().format_help()
