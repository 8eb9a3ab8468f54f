"""The series index: series keys to ids, postings (series ids per name and per label
value) that answer a selector without looking at every series, and the labels of each
series by code, which give a query the labels of the series it fetched by columns.

A series is its canonical key ``name{k=v,...}`` (``bookkeeper.labels.format_series``);
ids are dense, in order of arrival, never reused. Postings are ``array('i')`` (4 bytes a
series and label), turned into sorted numpy arrays when a query reads them and cached
until the posting grows.

New series are created by columns (``vhms/server/key_tokens.py``): a round's new keys are cut into
tokens by numpy and pyarrow, only the distinct tokens (a name, a ``k=v`` pair) are parsed in
Python, once, and the postings and codes of the new series are appended a whole run of ids at
a time; a key that is not plainly canonical is parsed on its own (the same rules).

Keys are found by their hashes in a numpy hash table (``vhms/server/key_table.py``), a batch at a
time, and the hits confirmed by comparing the batch's text with the stored keys' (joined:
one comparison); the keys themselves are kept once, in ``keys`` (by id).

A batch seen before is found whole (``_memo``): agents send the same keys in the same order
every round, so the ids of a batch are remembered by its keys' text joined by newlines (its
hash and length), and a round's batch with the same text takes them after one comparison
of that text with the stored keys of those ids (a join and a memcmp, a few ns a key, where
a dict lookup of each key of a store of a million series costs 200-300 ns: a cache miss or
two). A key holds no newline (one would be refused), so equal texts of as many keys are
equal keys one by one.

Labels by code: each value of a label (the name is the label ``__name__``) gets a code, in
order of first appearance. Series with the same label names share a shape; a shape keeps
the codes of its series as rows of an ``array('i')``, name first, then the labels in key
order. Per series: its shape and its row (4 bytes each), and 4 bytes per label and name.
"""

from __future__ import annotations

import itertools
import threading
from array import array
from collections.abc import Callable
from urllib.parse import unquote

import numpy as np

from bookkeeper import InvalidNameError
from bookkeeper.ground import LabelColumn, LabelColumns
from bookkeeper.wire import parse_series, validate_name
from vhms.exceptions import SeriesLimitError
from vhms.results import NAME
from vhms.selector import Matcher, Selector
from vhms.server.key_table import KeyTable, table_hashes
from vhms.server.key_tokens import KeyTokens, split_keys

__all__ = ["SeriesIndex"]


_MEMO_MIN = 64  # batches of fewer keys are looked up key by key
_SLICE = 1 << 14  # a larger batch (a snapshot's every key) goes through in slices of this many
_MEMO_FLOOR = 1 << 20  # ids the memo may hold, at least (else twice the series)


