"""The VHMS service's IDL (``vhms.thrift``): the service serves it, the sharded client
calls it (``vhms.client``); and the ingest batch, the one wire form of ingest columns."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import thriftpy2

from bookkeeper import MalformedFrameError
from bookkeeper.wire import IngestColumns

vhms_thrift = thriftpy2.load(str(Path(__file__).with_name("vhms.thrift")), module_name="vhms_service_thrift")


def encode_ingest_batch(columns: IngestColumns) -> Any:
    """The ``IngestBatch`` struct of ingest columns (``vhms.thrift``)."""
    return vhms_thrift.IngestBatch(
        protocol_version=vhms_thrift.INGEST_PROTOCOL_VERSION,
        names=columns.names,
        label_sets=columns.label_sets,
        name_ids=np.asarray(columns.name_ids, dtype="<i4").tobytes(),
        set_ids=np.asarray(columns.set_ids, dtype="<i4").tobytes(),
        values=np.asarray(columns.values, dtype="<f8").tobytes(),
        timestamps=np.asarray(columns.timestamps, dtype="<i8").tobytes(),
        string_name_ids=np.asarray(columns.string_name_ids, dtype="<i4").tobytes(),
        string_set_ids=np.asarray(columns.string_set_ids, dtype="<i4").tobytes(),
        strings=columns.strings,
        string_timestamps=np.asarray(columns.string_timestamps, dtype="<i8").tobytes(),
    )


def decode_ingest_batch(batch: Any) -> IngestColumns:
    """Ingest columns from an ``IngestBatch`` struct, checked (``MalformedFrameError``: a
    binary column not a whole number of its items, columns of different lengths, a
    reference outside its table)."""
    try:
        columns = IngestColumns(
            list(batch.names or []),
            list(batch.label_sets or []),
            np.frombuffer(batch.name_ids or b"", dtype="<i4"),
            np.frombuffer(batch.set_ids or b"", dtype="<i4"),
            np.frombuffer(batch.values or b"", dtype="<f8"),
            np.frombuffer(batch.timestamps or b"", dtype="<i8"),
            np.frombuffer(batch.string_name_ids or b"", dtype="<i4"),
            np.frombuffer(batch.string_set_ids or b"", dtype="<i4"),
            list(batch.strings or []),
            np.frombuffer(batch.string_timestamps or b"", dtype="<i8"),
        )
    except (TypeError, ValueError) as exc:
        raise MalformedFrameError(f"not an ingest batch: {exc}") from None
    columns.validate()
    return columns
