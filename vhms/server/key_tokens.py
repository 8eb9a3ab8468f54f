"""Series keys cut into their tokens by columns: what lets the index create a round of new
series without parsing each key in Python.

A canonical key is ``name{k1=v1,k2=v2}``: the name ends at the only ``{``, each pair at a
``,`` or at the ``}`` that ends the key (values are percent-encoded, so none of ``{``,
``,``, ``}`` occurs inside one: ``bookkeeper.labels``). The keys of a batch are joined into
one UTF-8 buffer, the separators found by numpy, and the tokens between them
dictionary-encoded by pyarrow: what remains for Python is the *distinct* tokens (a name, a
``k=v`` pair), a few hundred for ten thousand series of a round, which the index parses
once and remembers.

A key whose shape this does not vouch for (not exactly one ``{`` and one ``}``, or the
``}`` not last) is marked not ``regular``: the index parses it on its own, as before, and
so accepts or refuses it exactly as :func:`bookkeeper.wire.parse_series` does.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

__all__ = ["KeyTokens", "split_keys"]

_OPEN, _CLOSE, _COMMA = ord("{"), ord("}"), ord(",")


@dataclass(frozen=True)
class KeyTokens:
    """The tokens of the ``regular`` keys (in key order): key ``i`` (counting regular keys
    only) has tokens ``first[i]`` to ``first[i] + count[i] - 1``, its name first, then its
    pairs in text order; ``token_ids`` gives each token's place in ``distinct`` (each
    distinct token once, without its separator, in order of first appearance)."""

    regular: np.ndarray  # bool per key given
    first: np.ndarray  # int64 per regular key
    count: np.ndarray  # int64 per regular key: 1 + its pairs ("name{}" has one empty pair)
    token_ids: np.ndarray  # int64 per token
    distinct: list[str]


def split_keys(keys: list[str]) -> KeyTokens:
    """Cut ``keys`` into tokens (see the module doc)."""
    regular = np.ones(len(keys), dtype=bool)
    kept = keys
    while True:
        tokens = _tokens(kept)
        if tokens.regular.all():
            return KeyTokens(regular, tokens.first, tokens.count, tokens.token_ids, tokens.distinct)
        # the separators of an irregular key would run its tokens into its neighbour's: again
        # without them
        regular[np.flatnonzero(regular)[~tokens.regular]] = False
        kept = [key for key, ok in zip(kept, tokens.regular.tolist(), strict=True) if ok]


def _tokens(keys: list[str]) -> KeyTokens:
    count = len(keys)
    text = "".join(keys)
    data = text.encode()
    if len(data) == len(text):  # ASCII: characters are bytes
        lengths = np.fromiter(map(len, keys), dtype=np.int64, count=count)
    else:
        lengths = np.fromiter((len(key.encode()) for key in keys), dtype=np.int64, count=count)
    ends = np.cumsum(lengths)
    raw = np.frombuffer(data, dtype=np.uint8)
    opens = raw == _OPEN
    closes = raw == _CLOSE
    separators = opens | closes | (raw == _COMMA)
    starts = ends - lengths
    last = np.zeros(count, dtype=np.uint8)
    nonempty = lengths > 0
    last[nonempty] = raw[ends[nonempty] - 1]
    open_at, close_at = np.flatnonzero(opens), np.flatnonzero(closes)
    at = np.flatnonzero(separators)
    if len(open_at) == count and len(close_at) == count:
        # as many of each as keys: each key has one if the k-th lies in the k-th key; and no
        # separator may come before its "{" (the name would end at a comma)
        regular = (open_at >= starts) & (open_at < ends) & (close_at == ends - 1)
        regular &= at[np.minimum(np.searchsorted(at, starts), len(at) - 1)] == open_at
    else:
        per_key_open = np.bincount(np.searchsorted(ends, open_at, side="right"), minlength=count)
        per_key_close = np.bincount(np.searchsorted(ends, close_at, side="right"), minlength=count)
        regular = (per_key_open == 1) & (per_key_close == 1) & (last == _CLOSE)
    if not regular.all():
        empty = np.zeros(0, dtype=np.int64)
        return KeyTokens(regular, empty, empty, empty, [])
    # every token ends at its separator, made a comma so that a pair reads the same whether
    # it ends at "," or "}"; the tokens are then contiguous slices of one buffer
    buffer = raw.copy()
    buffer[at] = _COMMA
    offsets = np.zeros(len(at) + 1, dtype=np.int64)
    offsets[1:] = at + 1
    array = pa.LargeStringArray.from_buffers(len(at), pa.py_buffer(offsets), pa.py_buffer(buffer))
    encoded = pc.dictionary_encode(array)
    indices = encoded.indices  # int32; read through its buffer (to_numpy() imports pandas)
    token_ids = np.frombuffer(indices.buffers()[1], dtype=np.int32)[indices.offset : indices.offset + len(at)]
    token_ids = token_ids.astype(np.int64)
    distinct = [token[:-1] for token in encoded.dictionary.to_pylist()]
    first = np.searchsorted(at, starts)  # each key's first token: its name
    per_key = np.diff(np.append(first, len(at)))
    return KeyTokens(regular, first, per_key, token_ids, distinct)
