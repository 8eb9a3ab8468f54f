"""A site of many hosts on one machine: network namespaces on a bridge with no uplink
(``Network``, ``Host``), the components running on them and faults as operations
(``Site``: partition, heal, kill, restart), the grown-up topology on them (``Topology`` on a
``Layout``) with its raw history (``history_job``: Spark's ``raw_ingest --kafka`` into
Parquet under ``HISTORY_ROOT`` on the site's HDFS), and the removal of what a crashed run
left (``clean_leftovers``). See README.md."""

from __future__ import annotations

from artimon.site.history import HISTORY_ROOT, history_job
from artimon.site.hosts import MAX_HOSTS, ROOT_ADDRESS, SUBNET, Host, Network, unavailable_reason
from artimon.site.leftovers import STATE_DIR, SiteError, clean_leftovers, live_sites
from artimon.site.site import Site
from artimon.site.topology import MIN_HOSTS, Layout, Topology, demo_apps

__all__ = [
    "HISTORY_ROOT",
    "MAX_HOSTS",
    "MIN_HOSTS",
    "ROOT_ADDRESS",
    "STATE_DIR",
    "SUBNET",
    "Host",
    "Layout",
    "Network",
    "Site",
    "SiteError",
    "Topology",
    "clean_leftovers",
    "demo_apps",
    "history_job",
    "live_sites",
    "unavailable_reason",
]
