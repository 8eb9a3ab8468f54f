"""Artimon's Spark jobs: raw landing files to Parquet (``raw_ingest``). See README.md."""

from __future__ import annotations

__all__: list[str] = []
