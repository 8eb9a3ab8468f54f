"""The series index: series to ids, postings (series ids per name and per label value) that
answer a selector without looking at every series, and the labels of each series by code,
which give a query the labels of the series it fetched by columns.

A series is its name and its sorted labels, held as codes: each value of a label (the name
is the label ``__name__``) gets a code, in order of first appearance. Series with the same
label names share a *shape*; a shape keeps the codes of its series as rows of an
``array('i')``, name first, then its labels sorted. Per series: its shape and its row (4
bytes each), 4 bytes per label and name, and its slot in the hash table: no key text. A
series' canonical key ``name{k=v,...}`` is made from its codes only where an API answers
text (:meth:`SeriesIndex.keys_of`: ``series()``, snapshots, the write-ahead log's names).
Ids are dense, in order of arrival, never reused. Postings are ``array('i')``, turned into
sorted numpy arrays when a query reads them and cached until the posting grows.

A batch comes with its symbol table (:meth:`SeriesIndex.lookup_columns`): each distinct name
and label set is resolved once and every sample's row made by numpy (``symbols.py``). Rows
are found by their hashes in a numpy hash table (``key_table.py``), a batch at a time, each
hit confirmed by comparing the stored row with the batch's (a row whose hash another series
holds is kept aside, in ``_collided``). New series are created a whole batch at a time:
rows appended by shape, postings a run of ids at a time. Keys given as text
(:meth:`SeriesIndex.lookup`: replays, snapshots, tests) are split into such a symbol table
first.

A batch seen before is found whole: agents send the same series in the same order every
round, so the ids of a batch are remembered by the keyed hashes of its symbol table and
references (``_batches``, bounded: :func:`_digest`), and the same batch a round later takes
them without resolving anything.
"""

from __future__ import annotations

import itertools
import threading
from array import array
from collections.abc import Callable, Sequence
from urllib.parse import unquote

import numpy as np

from bookkeeper import InvalidLabelError, InvalidNameError
from bookkeeper.ground import LabelColumn, LabelColumns
from bookkeeper.wire import format_series
from vhms.exceptions import SeriesLimitError
from vhms.results import NAME
from vhms.selector import Matcher, Selector
from vhms.server.key_table import KeyTable
from vhms.server.symbols import resolve, row_hashes

__all__ = ["SeriesIndex"]

_MEMO_MIN = 64  # batches of fewer samples are resolved each time
_MEMO_FLOOR = 1 << 20  # ids the memo may hold, at least (else twice the series)


