"""Reading one mapping of a rules file key by key, every problem an ``AlertRuleError`` that
names the file, the rule (or notifier) and the key.

A notifier type reads its own settings with it (``from_options(name, fields)``), so a
plug-in's errors read like the built-in ones. Every key asked for counts as known, present
or not; :meth:`Fields.finish` then rejects the keys nobody asked for.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from typing import Any, TypeVar

from query_dsl.exceptions import AlertRuleError, QuerySyntaxError
from query_dsl.parser import parse_duration

__all__ = ["MAX_TEXT_LENGTH", "Fields"]

MAX_TEXT_LENGTH = 10_000
_T = TypeVar("_T")
_ENV_REFERENCE = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}")


class Fields:
    """The mapping ``data`` found at ``owner`` (``rule 'DiskFull'``, ``notifier 'ops'``...) in
    ``source``; ``environ`` resolves ``${NAME}`` where a caller allows it."""

    def __init__(
        self, data: object, source: str, owner: str | None, *, environ: Mapping[str, str] | None = None
    ) -> None:
        if not isinstance(data, Mapping):
            raise AlertRuleError(source, owner, None, f"expected a mapping of keys, got {_kind(data)}")
        self.data: Mapping[Any, Any] = data
        self.source = source
        self.owner = owner
        self.environ = os.environ if environ is None else environ
        self._known: list[str] = []

    def error(self, key: str | None, problem: str) -> AlertRuleError:
        return AlertRuleError(self.source, self.owner, key, problem)

    def _default(self, key: str, default: _T | None) -> _T:
        """What an absent key gives: ``default``, or an error when there is none."""
        if default is None:
            raise self.error(key, "is required")
        return default

    def has(self, key: str) -> bool:
        self._known.append(key)
        return self.data.get(key) is not None

    def raw(self, key: str) -> Any:
        """The value as parsed (``None`` when absent), for callers that check it themselves."""
        self._known.append(key)
        return self.data.get(key)

    def text(self, key: str, default: str | None = None, *, env: bool = False) -> str:
        """A string (required when ``default`` is ``None``); ``env`` expands ``${NAME}``."""
        value = self.raw(key)
        if value is None:
            return self._default(key, default)
        if not isinstance(value, str):
            raise self.error(key, f"expected text, got {_kind(value)}")
        if len(value) > MAX_TEXT_LENGTH:
            raise self.error(key, f"is {len(value)} characters long, more than {MAX_TEXT_LENGTH}")
        return self._expand(key, value) if env else value

    def _expand(self, key: str, value: str) -> str:
        def lookup(match: re.Match[str]) -> str:
            name = match[1]
            if name not in self.environ:
                raise self.error(key, f"refers to ${{{name}}}, which is not set in the environment")
            return self.environ[name]

        return _ENV_REFERENCE.sub(lookup, value)

    def texts(self, key: str, default: list[str] | None = None, *, env: bool = False) -> list[str]:
        """A list of strings (required and non-empty when ``default`` is ``None``)."""
        value = self.raw(key)
        if value is None:
            return list(self._default(key, default))
        if not isinstance(value, list) or not all(isinstance(item, str) for item in value):
            raise self.error(key, f"expected a list of text, got {_kind(value)}")
        if default is None and not value:
            raise self.error(key, "is empty")
        if len(value) > 1000:
            raise self.error(key, f"has {len(value)} items, more than 1000")
        return [self._expand(key, item) if env else item for item in value]

    def text_map(self, key: str, *, env: bool = False) -> dict[str, str]:
        """A mapping of text to text (empty when absent)."""
        value = self.raw(key)
        if value is None:
            return {}
        if not isinstance(value, Mapping):
            raise self.error(key, f"expected a mapping of text to text, got {_kind(value)}")
        out: dict[str, str] = {}
        for name, item in value.items():
            if not isinstance(name, str) or not isinstance(item, str):
                raise self.error(
                    key, f"expected text to text, got {name!r}: {_kind(item)} (quote numbers: '1')"
                )
            if len(item) > MAX_TEXT_LENGTH:
                raise self.error(
                    f"{key}.{name}", f"is {len(item)} characters long, more than {MAX_TEXT_LENGTH}"
                )
            out[name] = self._expand(f"{key}.{name}", item) if env else item
        return out

    def integer(self, key: str, default: int, low: int, high: int) -> int:
        value = self.raw(key)
        if value is None:
            return default
        if isinstance(value, bool) or not isinstance(value, int):
            raise self.error(key, f"expected a whole number, got {_kind(value)}")
        if not low <= value <= high:
            raise self.error(key, f"must be between {low} and {high}, got {value}")
        return value

    def boolean(self, key: str, default: bool) -> bool:
        value = self.raw(key)
        if value is None:
            return default
        if not isinstance(value, bool):
            raise self.error(key, f"expected true or false, got {_kind(value)}")
        return value

    def duration_ms(
        self, key: str, default: int | None = None, *, low_ms: int = 0, high_ms: int = 10 * 365 * 86_400_000
    ) -> int:
        """A duration written as the query language does (``30s``, ``5m``, ``4h``), in ms."""
        value = self.raw(key)
        if value is None:
            return self._default(key, default)
        if not isinstance(value, str):
            raise self.error(key, f"expected a duration like 30s, 5m or 4h, got {_kind(value)}")
        try:
            ms = parse_duration(value.strip())
        except QuerySyntaxError as exc:
            raise self.error(key, str(exc)) from None
        if not low_ms <= ms <= high_ms:
            raise self.error(key, f"must be between {low_ms} ms and {high_ms} ms, got {value}")
        return ms

    def seconds(self, key: str, default_s: float, low_s: float, high_s: float) -> float:
        """A duration (``500ms``, ``10s``, ``2m``) in seconds, such as a timeout."""
        ms = self.duration_ms(
            key, int(default_s * 1000), low_ms=int(low_s * 1000), high_ms=int(high_s * 1000)
        )
        return ms / 1000

    def finish(self) -> None:
        """Reject the keys no reader asked for, naming them and the known ones."""
        unknown = sorted(str(key) for key in self.data if key not in self._known)
        if unknown:
            raise self.error(
                None,
                f"unknown key{'s' if len(unknown) > 1 else ''} {', '.join(unknown)} "
                f"(known: {', '.join(sorted(set(self._known)))})",
            )


def _kind(value: object) -> str:
    shown = repr(value)
    return f"{type(value).__name__} {shown[:60] + '...' if len(shown) > 60 else shown}"
