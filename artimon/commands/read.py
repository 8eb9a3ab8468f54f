"""Read one bookkeeper endpoint and print its variables in the .artimon line format."""

from __future__ import annotations

import argparse
import sys

from bookkeeper import BookkeeperError, format_line, read_endpoint


def run(args: argparse.Namespace) -> int:
    host, _, port = args.address.rpartition(":")
    if not host or not port.isdigit():
        print(f"artimon read: expected HOST:PORT, got {args.address!r}", file=sys.stderr)
        return 2
    try:
        batch = read_endpoint(host, int(port), timeout=args.timeout)
    except BookkeeperError as exc:
        print(f"artimon read: {args.address}: {exc}", file=sys.stderr)
        return 1
    for sample in batch.samples():
        print(format_line(sample))
    return 0