class SeriesIndex:
    def __init__(self, max_series: int = 2_000_000) -> None:
        self.max_series = max_series
        self._table = KeyTable()  # row hash -> id (vhms/server/key_table.py)
        self._collided: dict[tuple[int, bytes], int] = {}  # (shape, row) of rows whose hash another holds
        self._postings: dict[str, dict[str, array[int]]] = {}  # label -> value -> ids
        self._cache: dict[tuple[str, str], tuple[int, np.ndarray]] = {}
        self._values: dict[str, list[str]] = {}  # label -> its values, by code
        self._codes: dict[str, dict[str, int]] = {}  # label -> value -> code
        self._shapes: list[tuple[str, ...]] = []  # shape -> (__name__, its labels sorted...)
        self._shape_numbers: dict[tuple[str, ...], int] = {}
        self._shape_rows: list[array[int]] = []  # shape -> codes of its series, row after row
        self._shape_of = array("i")  # series id -> shape
        self._row_of = array("i")  # series id -> row in its shape
        self._label_numbers: dict[str, int] = {NAME: 0}  # label -> its number in refs
        self._label_list: list[str] = [NAME]
        self._pairs: dict[str, int] = {}  # a label set's "k=v" token -> label number << 32 | code
        self._lock = threading.Lock()
        self.refused = 0  # new series refused by max_series
        self._batches: dict[tuple[int, ...], np.ndarray] = {}  # a batch's _digest -> its ids
        self._batch_ids = 0

    def __len__(self) -> int:
        return len(self._shape_of)

    # -- finding and creating series ---------------------------------------------------------

    def lookup(self, keys: Sequence[str]) -> np.ndarray:
        """Ids of canonical keys ``name{k=v,...}`` (split into a symbol table first), creating
        new series; ``-1`` where ``max_series`` refused one."""
        names: dict[str, int] = {}
        sets: dict[str, int] = {}
        name_ids = np.empty(len(keys), dtype=np.int32)
        set_ids = np.empty(len(keys), dtype=np.int32)
        for position, key in enumerate(keys):
            name, brace, rest = key.partition("{")
            if not brace or not rest.endswith("}"):
                raise InvalidNameError(f"series {key!r} is not name{{labels}}")
            name_ids[position] = names.setdefault(name, len(names))
            set_ids[position] = sets.setdefault(rest[:-1], len(sets))
        return self.lookup_columns(list(names), list(sets), name_ids, set_ids)

    def lookup_columns(
        self, names: Sequence[str], label_sets: Sequence[str], name_ids: np.ndarray, set_ids: np.ndarray
    ) -> np.ndarray:
        """Ids of the series of a batch's samples given by its symbol table (names, canonical
        label texts, a reference into each per sample), creating new series; ``-1`` where
        ``max_series`` refused one. ``InvalidNameError`` / ``InvalidLabelError`` for a name or
        a label set that does not parse (the batch then creates nothing)."""
        if not len(name_ids):
            return np.zeros(0, dtype=np.int64)
        digest = _digest(names, label_sets, name_ids, set_ids) if len(name_ids) >= _MEMO_MIN else None
        if digest is not None:
            remembered = self._batches.get(digest)
            if remembered is not None:
                return remembered.astype(np.int64)
        with self._lock:
            resolved = resolve(self, names, label_sets, name_ids, set_ids)
            ids = np.full(len(name_ids), -1, dtype=np.int64)
            # per shape: the first position of each new row, the new rows, their hashes, where
            # they occur
            new: list[tuple[int, np.ndarray, np.ndarray, np.ndarray, np.ndarray]] = []
            for shape, (positions, rows) in resolved.groups.items():
                hashes = row_hashes(shape, rows)
                found = self._find(shape, rows, hashes)
                ids[positions] = found
                missing = np.flatnonzero(found < 0)
                if len(missing):
                    first, inverse = _distinct(rows[missing], hashes[missing])
                    chosen = missing[first]
                    new.append((shape, positions[chosen], rows[chosen], hashes[chosen], positions[missing]))
                    ids[positions[missing]] = -2 - inverse  # the new row's number, for now
            if new:
                self._create(new, ids)
        if digest is not None and (ids >= 0).all():
            self._remember(digest, ids)
        return ids

    def _find(self, shape: int, rows: np.ndarray, hashes: np.ndarray) -> np.ndarray:
        """Ids of the stored series of ``shape`` with these rows (``hashes``: theirs), -1 for
        the others (with the lock held)."""
        ids = self._table.find(hashes)
        hit = np.flatnonzero(ids >= 0)
        if not len(hit):
            return ids
        candidates = ids[hit]
        stored_shape = np.frombuffer(self._shape_of, dtype=np.int32)[candidates]
        same = stored_shape == shape
        stored = np.frombuffer(self._shape_rows[shape], dtype=np.int32).reshape(-1, rows.shape[1])
        row_of = np.frombuffer(self._row_of, dtype=np.int32)[candidates[same]]
        equal = np.zeros(len(hit), dtype=bool)
        equal[same] = (stored[row_of] == rows[hit[same]]).all(axis=1)
        del stored  # release the buffer
        for position in hit[~equal].tolist():  # a hash shared by two rows: rare
            ids[position] = self._collided.get((shape, rows[position].tobytes()), -1)
        return ids

    def _create(
        self, new: list[tuple[int, np.ndarray, np.ndarray, np.ndarray, np.ndarray]], ids: np.ndarray
    ) -> None:
        """Create the new series of a batch (per shape: the first position of each new row,
        the rows, their hashes, and where they occur, ``ids`` holding ``-2 - row number``
        there), in order of first appearance, up to ``max_series`` (the refused counted per
        occurrence)."""
        firsts = np.concatenate([first for _, first, _, _, _ in new])
        order = np.argsort(firsts, kind="stable")
        room = max(self.max_series - len(self), 0)
        new_ids = np.full(len(firsts), -1, dtype=np.int64)
        new_ids[order[:room]] = np.arange(len(self), len(self) + min(room, len(firsts)))
        offset = 0
        shape_of = np.empty(min(room, len(firsts)), dtype=np.int32)
        row_of = np.empty(len(shape_of), dtype=np.int32)
        base = len(self)
        posted: list[tuple[int, np.ndarray, np.ndarray, np.ndarray]] = []  # shape, ids, rows, hashes
        for shape, _, rows, hashes, where in new:
            mine = new_ids[offset : offset + len(rows)]
            offset += len(rows)
            occurrences = ids[where]
            ids[where] = mine[-2 - occurrences]
            self.refused += int((ids[where] < 0).sum())
            kept = np.flatnonzero(mine >= 0)
            if not len(kept):
                continue
            kept = kept[np.argsort(mine[kept], kind="stable")]
            stored = self._shape_rows[shape]
            first_row = len(stored) // rows.shape[1]  # a shape has its name column at least
            shape_of[mine[kept] - base] = shape
            row_of[mine[kept] - base] = np.arange(first_row, first_row + len(kept), dtype=np.int32)
            stored.frombytes(np.ascontiguousarray(rows[kept]).tobytes())
            posted.append((shape, mine[kept], rows[kept], hashes[kept]))
        self._shape_of.frombytes(shape_of.tobytes())
        self._row_of.frombytes(row_of.tobytes())
        self._post(posted)
        for shape, series_ids, rows, hashes in posted:
            self._insert(shape, rows, series_ids, hashes)

    def _insert(self, shape: int, rows: np.ndarray, ids: np.ndarray, hashes: np.ndarray) -> None:
        """Enter new series in the hash table; a row whose hash another holds (in the table,
        or before it in this batch) is kept aside instead."""
        clash = self._table.find(hashes) >= 0
        _, first = np.unique(hashes, return_index=True)
        if len(first) < len(hashes):
            clash[np.setdiff1d(np.arange(len(hashes)), first)] = True
        for position in np.flatnonzero(clash).tolist():
            self._collided[(shape, rows[position].tobytes())] = int(ids[position])
        self._table.insert(hashes[~clash], ids[~clash])

    def _post(self, posted: list[tuple[int, np.ndarray, np.ndarray, np.ndarray]]) -> None:
        """Append new series to the postings of their names and label values, a run of
        ascending ids per posting."""
        refs = []
        owners = []
        for shape, series_ids, rows, _ in posted:
            for column, label in enumerate(self._shapes[shape]):
                refs.append((np.int64(self._label_number(label)) << 32) | rows[:, column].astype(np.int64))
                owners.append(series_ids)
        if not refs:
            return
        ref = np.concatenate(refs)
        owner = np.concatenate(owners)
        # one shape's ids ascend already: a stable sort by ref keeps them so
        order = np.argsort(ref, kind="stable") if len(posted) == 1 else np.lexsort((owner, ref))
        ref, owner = ref[order], owner[order].astype(np.int32)
        edges = [0, *(np.flatnonzero(np.diff(ref)) + 1).tolist(), len(ref)]
        for start, stop in itertools.pairwise(edges):
            label = self._label_list[int(ref[start]) >> 32]
            value = self._values[label][int(ref[start]) & 0xFFFFFFFF]
            values = self._postings.setdefault(label, {})
            posting = values.get(value)
            if posting is None:
                posting = values[value] = array("i")
            posting.frombytes(owner[start:stop].tobytes())

    def _label_number(self, label: str) -> int:
        number = self._label_numbers.get(label)
        if number is None:
            number = self._label_numbers[label] = len(self._label_list)
            self._label_list.append(label)
        return number

    def code(self, label: str, value: str) -> int:
        """The code of ``value`` in ``label``, given in order of first appearance."""
        codes = self._codes.get(label)
        if codes is None:
            codes, self._values[label] = self._codes.setdefault(label, {}), []
        code = codes.get(value)
        if code is None:
            code = codes[value] = len(codes)
            self._values[label].append(value)
        return code

    def shape_number(self, shape: tuple[str, ...]) -> int:
        number = self._shape_numbers.get(shape)
        if number is None:
            number = self._shape_numbers[shape] = len(self._shapes)
            self._shapes.append(shape)
            self._shape_rows.append(array("i"))
        return number

    def pair_ref(self, token: str) -> int:
        """``label number << 32 | code`` of a ``k=v`` token of a label set, parsed once and
        remembered (``InvalidLabelError`` if it does not parse, as ``parse_labels`` says)."""
        ref = self._pairs.get(token)
        if ref is None:
            label, sep, value = token.partition("=")
            if not sep or not label:
                raise InvalidLabelError(f"label {token!r} is not key=value")
            try:
                text = unquote(value, errors="strict")
            except UnicodeDecodeError as exc:
                raise InvalidLabelError(f"label {token!r} has a bad percent-escape: {exc}") from None
            ref = self._pairs[token] = self._label_number(label) << 32 | self.code(label, text)
        return ref

    def labels_by_number(self) -> list[str]:
        return self._label_list

    def _remember(self, digest: tuple[int, ...], ids: np.ndarray) -> None:
        """Keep a batch's ids, forgetting the oldest batches beyond the memo's bound."""
        with self._lock:
            bound = max(2 * len(self), _MEMO_FLOOR)
            previous = self._batches.pop(digest, None)
            if previous is not None:
                self._batch_ids -= len(previous)
            self._batches[digest] = ids.astype(np.int32)
            self._batch_ids += len(ids)
            while self._batch_ids > bound:
                self._batch_ids -= len(self._batches.pop(next(iter(self._batches))))

    def require(self, key: str) -> int:
        """The id of ``key``, created if new; ``SeriesLimitError`` when refused."""
        series_id = int(self.lookup([key])[0])
        if series_id < 0:
            raise SeriesLimitError(f"the store holds max_series={self.max_series} series; {key} refused")
        return series_id

    # -- reading -----------------------------------------------------------------------------

    def labels(self, series_id: int) -> tuple[str, dict[str, str]]:
        """The name and labels of one series."""
        columns = self.columns(np.array([series_id], dtype=np.int64))
        found = {label: values[codes[0]] for label, (values, codes) in columns.items() if codes[0] >= 0}
        return found.pop(NAME), found

    def keys_of(self, ids: np.ndarray | Sequence[int]) -> list[str]:
        """The canonical key ``name{k=v,...}`` of each series ``ids`` (made from its codes, one
        by one: for the APIs that answer text and the cold edges that store it)."""
        wanted = np.asarray(ids, dtype=np.int64)
        columns = [(label, values, codes.tolist()) for label, (values, codes) in self.columns(wanted).items()]
        out = []
        for row in range(len(wanted)):
            found = {label: values[codes[row]] for label, values, codes in columns if codes[row] >= 0}
            out.append(format_series(found.pop(NAME), found))
        return out

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
        total = len(self)
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


def _distinct(rows: np.ndarray, hashes: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The first position of each distinct row and each row's number among them, found by
    the rows' hashes (one sort of int64), by the rows themselves when two rows share one."""
    _, first, inverse = np.unique(hashes, return_index=True, return_inverse=True)
    inverse = inverse.reshape(-1)
    if not (rows[first][inverse] == rows).all():  # a hash shared by two rows: rare
        _, first, inverse = np.unique(rows, axis=0, return_index=True, return_inverse=True)
        inverse = inverse.reshape(-1)
    return first, inverse


def _digest(
    names: Sequence[str], label_sets: Sequence[str], name_ids: np.ndarray, set_ids: np.ndarray
) -> tuple[int, ...]:
    """What identifies a batch seen before: its tables' sizes and the hashes of its tables
    (Python's string hash: SipHash with a key of this process, remembered by each string)
    and of its references, 256 bits of keyed hash in all."""
    return (
        len(names),
        len(label_sets),
        hash(tuple(names)),
        hash(tuple(label_sets)),
        hash(np.ascontiguousarray(name_ids, dtype=np.int32).tobytes()),
        hash(np.ascontiguousarray(set_ids, dtype=np.int32).tobytes()),
    )
