"""Landing files: Avro object container files of sample batches, what the agent's ``raw``
sink writes and Spark's ``raw_ingest`` job reads.

Each record is a ``LandingBatch`` (schema ``landing_batch.avsc``): the fields of a sample
batch (``sample_batch.avsc``) followed by the event's ``round_ms``, ``endpoint`` and
``agent`` (the trailer), and its ``checksum``, the event's integrity stamp (the CRC32C of
the sample batch's bytes XOR that of the round's, endpoint's and agent's), which Spark
checks before a record reaches Parquet. Because
Avro encodes a record as its fields one after the other, an event body (an encoded sample
batch) plus the encoded trailer and checksum *is* an encoded landing record: the sink never
decodes a batch to write it.

The container is written by hand (header, then blocks of records each followed by the
file's sync marker) so that every block can be fsynced as one transaction's data;
:func:`recover` truncates a file after its last complete block (a crash mid-write).
Codecs: ``deflate`` (default) or ``null``.
"""

from __future__ import annotations

import io
import json
import os
import zlib
from pathlib import Path
from typing import Any, BinaryIO

import fastavro

__all__ = [
    "LANDING_SCHEMA",
    "LandingWriter",
    "encode_avro_long",
    "encode_checksum",
    "encode_identity",
    "encode_trailer",
    "recover",
]

MAGIC = b"Obj\x01"
LANDING_SCHEMA: Any = json.loads(Path(__file__).with_name("landing_batch.avsc").read_text())
_TRAILER_SCHEMA: Any = fastavro.parse_schema(
    {
        "type": "record",
        "name": "LandingTrailer",
        "namespace": "artimon",
        "fields": [f for f in LANDING_SCHEMA["fields"] if f["name"] in ("round_ms", "endpoint", "agent")],
    }
)


def encode_avro_long(value: int) -> bytes:
    """Avro's zig-zag varint."""
    value = (value << 1) ^ (value >> 63)
    out = bytearray()
    while value & ~0x7F:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def _read_long(data: BinaryIO) -> int:
    shift, result = 0, 0
    while True:
        byte = data.read(1)
        if not byte:
            raise EOFError("end of file in a varint")
        result |= (byte[0] & 0x7F) << shift
        if not byte[0] & 0x80:
            return (result >> 1) ^ -(result & 1)
        shift += 7
        if shift > 63:
            raise ValueError("varint too long")


def encode_identity(round_ms: int | None, endpoint: str | None, agent: str | None) -> bytes:
    """The encoded fields that follow a sample batch in a landing record and identify it:
    ``round_ms``, ``endpoint``, ``agent`` (what an integrity stamp covers besides the body)."""
    out = io.BytesIO()
    fastavro.schemaless_writer(
        out, _TRAILER_SCHEMA, {"round_ms": round_ms, "endpoint": endpoint, "agent": agent}
    )
    return out.getvalue()


def encode_checksum(value: int | None) -> bytes:
    """The encoded ``checksum`` field, the last of a landing record."""
    return b"\x00" if value is None else b"\x02" + encode_avro_long(value)


def encode_trailer(
    round_ms: int | None, endpoint: str | None, agent: str | None, checksum: int | None = None
) -> bytes:
    """Every field that follows a sample batch in a landing record."""
    return encode_identity(round_ms, endpoint, agent) + encode_checksum(checksum)


class LandingWriter:
    """Appends blocks of already-encoded landing records to one container file."""

    def __init__(self, path: Path, codec: str = "deflate") -> None:
        if codec not in ("deflate", "null"):
            raise ValueError(f"codec {codec!r} is neither deflate nor null")
        self.path = path
        self.codec = codec
        self.sync = os.urandom(16)
        self._file = open(path, "wb")  # noqa: SIM115 - lives as long as the writer
        metadata = {"avro.schema": json.dumps(LANDING_SCHEMA).encode(), "avro.codec": codec.encode()}
        header = bytearray(MAGIC)
        header += encode_avro_long(len(metadata))
        for key, value in metadata.items():
            header += encode_avro_long(len(key)) + key.encode() + encode_avro_long(len(value)) + value
        header += encode_avro_long(0) + self.sync
        self._file.write(header)
        self.size = len(header)
        self.records = 0

    def write_block(self, records: list[bytes]) -> None:
        """Write one block and fsync it: when this returns, the records are on disk."""
        data = b"".join(records)
        if self.codec == "deflate":
            compressor = zlib.compressobj(6, zlib.DEFLATED, -15)
            data = compressor.compress(data) + compressor.flush()
        block = encode_avro_long(len(records)) + encode_avro_long(len(data)) + data + self.sync
        self._file.write(block)
        self._file.flush()
        os.fsync(self._file.fileno())
        self.size += len(block)
        self.records += len(records)

    def close(self) -> None:
        self._file.close()


def recover(path: Path) -> int:
    """Truncate ``path`` after its last complete block; returns the records it keeps."""
    with open(path, "rb+") as data:
        if data.read(4) != MAGIC:
            data.truncate(0)
            return 0
        try:
            entries = _read_long(data)
            while entries:
                for _ in range(abs(entries)):
                    for _ in range(2):
                        data.seek(_read_long(data), os.SEEK_CUR)
                entries = _read_long(data)
            sync = data.read(16)
        except (EOFError, ValueError):
            data.truncate(0)
            return 0
        good, records = data.tell(), 0
        size = os.fstat(data.fileno()).st_size
        while True:
            try:
                count = _read_long(data)
                length = _read_long(data)
            except (EOFError, ValueError):
                break
            if count <= 0 or length < 0 or data.tell() + length + 16 > size:
                break
            data.seek(length, os.SEEK_CUR)
            if data.read(16) != sync:
                break
            good, records = data.tell(), records + count
        data.truncate(good)
        return records
