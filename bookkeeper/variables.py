"""Variable handles: one object per series, the value and its last-update time inside.

A handle is what ``Bookkeeper.integer(...)`` and friends return, cached per series, so the
hot path is one lock and one add. Every handle of a bookkeeper shares the bookkeeper's lock,
which makes a snapshot one consistent cut.

Lifecycle of a handle::

    LIVE --remove()--> REMOVED --set()/add()--> LIVE (the series is served again)

A removed series disappears from snapshots. Updating a removed handle brings it back; if the
series was created anew meanwhile, the handle takes that value over and the newer object is
the one detached.
"""

from __future__ import annotations

import math
import operator
import threading
import time
from typing import TYPE_CHECKING, ClassVar, Generic, TypeVar

from bookkeeper.exceptions import InvalidValueError
from bookkeeper.vartype import VarType

if TYPE_CHECKING:
    from bookkeeper._bookkeeper import Bookkeeper

__all__ = ["BooleanVar", "DoubleVar", "IntegerVar", "StringVar", "Variable", "wrap_int64"]

T = TypeVar("T", int, float, bool, str)

_INT64_MIN = -(2**63)
_INT64_MAX = 2**63 - 1
_INT64_SPAN = 2**64
_now = time.time


def wrap_int64(value: int) -> int:
    """Two's complement wrap-around, as Java's ``long`` (Artimon's counters) does."""
    return (value - _INT64_MIN) % _INT64_SPAN + _INT64_MIN


def _as_int(value: object) -> int:
    try:
        return operator.index(value)  # type: ignore[arg-type]
    except TypeError:
        raise TypeError(f"an INTEGER variable takes an int, got {type(value).__name__}: {value!r}") from None


class Variable(Generic[T]):
    """Base of the four handle types. Read-only attributes: ``name``, ``labels``, ``type``."""

    __slots__ = ("_bk", "_lock", "_removed", "_ts", "_value", "key", "label_text", "labels", "name")
    type: ClassVar[VarType]
    _initial: ClassVar[object]

    def __init__(
        self,
        bk: Bookkeeper,
        lock: threading.Lock,
        name: str,
        labels: dict[str, str],
        label_text: str,
        key: tuple[str, tuple[tuple[str, str], ...]],
    ) -> None:
        self._bk = bk
        self._lock = lock
        self.name = name
        self.labels = labels
        self.label_text = label_text
        self.key = key
        self._value: T = self._initial  # type: ignore[assignment]
        self._ts = _now()
        self._removed = False

    def get(self) -> T:
        """The current value."""
        return self._value

    @property
    def timestamp_ms(self) -> int:
        """When the value last changed, epoch milliseconds."""
        return int(self._ts * 1000)

    def remove(self) -> bool:
        """Stop serving this series; ``False`` if it was not served."""
        return self._bk._remove(self)

    def _check(self, value: object) -> T:
        raise NotImplementedError

    def set(self, value: T) -> None:
        """Replace the value (checked: a bad value raises and changes nothing)."""
        value = self._check(value)
        with self._lock:
            if self._removed:
                self._bk._reattach(self)
            self._value = value
            self._ts = _now()

    def __repr__(self) -> str:
        state = " removed" if self._removed else ""
        return f"<{type(self).__name__} {self.name}{{{self.label_text}}}={self._value!r}{state}>"


class IntegerVar(Variable[int]):
    """A 64-bit integer that wraps around at 64 bits like Java's ``long``."""

    __slots__ = ()
    type = VarType.INTEGER
    _initial = 0

    def _check(self, value: object) -> int:
        value = _as_int(value)
        if not _INT64_MIN <= value <= _INT64_MAX:
            raise InvalidValueError(f"INTEGER {self.name} value {value} does not fit in 64 bits")
        return value

    def get(self) -> int:
        value = self._value
        return value if _INT64_MIN <= value <= _INT64_MAX else wrap_int64(value)

    def add(self, delta: int = 1) -> None:
        """Add ``delta`` (default 1): the hot path, one lock and one add.

        The 64-bit wrap-around is applied when the value is read (``get``, snapshots), so
        it costs nothing here."""
        if type(delta) is not int:
            delta = _as_int(delta)
        with self._lock:
            if self._removed:
                self._bk._reattach(self)
            self._value += delta
            self._ts = _now()

    def add_and_get(self, delta: int = 1) -> int:
        """Add ``delta`` and return the new value (Artimon's ``addToIntegerVar``)."""
        if type(delta) is not int:
            delta = _as_int(delta)
        with self._lock:
            if self._removed:
                self._bk._reattach(self)
            value = self._value + delta
            if not _INT64_MIN <= value <= _INT64_MAX:
                value = wrap_int64(value)
            self._value = value
            self._ts = _now()
        return value


class DoubleVar(Variable[float]):
    """A float64. ``set`` refuses NaN and infinities; ``add`` does not check (it is the hot
    path), so adding an infinity stores one, and it is served as is."""

    __slots__ = ()
    type = VarType.DOUBLE
    _initial = 0.0

    def _check(self, value: object) -> float:
        if not isinstance(value, int | float) or isinstance(value, bool):
            raise TypeError(f"a DOUBLE variable takes a float, got {type(value).__name__}: {value!r}")
        value = float(value)
        if not math.isfinite(value):
            raise InvalidValueError(f"DOUBLE {self.name} refuses a non-finite value: {value}")
        return value

    def add(self, delta: float = 1.0) -> None:
        """Add ``delta`` (default 1.0): the hot path, one lock and one add."""
        with self._lock:
            if self._removed:
                self._bk._reattach(self)
            self._value += delta
            self._ts = _now()

    def add_and_get(self, delta: float = 1.0) -> float:
        """Add ``delta`` and return the new value (Artimon's ``addToDoubleVar``)."""
        with self._lock:
            if self._removed:
                self._bk._reattach(self)
            value = self._value = self._value + delta
            self._ts = _now()
        return value


class BooleanVar(Variable[bool]):
    """A boolean (served as 0/1 to numeric stores)."""

    __slots__ = ()
    type = VarType.BOOLEAN
    _initial = False

    def _check(self, value: object) -> bool:
        if not isinstance(value, bool):
            raise TypeError(f"a BOOLEAN variable takes a bool, got {type(value).__name__}: {value!r}")
        return value


class StringVar(Variable[str]):
    """A text value (at most 65,536 characters)."""

    __slots__ = ()
    type = VarType.STRING
    _initial = ""
    max_length: ClassVar[int] = 65536

    def _check(self, value: object) -> str:
        if not isinstance(value, str):
            raise TypeError(f"a STRING variable takes a str, got {type(value).__name__}: {value!r}")
        if len(value) > self.max_length:
            raise InvalidValueError(
                f"STRING {self.name} value has {len(value)} characters, at most {self.max_length}"
            )
        return value
