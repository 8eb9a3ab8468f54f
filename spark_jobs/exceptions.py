"""Spark job errors, one tree rooted at :class:`SparkJobError`.

::

    SparkJobError
    └── HistoryPathError      (also ValueError)  the history's path refuses the job for good:
                                                 permission denied, quota exceeded; names it
"""

from __future__ import annotations

__all__ = ["HistoryPathError", "SparkJobError"]


class SparkJobError(Exception):
    """The root of the Spark jobs' errors."""


class HistoryPathError(SparkJobError, ValueError):
    """The file system refuses to write the history at a path for a reason that waiting does
    not cure (permission denied, quota exceeded): the message names the path and the reason.
    The landing files stay where they are, for a run after the operator fixed it."""
