"""Variable names and labels: the rules, and their canonical text form.

Rules (every breach raises a ``ValueError`` subclass naming the offender):

- a name is 1 to 200 characters of ``A-Z a-z 0-9 _ . : -`` and starts with a letter or ``_``;
- a label key is 1 to 100 characters of ``A-Z a-z 0-9 _ . -`` and starts with a letter or ``_``;
- a label value is 1 to 1,024 characters of any text without control characters;
- a variable has at most 32 labels of its own (framework labels are not counted).

The canonical text of a label set sorts the keys and joins ``key=value`` pairs with ``,``;
in values, ``%``, ``,``, ``=``, ``{``, ``}``, ``'`` and whitespace are percent-encoded so
that the text splits back unambiguously (the Warp 10 input format does the same).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from functools import lru_cache, wraps
from typing import TypeVar
from urllib.parse import quote, unquote

import numpy as np

from bookkeeper.exceptions import InvalidLabelError, InvalidNameError

__all__ = [
    "MAX_LABELS",
    "MAX_LABEL_KEY_LENGTH",
    "MAX_LABEL_VALUE_LENGTH",
    "MAX_NAME_LENGTH",
    "format_labels",
    "format_series",
    "merged_label_texts",
    "parse_labels",
    "parse_series",
    "parse_series_shared",
    "series_keys",
    "validate_labels",
    "validate_name",
]

MAX_NAME_LENGTH = 200
MAX_LABEL_KEY_LENGTH = 100
MAX_LABEL_VALUE_LENGTH = 1024
MAX_LABELS = 32

_NAME_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_.:\-]*\Z")
_KEY_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_.\-]*\Z")
_CONTROL_RE = re.compile(r"[\x00-\x1f\x7f]")
# Everything printable stays readable; only the separators and whitespace are encoded.
_SAFE = '!"#$&()*+-./:;<>?@[\\]^_`|~'


def validate_name(name: str) -> str:
    """Return ``name`` if it is a valid variable name, else raise ``InvalidNameError``."""
    if not isinstance(name, str):
        raise InvalidNameError(f"variable name must be a str, got {type(name).__name__}: {name!r}")
    if not 0 < len(name) <= MAX_NAME_LENGTH:
        raise InvalidNameError(
            f"variable name must be 1 to {MAX_NAME_LENGTH} characters, got {len(name)}: {name[:60]!r}"
        )
    if not _NAME_RE.match(name):
        raise InvalidNameError(
            f"invalid variable name {name!r}: use letters, digits, '_', '.', ':' or '-', "
            "starting with a letter or '_'"
        )
    return name


def validate_labels(labels: Mapping[str, str]) -> dict[str, str]:
    """Return a plain dict copy of ``labels`` if valid, else raise ``InvalidLabelError``."""
    if len(labels) > MAX_LABELS:
        raise InvalidLabelError(f"at most {MAX_LABELS} labels per variable, got {len(labels)}")
    checked: dict[str, str] = {}
    for key, value in labels.items():
        if not isinstance(key, str) or not 0 < len(key) <= MAX_LABEL_KEY_LENGTH:
            raise InvalidLabelError(
                f"label key must be a str of 1 to {MAX_LABEL_KEY_LENGTH} characters: {key!r}"
            )
        if not _KEY_RE.match(key):
            raise InvalidLabelError(
                f"invalid label key {key!r}: use letters, digits, '_', '.' or '-', "
                "starting with a letter or '_'"
            )
        if not isinstance(value, str):
            raise InvalidLabelError(
                f"label {key!r} must have a str value, got {type(value).__name__}: {value!r}"
            )
        if not 0 < len(value) <= MAX_LABEL_VALUE_LENGTH:
            raise InvalidLabelError(
                f"label {key!r} value must be 1 to {MAX_LABEL_VALUE_LENGTH} characters, "
                f"got {len(value)}: {value[:60]!r}"
            )
        if _CONTROL_RE.search(value):
            raise InvalidLabelError(f"label {key!r} value has a control character: {value!r}")
        checked[key] = value
    return checked


def _escape(value: str) -> str:
    return quote(value, safe=_SAFE)


def format_labels(labels: Mapping[str, str]) -> str:
    """Canonical text of a label set: ``k1=v1,k2=v2`` with keys sorted, values escaped."""
    return ",".join(f"{key}={_escape(labels[key])}" for key in sorted(labels))


def format_series(name: str, labels: Mapping[str, str]) -> str:
    """Canonical text of a series: ``name{k1=v1,k2=v2}``."""
    return f"{name}{{{format_labels(labels)}}}"


# Texts are cached only if this short: senders choose them, and 2^18 long ones (a label set
# may be 33 KB) would hold gigabytes (found by tests/fuzz: 5,000 lines of 30 KB label sets
# kept 468 MiB); a longer text is parsed each time it comes.
_CACHED_TEXT = 512
_T = TypeVar("_T")
_CACHED = 1 << 18  # label sets and series repeat from round to round and query to query


def _short_cached(function: Callable[[str], _T]) -> Callable[[str], _T]:
    cached = lru_cache(maxsize=_CACHED)(function)

    @wraps(function)
    def lookup(text: str) -> _T:
        return cached(text) if len(text) <= _CACHED_TEXT else function(text)

    return lookup


@_short_cached
def _parse_labels_cached(text: str) -> tuple[tuple[str, str], ...]:
    if not text:
        return ()
    pairs = []
    for item in text.split(","):
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise InvalidLabelError(f"label {item!r} is not key=value in {text!r}")
        pairs.append((key, unquote(value, errors="strict")))
    return tuple(pairs)


def parse_labels(text: str) -> dict[str, str]:
    """Inverse of :func:`format_labels` (cached: label sets repeat from round to round)."""
    try:
        return dict(_parse_labels_cached(text))
    except UnicodeDecodeError as exc:
        raise InvalidLabelError(f"label set {text!r} has a bad percent-escape: {exc}") from None


def parse_series(text: str) -> tuple[str, dict[str, str]]:
    """Inverse of :func:`format_series`: ``name{k=v}`` to ``(name, labels)`` (a new dict)."""
    name, labels = parse_series_shared(text)
    return name, dict(labels)


@_short_cached
def parse_series_shared(text: str) -> tuple[str, dict[str, str]]:
    """:func:`parse_series` from a cache: the dict is shared, so it must not be changed."""
    name, brace, rest = text.partition("{")
    if not brace or not rest.endswith("}"):
        raise InvalidNameError(f"series {text!r} is not name{{labels}}")
    try:
        return validate_name(name), dict(_parse_labels_cached(rest[:-1]))
    except UnicodeDecodeError as exc:
        raise InvalidLabelError(f"label set {rest[:-1]!r} has a bad percent-escape: {exc}") from None


@_short_cached  # label sets repeat across the endpoints of an application
def _label_items(text: str) -> tuple[tuple[str, str], ...]:
    """A label set's canonical ``key=value`` items by key: merging items keeps the canonical
    form (``format_labels``) without escaping the values again."""
    canonical = format_labels(parse_labels(text))
    return tuple((item.partition("=")[0], item) for item in canonical.split(",")) if canonical else ()


def series_keys(
    common: Mapping[str, str],
    names: Sequence[str],
    label_sets: Sequence[str],
    name_ids: np.ndarray,
    set_ids: np.ndarray,
) -> list[str]:
    """The series identity of each sample of a batch: the canonical key
    ``name{labels}`` of ``names[name_ids[i]]`` with the ``common`` (framework) labels and the
    label set ``label_sets[set_ids[i]]`` merged, the sample's own labels winning. Each label
    set is merged once, whatever the number of samples. ``ValueError`` for an id out of its
    list."""
    if len(name_ids) != len(set_ids):
        raise ValueError(f"{len(name_ids)} name ids but {len(set_ids)} label set ids")
    if len(name_ids) and (name_ids.min() < 0 or name_ids.max() >= len(names)):
        raise ValueError(f"a name id out of the {len(names)} names")
    if len(set_ids) and (set_ids.min() < 0 or set_ids.max() >= len(label_sets)):
        raise ValueError(f"a label set id out of the {len(label_sets)} label sets")
    bodies = merged_label_texts(common, label_sets)
    return [f"{names[n]}{{{bodies[s]}}}" for n, s in zip(name_ids.tolist(), set_ids.tolist(), strict=True)]


def merged_label_texts(common: Mapping[str, str], label_sets: Sequence[str]) -> list[str]:
    """The canonical text of each label set with the ``common`` (framework) labels merged,
    the set's own labels winning: the label part of each of its series' identity, made once
    per label set however many samples use it."""
    common_items = dict(_label_items(format_labels(common)))
    out = []
    for text in label_sets:
        merged = common_items.copy()
        merged.update(_label_items(text))
        out.append(",".join(merged[key] for key in sorted(merged)))
    return out
