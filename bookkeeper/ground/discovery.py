"""One-shot listing of the endpoints registered under ``/contexts`` (the agent's source
watches the same znodes; this is for tools and the embedded stack)."""

from __future__ import annotations

import logging

from kazoo.client import KazooClient
from kazoo.exceptions import NoNodeError

from bookkeeper import EndpointInfo, MalformedFrameError, ZkLayout

__all__ = ["list_endpoints"]

log = logging.getLogger(__name__)


def list_endpoints(client: KazooClient, layout: ZkLayout) -> list[EndpointInfo]:
    """Every endpoint registered now, sorted by context then address; a znode whose payload
    is not an endpoint's, or disagrees with its znode, is skipped with a warning."""
    found: list[EndpointInfo] = []
    try:
        segments = client.get_children(layout.contexts)
    except NoNodeError:
        return found
    for segment in segments:
        context_path = f"{layout.contexts}/{segment}"
        try:
            children = client.get_children(context_path)
        except NoNodeError:
            continue
        for child in children:
            try:
                data, _ = client.get(f"{context_path}/{child}")
            except NoNodeError:
                continue  # went away between the listing and the read
            try:
                found.append(EndpointInfo.from_znode(ZkLayout.context_name(segment), child, data))
            except MalformedFrameError as exc:
                log.warning("skipping %s/%s: %s", context_path, child, exc)
    found.sort(key=lambda info: (info.context, info.host, info.port))
    return found
