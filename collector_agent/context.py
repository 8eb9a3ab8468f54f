"""A component's configuration: its keys (without the ``agent.kind.name.`` prefix) and
typed getters whose errors name the full key.

A context remembers which keys were asked for: a component asks for every key it knows
when it is configured, so what nobody asked for is a key nobody knows (a typo such as
``dataDir`` for ``dataDirs``), which :meth:`Context.unknown_keys` reports with the closest
known one.
"""

from __future__ import annotations

import difflib
from collections.abc import Mapping

from collector_agent.exceptions import ConfigurationError

__all__ = ["STRUCTURAL_KEYS", "Context"]

# Read by the agent's builder (and a lone sink's runner) rather than by the component itself.
STRUCTURAL_KEYS = frozenset(
    {
        "type",
        "channels",
        "channel",
        "sinks",
        "selector",
        "interceptors",
        "backoffSleepIncrement",
        "maxBackoffSleep",
    }
)
_TRUE = {"true", "yes", "on", "1"}
_FALSE = {"false", "no", "off", "0"}


class Context:
    """Keys of one component; ``prefix`` is how the keys are spelled in the file."""

    def __init__(self, values: Mapping[str, str] | None = None, prefix: str = "") -> None:
        self.values = dict(values or {})
        self.prefix = prefix
        self._asked: set[str] = set()
        self._asked_prefixes: set[str] = set()

    def __contains__(self, key: str) -> bool:
        self._asked.add(key)
        return key in self.values

    def unknown_keys(self) -> list[tuple[str, str | None]]:
        """Keys nobody asked for, each with the closest key that was asked for (or None)."""
        known = sorted(self._asked | STRUCTURAL_KEYS)
        out = []
        for key in sorted(self.values):
            if key in known or any(key.startswith(p) for p in self._asked_prefixes):
                continue
            if key.partition(".")[0] in STRUCTURAL_KEYS:
                continue
            close = difflib.get_close_matches(key, known, n=1, cutoff=0.6)
            out.append((key, close[0] if close else None))
        return out

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Context) and self.values == other.values

    def __repr__(self) -> str:
        return f"Context({self.prefix!r}, {self.values!r})"

    def full_key(self, key: str) -> str:
        return f"{self.prefix}{key}"

    def error(self, key: str, problem: str) -> ConfigurationError:
        return ConfigurationError(f"{self.full_key(key)}: {problem}")

    def get_str(self, key: str, default: str | None = None) -> str:
        self._asked.add(key)
        value = self.values.get(key, default)
        if value is None:
            raise self.error(key, "is required")
        return value

    def get_optional(self, key: str) -> str | None:
        self._asked.add(key)
        return self.values.get(key)

    def _number(
        self,
        key: str,
        default: float | None,
        parse: type[int] | type[float],
        kind: str,
        minimum: float | None,
        maximum: float | None,
    ) -> float:
        self._asked.add(key)
        raw = self.values.get(key)
        if raw is None:
            if default is None:
                raise self.error(key, "is required")
            return default
        try:
            value = parse(raw.strip())
        except ValueError:
            raise self.error(key, f"{raw!r} is not {kind}") from None
        if value != value or value in (float("inf"), float("-inf")):
            raise self.error(key, f"{raw!r} is not a finite number")
        if minimum is not None and value < minimum:
            raise self.error(key, f"{value} is below the minimum {minimum}")
        if maximum is not None and value > maximum:
            raise self.error(key, f"{value} is above the maximum {maximum}")
        return value

    def get_int(
        self, key: str, default: int | None = None, *, minimum: int | None = None, maximum: int | None = None
    ) -> int:
        return int(self._number(key, default, int, "an integer", minimum, maximum))

    def get_float(
        self,
        key: str,
        default: float | None = None,
        *,
        minimum: float | None = None,
        maximum: float | None = None,
    ) -> float:
        return float(self._number(key, default, float, "a number", minimum, maximum))

    def get_bool(self, key: str, default: bool) -> bool:
        self._asked.add(key)
        raw = self.values.get(key)
        if raw is None:
            return default
        lowered = raw.strip().lower()
        if lowered in _TRUE:
            return True
        if lowered in _FALSE:
            return False
        raise self.error(key, f"{raw!r} is not a boolean (true/false)")

    def get_list(self, key: str, default: list[str] | None = None) -> list[str]:
        self._asked.add(key)
        raw = self.values.get(key)
        if raw is None:
            if default is None:
                raise self.error(key, "is required")
            return list(default)
        return raw.split()

    def subset(self, prefix: str) -> Context:
        """The keys under ``prefix.`` with it removed (``selector.mapping.CA`` ...)."""
        dotted = prefix + "."
        self._asked_prefixes.add(dotted)
        return Context(
            {k[len(dotted) :]: v for k, v in self.values.items() if k.startswith(dotted)},
            self.full_key(dotted),
        )
