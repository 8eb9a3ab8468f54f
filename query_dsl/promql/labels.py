"""Label sets as PromQL writes them: an empty value is no label, and Prometheus's order of
series (by their sorted label pairs, the name among them)."""

from __future__ import annotations

__all__ = ["sort_key", "with_label"]


def with_label(labels: dict[str, str], label: str, value: str) -> dict[str, str]:
    """``labels`` with ``label`` set to ``value``, or removed when ``value`` is empty."""
    out = dict(labels)
    if value:
        out[label] = value
    else:
        out.pop(label, None)
    return out


def sort_key(labels: dict[str, str]) -> list[tuple[str, str]]:
    """Prometheus's order of label sets: compare their sorted (name, value) pairs."""
    return sorted(labels.items())
