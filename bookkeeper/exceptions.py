"""The bookkeeper's errors, one tree rooted at :class:`BookkeeperError`.

::

    BookkeeperError
    ├── InvalidNameError        (also ValueError)  a variable name breaks the naming rules
    ├── InvalidLabelError       (also ValueError)  a label key or value breaks the rules
    ├── InvalidValueError       (also ValueError)  NaN, an infinity, an out-of-range integer
    ├── VariableTypeError       (also TypeError)   a series used with another type than its own
    ├── TextFormatError         (also ValueError)  a malformed line of a ``.artimon`` file
    ├── ZkAuthError             (also ValueError)  ZooKeeper credentials that are not ``user:password``
    ├── ZkAccessError                              ZooKeeper refused an operation: no or other credentials
    ├── WireError                                  a Thrift endpoint conversation failed
    │   ├── FrameTooLargeError  (also ValueError)  a frame longer than the configured maximum
    │   ├── MalformedFrameError (also ValueError)  bytes that do not decode as the expected message
    │   ├── TlsConfigError      (also ValueError)  a certificate, key or CA file that does not load
    │   ├── TlsError                               a TLS handshake failed (an untrusted certificate,
    │   │                                          a peer that does not speak TLS)
    │   └── EndpointUnavailableError               connect or read failed or timed out
    └── DirectoryInUseError                        a data directory another live process holds
"""

from __future__ import annotations

__all__ = [
    "BookkeeperError",
    "DirectoryInUseError",
    "EndpointUnavailableError",
    "FrameTooLargeError",
    "InvalidLabelError",
    "InvalidNameError",
    "InvalidValueError",
    "MalformedFrameError",
    "TextFormatError",
    "TlsConfigError",
    "TlsError",
    "VariableTypeError",
    "WireError",
    "ZkAccessError",
    "ZkAuthError",
]


class BookkeeperError(Exception):
    """Root of every error the bookkeeper package raises."""


class InvalidNameError(BookkeeperError, ValueError):
    """A variable name breaks the naming rules."""


class InvalidLabelError(BookkeeperError, ValueError):
    """A label key or value breaks the rules, or there are too many labels."""


class InvalidValueError(BookkeeperError, ValueError):
    """A value a variable cannot hold (NaN, an infinity, an integer outside 64 bits)."""


class VariableTypeError(BookkeeperError, TypeError):
    """A series is used with another type than the one it was created with."""


class TextFormatError(BookkeeperError, ValueError):
    """A line of the ``.artimon`` text format that cannot be parsed."""


class ZkAuthError(BookkeeperError, ValueError):
    """ZooKeeper credentials that are not ``user:password`` (the message names where they
    came from, never the password)."""


class ZkAccessError(BookkeeperError):
    """ZooKeeper refused an operation on a znode for lack of rights: the process has no
    credentials, or not the ones the znode's ACL names."""


class WireError(BookkeeperError):
    """A Thrift endpoint conversation failed."""


class FrameTooLargeError(WireError, ValueError):
    """A frame announced a length above the configured maximum."""


class MalformedFrameError(WireError, ValueError):
    """A frame's bytes do not decode as the expected Thrift message."""


class EndpointUnavailableError(WireError):
    """An endpoint could not be reached or did not answer in time."""


class TlsConfigError(WireError, ValueError):
    """A certificate, key or CA file that cannot be loaded; the message names the file."""


class TlsError(WireError):
    """A TLS handshake failed: the peer's certificate is not trusted, or names another host,
    or the peer does not speak TLS."""


class DirectoryInUseError(BookkeeperError):
    """A data directory's lock file is held by another live process; the message names the
    holder's PID (two servers writing one directory corrupt it)."""
