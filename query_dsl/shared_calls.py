"""Calls written more than once in one query, found before it runs so that each is
evaluated once: the two sides of ``x / on(dc) group_left reduce(x, ...)`` share their fetch
and its mapper, and ``fetch(...) / fetch(...)`` of the same series reads them once.

Two calls are the same when they are written alike (same function, same arguments, down
to their own calls) wherever they stand in the query; the built-in functions are pure, so
one answer serves every place. Only the calls that repeat are kept, and each only until its
last use (a call answered from memory uses up the calls written inside it too), so a query
holds no intermediate matrix longer than its text needs it.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Hashable
from typing import Any

from query_dsl.parser import BinaryOp, Call, Negate, Node

__all__ = ["SharedCalls"]


class SharedCalls:
    """The repeated calls of one query tree and the answers of those evaluated so far."""

    def __init__(self, tree: Node, pure: frozenset[str]) -> None:
        self._pure = pure
        self._keys: dict[int, Hashable] = {}  # id of a pure Call node -> its written form
        self._inner: dict[Hashable, list[Hashable]] = {}  # a form -> the pure calls inside it
        self._uses: Counter[Hashable] = Counter()
        self._shape(tree)
        self._keys = {node: key for node, key in self._keys.items() if self._uses[key] > 1}
        self._answers: dict[Hashable, Any] = {}

    def _shape(self, node: Node) -> tuple[Hashable, list[Hashable]]:
        """``node`` without its place in the text, and the forms of the pure calls in it;
        every pure call's form is counted."""
        parts: list[tuple[Hashable, list[Hashable]]]
        if isinstance(node, Call):
            parts = [self._shape(arg) for arg in node.args]
            named = [(name, self._shape(value)) for name, value in node.kwargs]
            inner = [key for _, keys in [*parts, *(shape for _, shape in named)] for key in keys]
            key: Hashable = (
                "call",
                node.name,
                tuple(form for form, _ in parts),
                tuple((name, form) for name, (form, _) in named),
            )
            if node.name in self._pure:
                self._keys[id(node)] = key
                self._uses[key] += 1
                self._inner[key] = inner
                return key, [key, *inner]
            return key, inner
        if isinstance(node, list):
            parts = [self._shape(item) for item in node]
            return ("list", tuple(form for form, _ in parts)), [k for _, keys in parts for k in keys]
        if isinstance(node, BinaryOp):
            (left, left_inner), (right, right_inner) = self._shape(node.left), self._shape(node.right)
            return ("op", node.op, left, right, node.matching), [*left_inner, *right_inner]
        if isinstance(node, Negate):
            operand, inner = self._shape(node.operand)
            return ("negate", operand), inner
        if isinstance(node, Hashable):
            return node, []  # numbers, strings, durations and words are their own form
        return ("unique", id(node)), []  # not a node the evaluator knows: it says so when it meets it

    def key(self, node: Call) -> Hashable | None:
        """The form of ``node`` when it repeats in the query, else None."""
        return self._keys.get(id(node))

    def get(self, key: Hashable) -> tuple[bool, Any]:
        """Whether ``key`` was evaluated, and its answer; its uses and those of the calls
        inside it are counted down, and an answer is forgotten at its last use."""
        if key not in self._answers:
            return False, None
        answer = self._answers[key]
        for used in [key, *self._inner[key]]:
            self._uses[used] -= 1
            if self._uses[used] <= 0:
                self._answers.pop(used, None)
        return True, answer

    def put(self, key: Hashable, answer: Any) -> None:
        """The answer of ``key``'s first evaluation, kept while a use remains."""
        self._uses[key] -= 1
        if self._uses[key] > 0:
            self._answers[key] = answer
