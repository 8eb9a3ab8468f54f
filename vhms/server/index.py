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
Ids are dense, in order of arrival, never reused. Postings (ascending ids per name and per
label value) are kept by ``postings.py``.

A batch comes with its symbol table (:meth:`SeriesIndex.lookup_columns`): each distinct name
and label set is resolved once and every sample's row made by numpy (``symbols.py``). Rows
are found by their hashes in a numpy hash table (``key_table.py``), a batch at a time, each
hit confirmed by comparing the stored row with the batch's (a row whose hash another series
holds is kept aside, in ``_collided``). New series are created a whole batch at a time:
the rows not found are told distinct by one sort of their hashes (``new_rows.py``),
numbered by their rank among the batch's positions (no sort), rows
appended by shape, and their ids and codes handed to the postings per label, where they
wait to be grouped with those of the batches after them. Keys given as text
(:meth:`SeriesIndex.lookup`: replays, snapshots, tests) are split into such a symbol table
first.

A batch seen before is found whole: agents send the same series in the same order every
round, so the ids of a batch are remembered by the keyed hashes of its symbol table and
references (``_batches``, bounded: :func:`_digest`), and the same batch a round later takes
them without resolving anything.
"""

from __future__ import annotations

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
from vhms.server.new_rows import NewRows, new_rows
from vhms.server.postings import Postings
from vhms.server.symbols import resolve, row_hashes

__all__ = ["SeriesIndex"]

_MEMO_MIN = 64  # batches of fewer samples are resolved each time
_MEMO_FLOOR = 1 << 20  # ids the memo may hold, at least (else twice the series)


class SeriesIndex:
    def __init__(self, max_series: int = 2_000_000) -> None:
        self.max_series = max_series
        self._table = KeyTable()  # row hash -> id (vhms/server/key_table.py)
        self._collided: dict[tuple[int, bytes], int] = {}  # (shape, row) of rows whose hash another holds
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
        self._postings = Postings(self._values, self._lock)  # label -> value -> ids (postings.py)
        self.refused = 0  # new series refused by max_series
        self._batches: dict[tuple[int, ...], np.ndarray] = {}  # a batch's _digest -> its ids
        self._batch_ids = 0

    def __len__(self) -> int:
        return len(self._shape_of)

    def generation(self) -> int:
        """The number of series, read with the lock held, so that every series it counts is
        posted already: a selection matched after reading it holds at least those (the index
        only grows, so this number is what a remembered selection is valid for)."""
        with self._lock:
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
            fresh: list[NewRows] = []
            for shape, (positions, rows) in resolved.groups.items():
                hashes = row_hashes(shape, rows)
                found, taken = self._find(shape, rows, hashes)
                ids[positions] = found
                missing = np.flatnonzero(found < 0)
                if len(missing):
                    where, mine = positions[missing], rows[missing]
                    fresh.append(new_rows(shape, where, mine, hashes[missing], taken[missing]))
            if fresh:
                self._create(fresh, ids)
        if digest is not None and (ids >= 0).all():
            self._remember(digest, ids)
        return ids

    def _find(self, shape: int, rows: np.ndarray, hashes: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Ids of the stored series of ``shape`` with these rows (``hashes``: theirs), -1 for
        the others; and where the hash of a row not found is another series' (with the lock
        held)."""
        ids = self._table.find(hashes)
        taken = np.zeros(len(ids), dtype=bool)
        hit = np.flatnonzero(ids >= 0)
        if not len(hit):
            return ids, taken
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
            taken[position] = ids[position] < 0
        return ids, taken

    def _create(self, fresh: list[NewRows], ids: np.ndarray) -> None:
        """Create the new series of a batch (``ids`` gets theirs where they occur), in order
        of first appearance, up to ``max_series`` (the refused counted per occurrence):
        their numbers are ranks among the batch's positions, not a sort."""
        base = len(self)
        room = max(self.max_series - base, 0)
        firsts = np.zeros(len(ids), dtype=bool)
        for new in fresh:
            firsts[new.firsts] = True
        rank = np.cumsum(firsts) - 1
        made = min(room, int(rank[-1]) + 1)
        shape_of = np.empty(made, dtype=np.int32)
        row_of = np.empty(made, dtype=np.int32)
        posted: list[tuple[int, np.ndarray, np.ndarray]] = []  # shape, ids - base, rows
        entered: list[tuple[int, np.ndarray, np.ndarray, np.ndarray, np.ndarray]] = []
        for new in fresh:
            numbers = rank[new.firsts]  # ascending: the rows are in order of first appearance
            kept = int(np.searchsorted(numbers, room))
            mine = np.where(numbers < room, numbers + base, -1)
            ids[new.where] = mine[new.inverse]
            if kept < len(numbers):
                self.refused += int((new.inverse >= kept).sum())
            if not kept:
                continue
            numbers, rows = numbers[:kept], new.rows[:kept]
            stored = self._shape_rows[new.shape]
            first_row = len(stored) // rows.shape[1]  # a shape has its name column at least
            shape_of[numbers] = new.shape
            row_of[numbers] = np.arange(first_row, first_row + kept, dtype=np.int32)
            stored.frombytes(rows.tobytes())
            posted.append((new.shape, numbers, rows))
            entered.append((new.shape, rows, numbers + base, new.hashes[:kept], new.clash[:kept]))
        self._shape_of.frombytes(shape_of.tobytes())
        self._row_of.frombytes(row_of.tobytes())
        self._post(posted, made)
        self._insert(entered)

    def _insert(self, entered: list[tuple[int, np.ndarray, np.ndarray, np.ndarray, np.ndarray]]) -> None:
        """Enter new series (per shape: rows, ids, hashes, and which hashes another holds) in
        the hash table; a row whose hash another holds (in the table, or before it in this
        batch) is kept aside instead."""
        if len(entered) > 1:
            ordered = np.sort(np.concatenate([hashes[~clash] for _, _, _, hashes, clash in entered]))
            if (ordered[1:] == ordered[:-1]).any():  # rows of two shapes that hash alike: rare
                held: set[int] = set()
                for _, _, _, hashes, clash in entered:
                    for position, value in enumerate(hashes.tolist()):
                        clash[position] |= value in held
                        held.add(value)
        for shape, rows, series_ids, hashes, clash in entered:
            for position in np.flatnonzero(clash).tolist():
                self._collided[(shape, rows[position].tobytes())] = int(series_ids[position])
            self._table.insert(hashes[~clash], series_ids[~clash])

    def _post(self, posted: list[tuple[int, np.ndarray, np.ndarray]], made: int) -> None:
        """Post the ``made`` new series (per shape: their ids less the first new one, and their
        rows): per label, the ids of those that have it and their codes (``postings.py``)."""
        base = len(self) - made
        chunks: dict[str, tuple[np.ndarray, np.ndarray]] = {}
        if len(posted) == 1:
            shape, numbers, rows = posted[0]
            owners = (numbers + base).astype(np.int32)
            for column, label in enumerate(self._shapes[shape]):
                chunks[label] = (owners, np.ascontiguousarray(rows[:, column]))
        else:
            by_label: dict[str, np.ndarray] = {}  # label -> the code of each new series, -1 if it lacks it
            for shape, numbers, rows in posted:
                for column, label in enumerate(self._shapes[shape]):
                    if label not in by_label:
                        by_label[label] = np.full(made, -1, dtype=np.int32)
                    by_label[label][numbers] = rows[:, column]
            for label, codes in by_label.items():
                having = np.flatnonzero(codes >= 0)
                chunks[label] = ((having + base).astype(np.int32), codes[having])
        self._postings.add(chunks, made)

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

    def pair_refs(self, tokens: list[str]) -> list[int]:
        """``label number << 32 | code`` of each ``k=v`` token of a label set (-1 for ``""``),
        each parsed once and remembered (``InvalidLabelError`` if it does not parse, as
        ``parse_labels`` says)."""
        known = self._pairs.get
        return [ref if (ref := known(token)) is not None else self._pair_ref(token) for token in tokens]

    def _pair_ref(self, token: str) -> int:
        if not token:
            return -1
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
        return sorted(label for label in self._postings.labels() if label != NAME)

    def label_values(self, label: str) -> list[str]:
        return sorted(self._postings.values(label))

    def columns(self, ids: np.ndarray) -> LabelColumns:
        """The names (``"__name__"``) and labels of series ``ids`` by columns: per label, its
        values by code (a list that only grows: read it, never change it) and an int32 code
        per series, -1 where the series lacks the label."""
        out: LabelColumns = {}
        with self._lock:  # no array may be resized while numpy reads its buffer
            shape_of = np.frombuffer(self._shape_of, dtype=np.int32)[ids]
            row_of = np.frombuffer(self._row_of, dtype=np.int32)[ids]
            one = len(ids) > 0 and int(shape_of.min()) == int(shape_of.max())  # series of one shape
            for number in [int(shape_of[0])] if one else np.unique(shape_of).tolist():
                shape = self._shapes[number]
                members = slice(None) if one else np.flatnonzero(shape_of == number)
                rows = np.frombuffer(self._shape_rows[number], dtype=np.int32).reshape(-1, len(shape))
                codes = rows[row_of[members]]
                del rows  # release the buffer before the lock
                for position, label in enumerate(shape):
                    if one:  # every series has the label: its codes as they are, no -1 to fill first
                        column = np.ascontiguousarray(codes[:, position])
                        out[label] = LabelColumn(self._values[label], column)
                        continue
                    if label not in out:
                        out[label] = LabelColumn(self._values[label], np.full(len(ids), -1, dtype=np.int32))
                    out[label][1][members] = codes[:, position]
        return out

    def match(self, selector: Selector, check: Callable[[], None] | None = None) -> np.ndarray:
        """Sorted ids of the series ``selector`` picks; ``check`` is called between slices of
        the regexes' work (whatever it raises stops the selection)."""
        matchers = [m for m in (selector.name, *selector.matchers) if m is not None]
        positive = [m for m in matchers if m.op in ("=", "~")]
        negative = [m for m in matchers if m.op in ("!=", "!~")]
        if positive:
            sets = sorted((self._postings.having(m, check) for m in positive), key=len)
            result = sets[0]
            for other in sets[1:]:
                if not len(result):
                    break
                mask = np.zeros(len(self), dtype=bool)  # read after the postings: above their ids
                mask[other] = True
                result = result[mask[result]]
        else:
            result = np.arange(len(self), dtype=np.int32)
        for matcher in negative:
            if not len(result):
                break
            # "!=" and "!~" drop the series whose label is set and matches the positive form
            positive_form = Matcher(
                matcher.label, "=" if matcher.op == "!=" else "~", matcher.value, matcher.regex
            )
            excluded = self._postings.having(positive_form, check)
            if len(excluded):
                mask = np.zeros(len(self), dtype=bool)  # read after the postings: above their ids
                mask[excluded] = True
                result = result[~mask[result]]
        return result.astype(np.int64, copy=False)


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
