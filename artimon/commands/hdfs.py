"""Run a single-node HDFS (a NameNode and a DataNode, WebHDFS on) from Apache Hadoop's own
jars, at the version of the Hadoop client inside the pyspark wheel, bound to 127.0.0.1, until
Ctrl-C. The jars are resolved with Maven on the first run (into ~/.cache/artimon/jars); the
NameNode is formatted once, so a second run serves the same files."""

from __future__ import annotations

import argparse
import sys

from artimon.commands._signals import stop_event
from artimon.servers import HdfsServer, JarResolutionError
from bookkeeper import DirectoryInUseError


def run(args: argparse.Namespace) -> int:
    server = HdfsServer(args.data_dir, args.nn_port, args.http_port)
    stop = stop_event()
    try:
        server.start()
    except (DirectoryInUseError, JarResolutionError, RuntimeError) as exc:
        print(f"artimon hdfs: {exc}", file=sys.stderr)
        return 1
    print(
        f"HDFS ready at {server.uri} in {server.started_in_s:.1f} s (NameNode pid {server.namenode_pid}, "
        f"DataNode pid {server.datanode_pid}, WebHDFS {server.webhdfs}/webhdfs/v1, data in {args.data_dir}); "
        f"export HADOOP_CONF_DIR={server.conf_dir} to point Spark at it. Ctrl-C stops it.",
        flush=True,
    )
    try:
        while not stop.wait(1.0):
            for name, process in (("NameNode", server.namenode), ("DataNode", server.datanode)):
                if process is None or process.poll() is not None:
                    print(f"the HDFS {name} exited unexpectedly; see its log in {args.data_dir}", flush=True)
                    return 1
    finally:
        server.stop()
    print("HDFS stopped.", flush=True)
    return 0
