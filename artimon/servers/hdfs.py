"""A real HDFS from Apache Hadoop's own jars, for ``artimon hdfs``, ``artimon up --hdfs``, a
site's topology, benchmarks and tests: a NameNode and one DataNode (the default, all on
127.0.0.1) or several, each on its placement (``host=``, ``datanodes=``).

``HdfsServer(data_dir).start()`` resolves ``hadoop-hdfs`` and ``hadoop-common`` at the
Hadoop version of the client jars inside the pyspark wheel (:data:`HADOOP_VERSION`) with
Maven, once, into the jar cache (:func:`artimon.servers.resolve_jars`); writes
``<data_dir>/conf/core-site.xml`` and ``hdfs-site.xml`` (each daemon bound to its
placement's address, WebHDFS on, replication the number of DataNodes up to 3, one-second
heartbeats, no safe-mode extension, so that restarts take seconds); formats the NameNode
once (``<data_dir>/name`` holds ``current/VERSION`` afterwards); and runs the NameNode and
each DataNode as a JVM of its own (DataNode ``i`` > 0 with its own addresses and
``data-<i+1>`` as ``-D`` options), so that a test can ``kill -9`` any alone
(:meth:`kill_namenode`, :meth:`kill_datanode`) and start it again on the same ports and data
(:meth:`start_namenode`, :meth:`start_datanode`). Ready means what a writer needs: the
NameNode out of safe mode with every DataNode live, read from the JMX servlets over HTTP.

``uri`` is ``hdfs://<NameNode address>:<port>``; ``conf_dir`` is a ``HADOOP_CONF_DIR`` that points a
Hadoop client (Spark's included) at this file system. :meth:`admin` runs ``hdfs dfsadmin``
(safe mode, quotas) and :meth:`dfs` ``hdfs dfs`` (chmod, mkdir) with the same jars; with
``superuser`` the daemons and these tools run as that user (``HADOOP_USER_NAME``), so that
the user of this process is an ordinary one whom permissions apply to (``/`` is then
``1777``).

Each daemon is a :class:`~artimon.servers.ServerProcess` sharing the lock of ``data_dir``:
the JVMs die with the process that launched them (:func:`bookkeeper.ground.spawn`), and
``data_dir`` is held (:class:`~bookkeeper.ground.DirectoryLock`) from ``start()`` until
both have exited.

Lifecycle, per daemon and for them all: NEW --start()--> RUNNING --stop()/kill_*()-->
STOPPED --start()/start_*()--> RUNNING.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import urllib.error
import urllib.request
from collections.abc import Sequence
from pathlib import Path
from typing import Any
from xml.sax.saxutils import escape

from artimon.servers.base import Placement, ServerGroup, ServerProcess, Where, placed, wait_ready
from artimon.servers.jars import resolve_jars
from bookkeeper.ground import DirectoryLock

__all__ = ["HADOOP_VERSION", "HdfsServer", "hadoop_classpath"]

HADOOP_VERSION = "3.5.0"  # pyspark/jars/hadoop-client-api-3.5.0.jar
# hadoop-hdfs declares its client half "provided": named here, or the NameNode does not load
_ARTIFACTS = [
    f"org.apache.hadoop:{artifact}:{HADOOP_VERSION}"
    for artifact in ("hadoop-hdfs", "hadoop-hdfs-client", "hadoop-common")
]
_NAMENODE = "org.apache.hadoop.hdfs.server.namenode.NameNode"
_DATANODE = "org.apache.hadoop.hdfs.server.datanode.DataNode"
_LOG4J = """log4j.rootLogger=INFO,console
log4j.appender.console=org.apache.log4j.ConsoleAppender
log4j.appender.console.layout=org.apache.log4j.PatternLayout
log4j.appender.console.layout.ConversionPattern=%d{ISO8601} %p %c{2}: %m%n
log4j.logger.org.apache.hadoop.util.NativeCodeLoader=ERROR
"""


def hadoop_classpath() -> str:
    """The Hadoop server jars (resolved on first use, with a progress line on stderr)."""
    jars = resolve_jars(f"hadoop-{HADOOP_VERSION}", _ARTIFACTS)
    return os.pathsep.join(str(jar) for jar in jars)


def _site(properties: dict[str, str]) -> str:
    body = "".join(
        f"  <property><name>{escape(k)}</name><value>{escape(v)}</value></property>\n"
        for k, v in properties.items()
    )
    return f'<?xml version="1.0"?>\n<configuration>\n{body}</configuration>\n'


class _Daemon(ServerProcess):
    """The NameNode or a DataNode: one JVM of an :class:`HdfsServer` on its placement,
    holding its lock; ``options`` are its own ``-D`` settings (a DataNode's directory,
    address and ports)."""

    def __init__(
        self,
        hdfs: HdfsServer,
        role: str,
        main: str,
        host: Placement,
        options: dict[str, str] | None = None,
    ) -> None:
        name = f"the HDFS {role} on {host.address} of {hdfs.uri}"
        log, pid = f"{role}.log", f"{role}.pid"
        super().__init__(hdfs.data_dir, name, log, pid_file=pid, lock=hdfs._lock, host=host)
        self._hdfs = hdfs
        self._main = main
        self.options = options or {}

    def _start(self, timeout: float) -> None:
        generic = [f"-D{key}={value}" for key, value in self.options.items()]
        self._launch(self._hdfs._java(self._main, *generic), self._hdfs.ready, timeout, env=self._hdfs._env())


class HdfsServer(ServerGroup):
    """One NameNode on ``host`` and a DataNode on each of ``datanodes`` (default: one, on
    ``host``), each an address here or a placement (see the module doc)."""

    start_timeout = 120.0

    def __init__(
        self,
        data_dir: str | os.PathLike[str],
        nn_port: int = 0,
        http_port: int = 0,
        *,
        host: Where = "127.0.0.1",
        datanodes: Sequence[Where] = (),
        heap: str = "256m",
        java: str | None = None,
        superuser: str | None = None,
    ) -> None:
        self.data_dir = Path(data_dir).resolve()
        # HDFS's superuser is whoever runs the NameNode, and bypasses every permission: a
        # test of a refused permission runs the daemons (and admin/dfs) as another user
        self.superuser = superuser
        placement = placed(host)
        self.host = placement.address
        self.nn_port = nn_port or placement.port_for(8020)
        self.http_port = http_port or placement.port_for(9870)
        self.heap = heap
        self.java = java or shutil.which("java") or "java"
        self.conf_dir = self.data_dir / "conf"
        self._webroot = self.data_dir / "web"
        self.name = f"HDFS at {self.uri}"
        self._lock = DirectoryLock(self.data_dir, f"hdfs launcher for port {self.nn_port}")
        self._namenode = _Daemon(self, "namenode", _NAMENODE, placement)
        self._datanodes = [
            self._datanode_daemon(index, where) for index, where in enumerate(datanodes or [placement])
        ]
        self.replication = min(3, len(self._datanodes))
        self._processes = [*self._datanodes, self._namenode]  # the DataNodes stop first

    def _datanode_daemon(self, index: int, where: Where) -> _Daemon:
        """DataNode ``index``: its ports fixed once, so a restarted DataNode is the same node;
        the first keeps the names of a single-node HDFS (``data``, ``datanode.log``)."""
        placement = placed(where)
        suffix = f"-{index + 1}" if index else ""
        well_known = {"address": 9866, "http.address": 9864, "ipc.address": 9867}
        options = {
            f"dfs.datanode.{name}": f"{placement.address}:{placement.port_for(port)}"
            for name, port in well_known.items()
        }
        options["dfs.datanode.hostname"] = placement.address
        options["dfs.datanode.data.dir"] = f"file://{self.data_dir / f'data{suffix}'}"
        return _Daemon(self, f"datanode{suffix}", _DATANODE, placement, options)

    @property
    def uri(self) -> str:
        """``hdfs://127.0.0.1:<port>``: ``fs.defaultFS`` of this file system."""
        return f"hdfs://{self.host}:{self.nn_port}"

    @property
    def namenode(self) -> subprocess.Popen[bytes] | None:
        """The NameNode's process (``None`` once stopped or killed)."""
        return self._namenode.process

    @property
    def datanode(self) -> subprocess.Popen[bytes] | None:
        """The first DataNode's process (``None`` once stopped or killed)."""
        return self._datanodes[0].process

    @property
    def namenode_pid(self) -> int | None:
        return self._namenode.pid

    @property
    def datanode_pid(self) -> int | None:
        return self._datanodes[0].pid

    @property
    def datanodes(self) -> int:
        return len(self._datanodes)

    @property
    def webhdfs(self) -> str:
        """The NameNode's HTTP root (WebHDFS under ``/webhdfs/v1``, JMX under ``/jmx``)."""
        return f"http://{self.host}:{self.http_port}"

    @property
    def client_conf(self) -> dict[str, str]:
        """The settings a Hadoop client of this file system should use (they are in
        ``conf_dir`` too): for a client configured elsewhere, such as a running Spark
        session (``hadoopConfiguration().set``)."""
        return {
            # a client of a stopped NameNode gives up in seconds, not the default quarter hour
            "ipc.client.connect.max.retries": "3",
            "ipc.client.connect.retry.interval": "500",
            "dfs.replication": str(self.replication),
            # as many DataNodes as replicas (or one): no other to replace a failed one in a
            # write pipeline
            "dfs.client.block.write.replace-datanode-on-failure.enable": "false",
            # closing a file polls the NameNode until the DataNode reported the block, first
            # after 400 ms by default: 360 ms a small file here, 70 ms at 10 (Spark's
            # checkpoint and state store write a dozen small files a micro-batch)
            "dfs.client.block.write.locateFollowingBlock.initial.delay.ms": "10",
        }

    def _write_config(self) -> None:
        self.conf_dir.mkdir(parents=True, exist_ok=True)
        core = {
            "fs.defaultFS": self.uri,
            "hadoop.tmp.dir": str(self.data_dir / "tmp"),
            **self.client_conf,
        }
        hdfs = {
            "dfs.namenode.name.dir": f"file://{self.data_dir / 'name'}",
            "dfs.datanode.data.dir": f"file://{self.data_dir / 'data'}",
            "dfs.namenode.rpc-address": f"{self.host}:{self.nn_port}",
            "dfs.namenode.http-address": f"{self.host}:{self.http_port}",
            "dfs.namenode.secondary.http-address": f"{self.host}:0",
            **self._datanodes[0].options,
            "dfs.webhdfs.enabled": "true",
            "dfs.heartbeat.interval": "1",
            "dfs.namenode.heartbeat.recheck-interval": "5000",
            # out of safe mode once every block is placed: the default 0.999 rounds down to
            # none below a thousand blocks, and readers then find blocks without a replica
            "dfs.namenode.safemode.threshold-pct": "1.0",
            "dfs.namenode.safemode.min.datanodes": "1",
            "dfs.namenode.safemode.extension": "0",
            "dfs.blockreport.initialDelay": "0",
            "dfs.namenode.fs-limits.min-block-size": "0",
            # DataNodes known by address: a site's hosts have no names in DNS
            "dfs.namenode.datanode.registration.ip-hostname-check": "false",
        }
        (self.conf_dir / "core-site.xml").write_text(_site(core))
        (self.conf_dir / "hdfs-site.xml").write_text(_site(hdfs))
        (self.conf_dir / "log4j.properties").write_text(_LOG4J)
        # the daemons look their web UIs up on the classpath; Maven's jars carry none (a
        # Hadoop tarball does): empty ones serve JMX and WebHDFS, which are servlets of code
        for webapp in ("hdfs", "datanode", "secondary"):
            (self._webroot / "webapps" / webapp / "WEB-INF").mkdir(parents=True, exist_ok=True)

    def _java(self, main: str, *args: str) -> list[str]:
        return [
            self.java,
            f"-Xmx{self.heap}",
            "-XX:+UseSerialGC",
            "-XX:TieredStopAtLevel=1",  # a daemon of a test: quick start over peak speed
            f"-Dlog4j.configuration=file:{self.conf_dir / 'log4j.properties'}",
            "-cp",
            os.pathsep.join([str(self.conf_dir), str(self._webroot), hadoop_classpath()]),
            main,
            *args,
        ]

    def _env(self) -> dict[str, str] | None:
        return {**os.environ, "HADOOP_USER_NAME": self.superuser} if self.superuser else None

    def _run_tool(self, main: str, *args: str, timeout: float = 120.0) -> str:
        done = subprocess.run(
            self._java(main, *args),
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
            env=self._env(),
        )
        if done.returncode != 0:
            raise RuntimeError(f"{main} {' '.join(args)} failed ({done.returncode}):\n{done.stderr[-2000:]}")
        return done.stdout

    def admin(self, *args: str) -> str:
        """``hdfs dfsadmin <args>`` against this file system (for example ``-safemode enter``,
        ``-setSpaceQuota 1k /path``); its output, ``RuntimeError`` if it fails."""
        return self._run_tool("org.apache.hadoop.hdfs.tools.DFSAdmin", *args)

    def dfs(self, *args: str) -> str:
        """``hdfs dfs <args>`` against this file system (``-mkdir -p``, ``-chmod``...)."""
        return self._run_tool("org.apache.hadoop.fs.FsShell", *args)

    def _start(self, timeout: float) -> None:
        """Format once, start both daemons and wait until ready."""
        self._write_config()
        if not (self.data_dir / "name" / "current" / "VERSION").exists():
            self._run_tool(_NAMENODE, "-format", "-nonInteractive", "-force")
        self.start_namenode(timeout=0)
        for index in range(len(self._datanodes)):
            self.start_datanode(timeout=0, index=index)
        self.wait_ready(timeout)
        if self.superuser:  # everyone may create their own directories, as under /tmp
            self.dfs("-chmod", "1777", "/")

    def start_namenode(self, timeout: float = 120.0) -> None:
        """Start the NameNode (again, after a kill or a stop) and wait until ready."""
        self._namenode.start(timeout=0)
        if timeout:
            self.wait_ready(timeout)

    def start_datanode(self, timeout: float = 120.0, index: int = 0) -> None:
        """Start DataNode ``index`` (again, after a kill or a stop) and wait until ready."""
        self._datanodes[index].start(timeout=0)
        if timeout:
            self.wait_ready(timeout)

    def jmx(self, bean: str, *, service: str = "NameNode", index: int = 0) -> dict[str, Any]:
        """One bean of the NameNode's (or with ``service="DataNode"``, DataNode ``index``'s)
        JMX servlet; ``{}`` while it does not answer."""
        where = (
            f"{self.host}:{self.http_port}"
            if service == "NameNode"
            else self._datanodes[index].options["dfs.datanode.http.address"]
        )
        url = f"http://{where}/jmx?qry=Hadoop:service={service},name={bean}"
        try:
            with urllib.request.urlopen(url, timeout=2.0) as answer:
                beans = json.loads(answer.read(1 << 20)).get("beans", [])
        except (OSError, ValueError):
            return {}
        return dict(beans[0]) if beans else {}

    def ls(self, path: str) -> list[str]:
        """The names in directory ``path`` through WebHDFS (``[]`` while it does not exist):
        a listing that does not depend on a Hadoop client in this process."""
        url = f"{self.webhdfs}/webhdfs/v1{path}?op=LISTSTATUS"
        try:
            with urllib.request.urlopen(url, timeout=10.0) as answer:
                listed = json.loads(answer.read(1 << 24))["FileStatuses"]["FileStatus"]
        except urllib.error.HTTPError as exc:
            if exc.code == 404:
                return []
            raise
        return sorted(str(entry["pathSuffix"]) for entry in listed)

    def ready(self) -> bool:
        """The NameNode answers, is out of safe mode (so knows where every block is) and
        counts every DataNode live, and each DataNode (a restarted one too: the NameNode
        takes seconds to see a dead one go) serves a block pool of it."""
        state = self.jmx("FSNamesystemState")
        if (
            not state
            or state.get("NumLiveDataNodes", 0) < len(self._datanodes)
            or self.jmx("NameNodeInfo").get("Safemode") != ""
        ):
            return False
        return all(self._serves(index) for index in range(len(self._datanodes)))

    def _serves(self, index: int) -> bool:
        actors = self.jmx("DataNodeInfo", service="DataNode", index=index).get("BPServiceActorInfo") or "[]"
        try:
            return any(actor.get("ActorState") == "RUNNING" for actor in json.loads(actors))
        except ValueError:
            return False

    def wait_ready(self, timeout: float = 120.0) -> None:
        """Wait until :meth:`ready`; ``RuntimeError`` with the logs if a daemon exits first."""
        wait_ready([self._namenode, *self._datanodes], self.ready, timeout, self.name, poll=0.2)

    def kill_datanode(self, index: int = 0) -> None:
        """SIGKILL DataNode ``index`` (a crash, not a shutdown)."""
        if self._datanodes[index].running:
            self._datanodes[index].kill()

    def kill_namenode(self) -> None:
        """SIGKILL the NameNode (a crash, not a shutdown)."""
        if self._namenode.running:
            self._namenode.kill()
