"""The web configuration file of ``--web.config.file`` (``artimon/arguments/_web.py``), read
before anything starts: a file that cannot be used stops the command with status 2 and the
file's error, which names the key."""

from __future__ import annotations

import argparse
import sys

from bookkeeper.ground import WebConfig, WebConfigError, load_web_config

__all__ = ["web_config_of"]


def web_config_of(args: argparse.Namespace, command: str) -> WebConfig | None:
    if args.web_config_file is None:
        return None
    try:
        return load_web_config(args.web_config_file)
    except WebConfigError as exc:
        print(f"artimon {command}: {exc}", file=sys.stderr)
        raise SystemExit(2) from None
