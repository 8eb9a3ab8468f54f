"""The bookkeeper: labeled variables kept by an application and served to Artimon's agents.

See README.md beside this file and docs/bookkeeper.md.
"""

from __future__ import annotations

from bookkeeper._bookkeeper import Bookkeeper
from bookkeeper.batch import Sample, SampleBatch
from bookkeeper.client import EndpointClient, read_endpoint
from bookkeeper.exceptions import (
    BookkeeperError,
    DirectoryInUseError,
    EndpointUnavailableError,
    FrameTooLargeError,
    InvalidLabelError,
    InvalidNameError,
    InvalidValueError,
    MalformedFrameError,
    TextFormatError,
    TlsConfigError,
    TlsError,
    VariableTypeError,
    WireError,
    ZkAccessError,
    ZkAuthError,
)
from bookkeeper.export import FileExporter
from bookkeeper.histogram import DEFAULT_BUCKETS, Histogram, format_bound
from bookkeeper.server import EndpointServer
from bookkeeper.textformat import format_line, parse_line, parse_lines
from bookkeeper.variables import BooleanVar, DoubleVar, IntegerVar, StringVar, Variable
from bookkeeper.vartype import VarType
from bookkeeper.zk.layout import EndpointInfo, ZkLayout, resolve_zk

__all__ = [
    "DEFAULT_BUCKETS",
    "Bookkeeper",
    "BookkeeperError",
    "BooleanVar",
    "DirectoryInUseError",
    "DoubleVar",
    "EndpointClient",
    "EndpointInfo",
    "EndpointServer",
    "EndpointUnavailableError",
    "FileExporter",
    "FrameTooLargeError",
    "Histogram",
    "IntegerVar",
    "InvalidLabelError",
    "InvalidNameError",
    "InvalidValueError",
    "MalformedFrameError",
    "Sample",
    "SampleBatch",
    "StringVar",
    "TextFormatError",
    "TlsConfigError",
    "TlsError",
    "VarType",
    "Variable",
    "VariableTypeError",
    "WireError",
    "ZkAccessError",
    "ZkAuthError",
    "ZkLayout",
    "format_bound",
    "format_line",
    "parse_line",
    "parse_lines",
    "read_endpoint",
    "resolve_zk",
]