class SeriesIndex:
    def __init__(self, max_series: int = 2_000_000) -> None:
        self.max_series = max_series
        self.keys: list[str] = []
        self._table = KeyTable()  # key hash -> id (vhms/server/key_table.py)
        self._collided: dict[str, int] = {}  # keys whose hash another key holds in the table
        self._postings: dict[str, dict[str, array[int]]] = {}  # label -> value -> ids
        self._cache: dict[tuple[str, str], tuple[int, np.ndarray]] = {}
        self._values: dict[str, list[str]] = {}  # label -> its values, by code
        self._codes: dict[str, dict[str, int]] = {}  # label -> value -> code
        self._shapes: list[tuple[str, ...]] = []  # shape -> (__name__, its labels...)
        self._shape_numbers: dict[tuple[str, ...], int] = {}
        self._shape_rows: list[array[int]] = []  # shape -> codes of its series, row after row
        self._shape_of = array("i")  # series id -> shape
        self._row_of = array("i")  # series id -> row in its shape
        # distinct tokens already parsed (a name; a "k=v" pair) to their label's number and
        # their value's code, -1 for a token that does not parse (its key goes the slow way)
        self._name_tokens: dict[str, int] = {}  # token -> label number << 32 | code; -1
        self._pair_tokens: dict[str, int] = {}
        self._label_numbers: dict[str, int] = {NAME: 0}
        self._label_list: list[str] = [NAME]
        self._lock = threading.Lock()
        self.refused = 0  # new series refused by max_series
        # (key count, hash of the keys joined by newlines) -> their ids, oldest first
        self._memo: dict[tuple[int, int], np.ndarray] = {}
        self._memo_ids = 0

    def __len__(self) -> int:
        return len(self.keys)

    def lookup(self, keys: list[str]) -> np.ndarray:
        """Ids of ``keys``, creating new series; ``-1`` where ``max_series`` refused one."""
        if len(keys) > _SLICE:  # temporaries that stay in cache: a million keys at once is half as fast
            return np.concatenate([self.lookup(keys[i : i + _SLICE]) for i in range(0, len(keys), _SLICE)])
        if len(keys) < _MEMO_MIN:
            return self._lookup(keys)
        joined = "\n".join(keys)
        signature = (len(keys), hash(joined))
        remembered = self._memo.get(signature)
        if remembered is not None and self._joined(remembered) == joined:
            return remembered.astype(np.int64)
        ids = self._lookup(keys)
        if (ids >= 0).all():  # every key a stored one: none holds a newline
            self._remember(signature, ids)
        return ids

    def _joined(self, ids: np.ndarray) -> str:
        """The stored keys of ``ids`` joined by newlines (a run of consecutive ids a slice)."""
        keys = self.keys
        breaks = np.flatnonzero(np.diff(ids) != 1) + 1
        if len(breaks) > len(ids) >> 4:
            return "\n".join(map(keys.__getitem__, ids.tolist()))
        starts = [0, *breaks.tolist()]
        stops = [*breaks.tolist(), len(ids)]
        first = ids[starts].tolist()
        return "\n".join(
            "\n".join(keys[start : start + stop - begin])
            for start, begin, stop in zip(first, starts, stops, strict=True)
        )

    def _remember(self, signature: tuple[int, int], ids: np.ndarray) -> None:
        """Keep a batch's ids, forgetting the oldest batches beyond the memo's bound."""
        with self._lock:
            bound = max(2 * len(self.keys), _MEMO_FLOOR)
            previous = self._memo.pop(signature, None)
            if previous is not None:
                self._memo_ids -= len(previous)
            self._memo[signature] = ids.astype(np.int32)
            self._memo_ids += len(ids)
            while self._memo_ids > bound:
                self._memo_ids -= len(self._memo.pop(next(iter(self._memo))))

    def _lookup(self, keys: list[str]) -> np.ndarray:
        """Ids of ``keys`` by their hashes (new series created as :meth:`lookup` says)."""
        hashes = self._hashes(keys)
        with self._lock:
            known = len(self.keys)
            ids = self._find(keys, hashes)
        missing = np.flatnonzero(ids < 0)
        if len(missing):
            new = keys if len(missing) == len(keys) else [keys[position] for position in missing.tolist()]
            with self._lock:
                first = len(self.keys)
                if self._add_all(new, first > known, hashes[missing]):  # all new, distinct, in order
                    ids[missing] = np.arange(first, first + len(new))
                else:
                    ids[missing] = self._find(new, hashes[missing])
        return ids

    @staticmethod
    def _hashes(keys: list[str]) -> np.ndarray:
        """The table's hashes of ``keys`` (a method: tests narrow it to make collisions)."""
        return table_hashes(keys)

    def _find(self, keys: list[str], hashes: np.ndarray) -> np.ndarray:
        """Ids of the stored ``keys`` (-1 for the others), their texts checked against the
        stored keys (with the lock held)."""
        ids = self._table.find(hashes)
        hit = np.flatnonzero(ids >= 0)
        if not len(hit):
            return ids
        candidates = ids[hit]
        hit_keys = keys if len(hit) == len(keys) else [keys[position] for position in hit.tolist()]
        if "\n".join(hit_keys) != self._joined(candidates):  # a hash shared by two keys: rare
            stored = self.keys
            for position, key, series_id in zip(hit.tolist(), hit_keys, candidates.tolist(), strict=True):
                if stored[series_id] != key:
                    ids[position] = self._collided.get(key, -1)
        return ids

    def _insert(
        self, keys: list[str], ids: np.ndarray, hashes: np.ndarray | None = None, distinct: bool = False
    ) -> None:
        """Enter new series in the table (``hashes``: theirs, if known, and ``distinct`` if
        no two of their hashes are equal); a key whose hash another key holds (in the table, or before it in
        this batch) is kept aside instead."""
        if hashes is None:
            hashes = self._hashes(keys)
        clash = self._table.find(hashes) >= 0
        if not distinct:
            _, first = np.unique(hashes, return_index=True)
            if len(first) < len(keys):
                clash[np.setdiff1d(np.arange(len(keys)), first)] = True
        if clash.any():
            for position in np.flatnonzero(clash).tolist():
                self._collided[keys[position]] = int(ids[position])
            hashes, ids = hashes[~clash], ids[~clash]
        self._table.insert(hashes, ids)

    def _add_all(self, new: list[str], recheck: bool, hashes: np.ndarray) -> bool:
        """Create the series of ``new`` (keys, repeats allowed, none known when looked up;
        ``recheck``: series were created since; ``hashes``: theirs) that do not exist yet,
        in order of first appearance, up to ``max_series`` (the refused ones counted per
        occurrence). True when each key of ``new`` got the next id in turn."""
        ordered = np.sort(hashes)
        distinct = not (ordered[1:] == ordered[:-1]).any()  # no two hashes equal, nor keys
        fresh = list(new) if distinct else list(dict.fromkeys(new))
        if "\n" in "".join(fresh):  # no canonical key has one; the memo relies on it (module doc)
            bad = next(key for key in fresh if "\n" in key)
            raise InvalidNameError(f"series {bad!r} has a newline")
        if recheck:
            known = self._find(fresh, self._hashes(fresh)).tolist()
            fresh = [key for key, series_id in zip(fresh, known, strict=True) if series_id < 0]
        room = max(self.max_series - len(self.keys), 0)
        if len(fresh) > room:
            refused = set(fresh[room:])
            self.refused += sum(1 for key in new if key in refused)
            fresh = fresh[:room]
        if not fresh:
            return False
        tokens = split_keys(fresh)
        shapes, refs = self._resolve(tokens)
        fast = tokens.regular.copy()
        fast[np.flatnonzero(fast)[shapes < 0]] = False
        for position in np.flatnonzero(~fast).tolist():
            self._add(fresh[position])  # the slow way, which raises for a key that does not parse
        keep = shapes >= 0
        in_turn = bool(keep.all() and fast.all()) and len(fresh) == len(new)
        if keep.any():
            positions = _token_positions(tokens.first[keep], tokens.count[keep])
            self._add_columns(
                fresh if in_turn else [key for key, ok in zip(fresh, fast.tolist(), strict=True) if ok],
                shapes[keep],
                tokens.count[keep],
                refs[positions],
                tokens.token_ids[positions],
                hashes if in_turn else None,
                distinct,
            )
        return in_turn

    def _resolve(self, tokens: KeyTokens) -> tuple[np.ndarray, np.ndarray]:
        """Parse the distinct tokens not seen before. Returns, per regular key, the number of
        its shape or -1 (a token of it does not parse, or it repeats a label: the key goes
        the slow way), and per token ``label number << 32 | code of its value``."""
        distinct = tokens.distinct
        names = np.zeros(len(tokens.token_ids), dtype=bool)
        names[tokens.first] = True
        name_refs = np.full(len(distinct), -1, dtype=np.int64)
        for token_id in _present(tokens.token_ids[names], len(distinct)):
            name_refs[token_id] = self._token_ref(self._name_tokens, distinct[token_id], _parse_name)
        pair_refs = np.full(len(distinct), -1, dtype=np.int64)
        for token_id in _present(tokens.token_ids[~names], len(distinct)):
            pair_refs[token_id] = self._token_ref(self._pair_tokens, distinct[token_id], _parse_pair)
        refs = np.where(names, name_refs[tokens.token_ids], pair_refs[tokens.token_ids])
        labels = np.where(refs < 0, -1, refs >> 32)
        shapes = np.full(len(tokens.first), -1, dtype=np.int64)
        for width in _present(tokens.count, int(tokens.count.max(initial=0)) + 1):
            members = np.flatnonzero(tokens.count == width)
            columns = labels[tokens.first[members, None] + np.arange(width)]
            while len(members):  # a pass per distinct shape of this width: a handful
                label_numbers = columns[0].tolist()
                alike = (columns == columns[0]).all(axis=1)
                if min(label_numbers) >= 0 and len(set(label_numbers)) == width:
                    shape = tuple(self._label_list[number] for number in label_numbers)
                    shapes[members[alike]] = self._shape_number(shape)
                members, columns = members[~alike], columns[~alike]
        return shapes, refs

    def _token_ref(
        self, cache: dict[str, int], token: str, parse: Callable[[str], tuple[str, str] | None]
    ) -> int:
        """``label number << 32 | code`` of a token (a name or a pair), -1 if it does not parse."""
        ref = cache.get(token)
        if ref is None:
            parsed = parse(token)
            if parsed is None:
                ref = -1
            else:
                label, value = parsed
                number = self._label_numbers.get(label)
                if number is None:
                    number = self._label_numbers[label] = len(self._label_list)
                    self._label_list.append(label)
                ref = number << 32 | self._code(label, value)
            cache[token] = ref
        return ref

    def _code(self, label: str, value: str) -> int:
        """The code of ``value`` in ``label``, given in order of first appearance."""
        codes = self._codes.get(label)
        if codes is None:
            codes, self._values[label] = self._codes.setdefault(label, {}), []
        code = codes.get(value)
        if code is None:
            code = codes[value] = len(codes)
            self._values[label].append(value)
        return code

    def _shape_number(self, shape: tuple[str, ...]) -> int:
        number = self._shape_numbers.get(shape)
        if number is None:
            number = self._shape_numbers[shape] = len(self._shapes)
            self._shapes.append(shape)
            self._shape_rows.append(array("i"))
        return number

    def _add_columns(
        self,
        keys: list[str],
        shapes: np.ndarray,
        count: np.ndarray,
        refs: np.ndarray,
        token_ids: np.ndarray,
        hashes: np.ndarray | None,
        distinct: bool,
    ) -> None:
        """Append new series by columns (``refs``: their tokens' references, key after key,
        ``count`` each, ``token_ids`` those tokens'; ``hashes``: the keys', if known, and
        ``distinct`` if no two of the keys' hashes are equal): ids, codes by shape, postings a run of ids at a
        time."""
        base = len(self.keys)
        ids = np.arange(base, base + len(keys), dtype=np.int64)
        starts = np.cumsum(count) - count
        codes = (refs & 0xFFFFFFFF).astype(np.int32)
        row_of = np.empty(len(keys), dtype=np.int32)
        for number in _present(shapes, len(self._shapes)):
            members = np.flatnonzero(shapes == number)
            width = len(self._shapes[number])
            rows = self._shape_rows[number]
            first_row = len(rows) // width
            row_of[members] = np.arange(first_row, first_row + len(members), dtype=np.int32)
            rows.frombytes(np.ascontiguousarray(codes[starts[members, None] + np.arange(width)]).tobytes())
        self._shape_of.frombytes(shapes.astype(np.int32).tobytes())
        self._row_of.frombytes(row_of.tobytes())
        order = _grouping_order(refs, token_ids)
        sorted_refs = refs[order]
        posted = np.repeat(ids, count)[order].astype(np.int32)
        edges = [0, *(np.flatnonzero(np.diff(sorted_refs)) + 1).tolist(), len(order)]
        for start, stop in itertools.pairwise(edges):
            ref = int(sorted_refs[start])
            label = self._label_list[ref >> 32]
            values = self._postings.get(label)
            if values is None:
                values = self._postings[label] = {}
            value = self._values[label][ref & 0xFFFFFFFF]
            posting = values.get(value)
            if posting is None:
                posting = values[value] = array("i")
            posting.frombytes(posted[start:stop].tobytes())
        self.keys.extend(keys)
        self._insert(keys, ids, hashes, distinct)

    def _add(self, key: str) -> int:
        existing = int(self._find([key], self._hashes([key]))[0])
        if existing >= 0:
            return existing
        if len(self.keys) >= self.max_series:
            self.refused += 1
            return -1
        name, labels = parse_series(key)
        series_id = len(self.keys)
        self.keys.append(key)
        self._insert([key], np.array([series_id], dtype=np.int64))
        self._post(NAME, name, series_id)
        for label, value in labels.items():
            self._post(label, value, series_id)
        shape = (NAME, *labels)
        number = self._shape_number(shape)
        rows = self._shape_rows[number]
        self._shape_of.append(number)
        self._row_of.append(len(rows) // len(shape))
        rows.extend(self._code(label, value) for label, value in ((NAME, name), *labels.items()))
        return series_id

    def _post(self, label: str, value: str, series_id: int) -> None:
        values = self._postings.get(label)
        if values is None:
            values = self._postings[label] = {}
        posting = values.get(value)
        if posting is None:
            posting = values[value] = array("i")
        posting.append(series_id)

    def require(self, key: str) -> int:
        """The id of ``key``, created if new; ``SeriesLimitError`` when refused."""
        series_id = int(self.lookup([key])[0])
        if series_id < 0:
            raise SeriesLimitError(f"the store holds max_series={self.max_series} series; {key} refused")
        return series_id

    def labels(self, series_id: int) -> tuple[str, dict[str, str]]:
        return parse_series(self.keys[series_id])

    def label_names(self) -> list[str]:
        return sorted(label for label in self._postings if label != NAME)

    def label_values(self, label: str) -> list[str]:
        return sorted(self._postings.get(label, {}))

    def columns(self, ids: np.ndarray) -> LabelColumns:
        """The names (``"__name__"``) and labels of series ``ids`` by columns: per label, its
        values by code (a list that only grows: read it, never change it) and an int32 code
        per series, -1 where the series lacks the label."""
        out: LabelColumns = {}
        with self._lock:  # no array may be resized while numpy reads its buffer
            shape_of = np.frombuffer(self._shape_of, dtype=np.int32)[ids]
            row_of = np.frombuffer(self._row_of, dtype=np.int32)[ids]
            for number in np.unique(shape_of).tolist():
                shape = self._shapes[number]
                members = np.flatnonzero(shape_of == number)
                rows = np.frombuffer(self._shape_rows[number], dtype=np.int32).reshape(-1, len(shape))
                codes = rows[row_of[members]]
                del rows  # release the buffer before the lock
                for position, label in enumerate(shape):
                    if label not in out:
                        out[label] = LabelColumn(self._values[label], np.full(len(ids), -1, dtype=np.int32))
                    out[label][1][members] = codes[:, position]
        return out

    def _posting(self, label: str, value: str) -> np.ndarray:
        posting = self._postings[label][value]
        cached = self._cache.get((label, value))
        if cached is not None and cached[0] == len(posting):
            return cached[1]
        with self._lock:  # an append (a new series) must not meet a buffer numpy is reading
            ids = np.frombuffer(posting, dtype=np.int32).copy()  # appended in id order: sorted
        self._cache[(label, value)] = (len(posting), ids)
        return ids

    def _having(self, matcher: Matcher, check: Callable[[], None] | None) -> np.ndarray:
        """Sorted ids of series whose label satisfies a positive matcher (``=`` or ``~``);
        ``check`` is called while a regex runs through the label's values."""
        values = self._postings.get(matcher.label, {})
        if matcher.op == "=":
            return self._posting(matcher.label, matcher.value) if matcher.value in values else _EMPTY
        # a copy of the keys: a new series may add a value while the regex runs (no lock held)
        candidates = list(values)
        hits = matcher.matching(candidates, check)
        chosen = [self._posting(matcher.label, candidates[i]) for i in np.flatnonzero(hits).tolist()]
        if not chosen:
            return _EMPTY
        return chosen[0] if len(chosen) == 1 else np.sort(np.concatenate(chosen))

    def match(self, selector: Selector, check: Callable[[], None] | None = None) -> np.ndarray:
        """Sorted ids of the series ``selector`` picks; ``check`` is called between slices of
        the regexes' work (whatever it raises stops the selection)."""
        matchers = [m for m in (selector.name, *selector.matchers) if m is not None]
        positive = [m for m in matchers if m.op in ("=", "~")]
        negative = [m for m in matchers if m.op in ("!=", "!~")]
        total = len(self.keys)
        if positive:
            sets = sorted((self._having(m, check) for m in positive), key=len)
            result = sets[0]
            for other in sets[1:]:
                if not len(result):
                    break
                mask = np.zeros(total, dtype=bool)
                mask[other] = True
                result = result[mask[result]]
        else:
            result = np.arange(total, dtype=np.int32)
        for matcher in negative:
            if not len(result):
                break
            # "!=" and "!~" drop the series whose label is set and matches the positive form
            positive_form = Matcher(
                matcher.label, "=" if matcher.op == "!=" else "~", matcher.value, matcher.regex
            )
            excluded = self._having(positive_form, check)
            if len(excluded):
                mask = np.zeros(total, dtype=bool)
                mask[excluded] = True
                result = result[~mask[result]]
        return result.astype(np.int64, copy=False)


_EMPTY = np.zeros(0, dtype=np.int32)


def _present(ids: np.ndarray, size: int) -> list[int]:
    """The distinct values of ``ids`` (all in ``[0, size)``), ascending."""
    return np.flatnonzero(np.bincount(ids, minlength=size)).tolist()


def _grouping_order(refs: np.ndarray, token_ids: np.ndarray) -> np.ndarray:
    """A stable order of ``refs`` that puts equal ones together (the ids of a posting's run
    then ascend): by token when no two tokens have one ref (a radix sort of 16-bit token
    ids, where a batch has fewer than 65,536 distinct tokens), else by ref."""
    size = int(token_ids.max(initial=0)) + 1
    if size <= 1 << 16:
        ref_of = np.zeros(size, dtype=np.int64)
        ref_of[token_ids] = refs
        present = np.flatnonzero(np.bincount(token_ids, minlength=size))
        if len(np.unique(ref_of[present])) == len(present):
            return np.argsort(token_ids.astype(np.uint16), kind="stable")
    return np.argsort(refs, kind="stable")


def _token_positions(first: np.ndarray, count: np.ndarray) -> np.ndarray:
    """The token positions of keys given by their first token and token count, key after key."""
    starts = np.cumsum(count) - count
    return np.repeat(first - starts, count) + np.arange(int(count.sum()))


def _parse_name(token: str) -> tuple[str, str] | None:
    try:
        return NAME, validate_name(token)
    except ValueError:
        return None


def _parse_pair(token: str) -> tuple[str, str] | None:
    """``(label, value)`` of a ``k=v`` token as ``bookkeeper.labels.parse_labels`` reads it."""
    label, sep, value = token.partition("=")
    if not sep or not label:
        return None
    try:
        return label, unquote(value, errors="strict")
    except UnicodeDecodeError:
        return None
