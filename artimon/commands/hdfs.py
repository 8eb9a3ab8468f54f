"""Run a single-node HDFS (a NameNode and a DataNode, WebHDFS on) from Apache Hadoop's own
jars, at the version of the Hadoop client inside the pyspark wheel, bound to 127.0.0.1, until
Ctrl-C. The jars are resolved with Maven on the first run (into ~/.cache/artimon/jars); the
NameNode is formatted once, so a second run serves the same files. With $ARTIMON_ZK set it
registers there for ``artimon status`` (``/services/hdfs``, the NameNode's HTTP address)."""

from __future__ import annotations

import argparse

from artimon.commands._signals import serve_until_stopped
from artimon.servers import HdfsServer
from artimon.status import launcher_service


def run(args: argparse.Namespace) -> int:
    server = HdfsServer(args.data_dir, args.nn_port, args.http_port)

    def ready() -> str:
        return (
            f"HDFS ready at {server.uri} in {server.started_in_s:.1f} s (NameNode pid {server.namenode_pid}, "
            f"DataNode pid {server.datanode_pid}, WebHDFS {server.webhdfs}/webhdfs/v1, "
            f"data in {args.data_dir}); "
            f"export HADOOP_CONF_DIR={server.conf_dir} to point Spark at it. Ctrl-C stops it."
        )

    return serve_until_stopped(
        server, "hdfs", "HDFS", ready, args.data_dir, lambda: launcher_service("hdfs", server.webhdfs, 1)
    )
