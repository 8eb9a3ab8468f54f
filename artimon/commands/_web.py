"""The web configuration file of ``--web.config.file`` (``artimon/arguments/_web.py``), read
before anything starts: a file that cannot be used stops the command with status 2 and the
file's error, which names the key."""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # the file's reader (yaml) loads only for a command given one
    from bookkeeper.ground import WebConfig

__all__ = ["web_config_of"]


def web_config_of(args: argparse.Namespace, command: str) -> WebConfig | None:
    if args.web_config_file is None:
        return None
    from bookkeeper.ground import WebConfigError, load_web_config

    try:
        return load_web_config(args.web_config_file)
    except WebConfigError as exc:
        print(f"artimon {command}: {exc}", file=sys.stderr)
        raise SystemExit(2) from None
