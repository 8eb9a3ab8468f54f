"""Framework labels of every variable: ``dc``, ``rack``, ``module``, ``host``, ``context``, ``env``.

``dc``, ``rack`` and ``module`` come from the host's name, found by reverse DNS of its
address and matched against a pattern with named groups (default: ``dc-rack-module...``,
as Arkéa named its machines, e.g. ``jb-r12-web01.example.net``). A name that does not
match leaves those three labels out rather than inventing values.

Precedence, lowest first: what the host name gives, then ``ARTIMON_<LABEL>`` environment
variables (``ARTIMON_DC``, ``ARTIMON_RACK``, ``ARTIMON_MODULE``, ``ARTIMON_HOST``,
``ARTIMON_ENV``; ``ARTIMON_HOST_PATTERN`` replaces the pattern), then what the code passes.
``context`` always is the bookkeeper's context.
"""

from __future__ import annotations

import os
import re
import socket
from collections.abc import Mapping
from functools import lru_cache

from bookkeeper.labels import validate_labels

__all__ = ["DEFAULT_ENV", "DEFAULT_HOST_PATTERN", "framework_labels", "host_identity"]

DEFAULT_HOST_PATTERN = r"^(?P<dc>[A-Za-z0-9]+)-(?P<rack>[A-Za-z0-9]+)-(?P<module>[A-Za-z0-9]+)"
DEFAULT_ENV = "default"
_FROM_ENVIRONMENT = ("dc", "rack", "module", "host", "env")


@lru_cache(maxsize=1)
def host_identity() -> tuple[str, str]:
    """``(short host name, fully qualified name)`` of this machine, resolved once per process.

    The qualified name comes from reverse DNS; where the resolver only knows ``localhost``
    the plain host name stands in.
    """
    hostname = socket.gethostname()
    fqdn = socket.getfqdn(hostname)
    if fqdn in ("localhost", "localhost.localdomain") or not fqdn:
        fqdn = hostname
    return hostname.split(".", 1)[0], fqdn


def framework_labels(
    context: str,
    overrides: Mapping[str, str] | None = None,
    environ: Mapping[str, str] | None = None,
) -> dict[str, str]:
    """The framework labels for ``context`` on this host (see the module doc for precedence)."""
    env = os.environ if environ is None else environ
    short, fqdn = host_identity()
    labels: dict[str, str] = {"host": short, "env": DEFAULT_ENV}
    pattern = env.get("ARTIMON_HOST_PATTERN", DEFAULT_HOST_PATTERN)
    try:
        match = re.match(pattern, fqdn)
    except re.error as exc:
        raise ValueError(f"ARTIMON_HOST_PATTERN {pattern!r} is not a valid regex: {exc}") from None
    if match:
        labels.update({k: v for k, v in match.groupdict().items() if v})
    for key in _FROM_ENVIRONMENT:
        value = env.get(f"ARTIMON_{key.upper()}")
        if value:
            labels[key] = value
    if overrides:
        labels.update(overrides)
    labels["context"] = context
    return validate_labels(labels)
