"""The platform's ground: what Artimon's own processes share and an application never needs.

- the Avro sample batch (``sample_batch.avsc``, the body of the agent's events:
  :func:`encode_sample_batch`, :func:`decode_sample_batch`) and the raw landing files
  (``landing_batch.avsc``: :class:`LandingWriter`, :func:`encode_trailer` (:func:`encode_identity`
  and :func:`encode_checksum`, on Avro's zig-zag varint :func:`encode_avro_long`), :func:`recover`);
- :class:`BackgroundServer`, an ASGI app served by uvicorn from a thread, behind Prometheus's
  web configuration file when given one (:func:`load_web_config`: TLS, basic auth, headers),
  asking an app that has ``answer_now`` (:class:`AnswersNow`) for an :class:`Immediate`
  answer to a small ``GET`` before the ASGI round (``immediate.py``);
- ZooKeeper membership (:class:`Membership`: watched groups of members with their payloads,
  a grace period, re-read after session loss) and discovery (:func:`list_endpoints`, a
  one-shot listing for tools);
- processes: :func:`spawn` (a child that dies with its parent), :func:`terminate`,
  :class:`DirectoryLock` (one live process per data directory), :func:`fsync_path`,
  :func:`release_freed_memory` (the C heap's and pyarrow's free pages back to the kernel),
  :func:`keep_freed_memory_returnable` (a serving process's allocators, set so that it can);
- :func:`parse_duration`, Prometheus's duration syntax (``1h30m``, ``500ms``);
- series identity by columns (``columns.py``): :class:`LabelColumn` and :class:`LabelColumns`
  (translate, concat, row keys), and the one series hash (:func:`series_hashes`) that
  placement and Spark share.

The ground may import the app library (``bookkeeper``, ``bookkeeper.wire``,
``bookkeeper.zk``); the app library never imports the ground, so ``import bookkeeper``
stays free of fastavro and uvicorn (``tests/test_imports.py``). The names whose modules need
fastavro, kazoo, uvicorn or yaml load when first used, so a process imports only
what it uses of the ground (``tests/artimon/test_serving_imports.py``).
"""

from __future__ import annotations

import importlib
import typing

from bookkeeper.ground.children import die_with_parent_command, spawn, terminate
from bookkeeper.ground.columns import (
    KEY_LIMIT,
    LabelColumn,
    LabelColumns,
    combine_hashes,
    concat,
    dense_classes,
    key_hashes,
    row_keys,
    series_hashes,
    text_hashes,
    translate,
)
from bookkeeper.ground.dirlock import LOCK_FILE, DirectoryLock
from bookkeeper.ground.durations import parse_duration
from bookkeeper.ground.files import fsync_path
from bookkeeper.ground.memory import keep_freed_memory_returnable, release_freed_memory

if typing.TYPE_CHECKING:
    from bookkeeper.ground.avro import SAMPLE_BATCH_SCHEMA, decode_sample_batch, encode_sample_batch
    from bookkeeper.ground.discovery import list_endpoints
    from bookkeeper.ground.httpserver import BackgroundServer
    from bookkeeper.ground.immediate import AnswersNow, Immediate
    from bookkeeper.ground.landing import (
        LANDING_SCHEMA,
        LandingWriter,
        encode_avro_long,
        encode_checksum,
        encode_identity,
        encode_trailer,
        recover,
    )
    from bookkeeper.ground.membership import Member, Membership, MembershipState
    from bookkeeper.ground.webconfig import WebConfig, WebConfigError, is_loopback, load_web_config

__all__ = [
    "KEY_LIMIT",
    "LANDING_SCHEMA",
    "LOCK_FILE",
    "SAMPLE_BATCH_SCHEMA",
    "AnswersNow",
    "BackgroundServer",
    "DirectoryLock",
    "Immediate",
    "LabelColumn",
    "LabelColumns",
    "LandingWriter",
    "Member",
    "Membership",
    "MembershipState",
    "WebConfig",
    "WebConfigError",
    "combine_hashes",
    "concat",
    "decode_sample_batch",
    "dense_classes",
    "die_with_parent_command",
    "encode_avro_long",
    "encode_checksum",
    "encode_identity",
    "encode_sample_batch",
    "encode_trailer",
    "fsync_path",
    "is_loopback",
    "keep_freed_memory_returnable",
    "key_hashes",
    "list_endpoints",
    "load_web_config",
    "parse_duration",
    "recover",
    "release_freed_memory",
    "row_keys",
    "series_hashes",
    "spawn",
    "terminate",
    "text_hashes",
    "translate",
]

# loaded when first used (PEP 562), each with what it needs: fastavro, kazoo, uvicorn and yaml
# stay out of a process that serves without them (tests/artimon/test_serving_imports.py)
_LAZY = {
    "avro": ("SAMPLE_BATCH_SCHEMA", "decode_sample_batch", "encode_sample_batch"),
    "discovery": ("list_endpoints",),
    "httpserver": ("BackgroundServer",),
    "immediate": ("AnswersNow", "Immediate"),
    "landing": (
        "LANDING_SCHEMA",
        "LandingWriter",
        "encode_avro_long",
        "encode_checksum",
        "encode_identity",
        "encode_trailer",
        "recover",
    ),
    "membership": ("Member", "Membership", "MembershipState"),
    "webconfig": ("WebConfig", "WebConfigError", "is_loopback", "load_web_config"),
}
_HOME = {name: module for module, names in _LAZY.items() for name in names}


def __getattr__(name: str) -> typing.Any:
    if name not in _HOME:
        raise AttributeError(f"module 'bookkeeper.ground' has no attribute {name!r}")
    value = getattr(importlib.import_module(f"bookkeeper.ground.{_HOME[name]}"), name)
    globals()[name] = value  # the next use is a plain global
    return value
