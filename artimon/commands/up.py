"""Run the embedded stack on this machine, with all data under --data-dir.

Started in dependency order, each printing a ``[ready]`` line: ZooKeeper on 127.0.0.1:2181
(--zk-port; unless $ARTIMON_ZK is set), a VHMS shard (registered before anything writes to
it; with --demo its finest ring is the poll interval), the demo applications (--demo),
the HTTP query API with the dashboard page (saved dashboards in <data-dir>/dashboards),
the alerting rules of <data-dir>/alerts.yaml (the demo's with --demo), Spark's raw_ingest
(in ``local[2]``, or with --cluster on a standalone master and worker of its own) turning
the landing files into Parquet history (and, when VHMS starts empty while that
history exists, sending the store's retention window of it back into VHMS first), and one
agent from <data-dir>/agent.properties (written at the first start, re-read on change: edit it and
the agent reloads): its artimon source polls every registered bookkeeper (the agent's own
self-report among them) each --interval, its artimon_file source reads
<data-dir>/run/*.artimon files, its Flume Thrift source listens for other agents
(--thrift-port), into two
file channels drained by the vhms sink and the raw sink; and three prometheus sources
scrape the stack's own ``/metrics`` (the query API's, VHMS's, the agent's) under the job
``artimon`` into VHMS only (the saved dashboard "artimon" shows them).
With --kafka, a Kafka broker (KRaft, Apache's jars; $ARTIMON_KAFKA names another) sits
between two agents of <data-dir>/agents-kafka.properties: ``up`` polls into a file channel
drained by a Kafka sink onto the topic artimon-samples, and ``store`` reads the topic as
two consumer groups, into VHMS and into the landing files (and scrapes the stack's own
``/metrics`` into VHMS). Then a line per round. Every
listener binds --host, 127.0.0.1 by default. Third-party output
(Spark, its Python workers, warnings) goes to <data-dir>/logs/. Ctrl-C stops everything
cleanly: the API and the alerts, the agent (its channels closed, its last landing file
rolled), Spark (after bringing the history up to
date), VHMS (a last snapshot written), then ZooKeeper.

With --hdfs the history goes to a real single-node HDFS started beside ZooKeeper
(``artimon hdfs``'s, data in <data-dir>/hdfs, Hadoop's jars resolved with Maven on the first
run): Parquet and checkpoint under ``hdfs://127.0.0.1:<port>/artimon/history``; Spark's
Hadoop client reads that HDFS's configuration (``HADOOP_CONF_DIR``). Without it the history
stays in <data-dir>/history (``file://``), which needs no download.

--data-dir serves one ``artimon up`` at a time (``in_use.lock``): a second one on it exits
with status 1, naming the PID of the first. Nothing it starts outlives it, even after a
``kill -9``: ZooKeeper's JVM dies with it (``bookkeeper.process.spawn``), and Spark's JVM
exits when its standard input, a pipe from this process, closes (pyspark's launcher); with
--cluster the master and worker die with it too, and their executors with the worker.
"""

from __future__ import annotations

import argparse
import logging
import os
import shutil
import sys
import threading
import time
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

from artimon.commands._history import HistoryJob
from artimon.commands._metrics import LandingBacklog, ZooKeeperMetrics
from artimon.commands._signals import stop_event
from artimon.commands.alerts import report as report_alerts
from artimon.commands.vhms import add_wal_arguments, wal_options
from bookkeeper import DirectoryInUseError
from bookkeeper.process import DirectoryLock
from bookkeeper.testing import DemoApps, HdfsServer, KafkaCluster, SparkCluster, ZooKeeperServer, free_port
from bookkeeper.wire import BackgroundServer
from collector_agent import Agent, ConfigWatcher, MonitorServer, SelfReporter
from query_dsl import EXAMPLES, StoreSource, create_app
from query_dsl.alerts import AlertEngine, AlertEngineMetrics, EvaluatorSource, load_rules
from vhms import DEFAULT_RESOLUTIONS, DataDirInUseError, VhmsClient
from vhms.server import Store, VhmsService

KAFKA_TOPIC = "artimon-samples"
SELF_SOURCE = """{agent}.sources.{name}.type = prometheus
{agent}.sources.{name}.targets = ${{ARTIMON_{upper}_METRICS}}
{agent}.sources.{name}.job = artimon
{agent}.sources.{name}.labels.instance = {name}
{agent}.sources.{name}.interval = ${{ARTIMON_INTERVAL}}
{agent}.sources.{name}.channels = {channel}
"""
_AGENT = """# The agent of `artimon up` (Flume's properties format, docs/agent.md), written at its
# first start. Edit it: the agent re-reads it every few seconds and applies the difference.
# ${...} are set by `artimon up` at each start (its flags and the ZooKeeper it runs).
up.sources = poll files flume api vhms agent
up.channels = durable landing
up.sinks = store land
up.sources.poll.type = artimon
up.sources.poll.zk = ${ARTIMON_ZK}
up.sources.poll.interval = ${ARTIMON_INTERVAL}
up.sources.poll.agentId = embedded
up.sources.poll.channels = durable landing
up.sources.files.type = artimon_file
up.sources.files.directory = ${ARTIMON_DATA_DIR}/run
up.sources.files.interval = ${ARTIMON_INTERVAL}
up.sources.files.channels = durable landing
up.sources.flume.type = thrift
up.sources.flume.bind = ${ARTIMON_HOST}
up.sources.flume.port = ${ARTIMON_THRIFT_PORT}
up.sources.flume.channels = durable landing
{self_sources}up.channels.durable.type = file
up.channels.durable.dataDirs = ${ARTIMON_DATA_DIR}/channels/durable
up.channels.durable.minimumRequiredSpace = 104857600
up.channels.durable.deadLetter.dir = ${ARTIMON_DATA_DIR}/dead-letter
up.channels.landing.type = file
up.channels.landing.dataDirs = ${ARTIMON_DATA_DIR}/channels/landing
up.channels.landing.minimumRequiredSpace = 104857600
up.channels.landing.deadLetter.dir = ${ARTIMON_DATA_DIR}/dead-letter
up.sinks.store.type = vhms
up.sinks.store.channel = durable
up.sinks.store.zk = ${ARTIMON_ZK}
up.sinks.store.maxBackoffSleep = 1000
up.sinks.store.deadLetter.dir = ${ARTIMON_DATA_DIR}/dead-letter
up.sinks.land.type = raw
up.sinks.land.channel = landing
up.sinks.land.directory = ${ARTIMON_DATA_DIR}/landing
up.sinks.land.rollInterval = ${ARTIMON_ROLL_INTERVAL}
up.sinks.land.deadLetter.dir = ${ARTIMON_DATA_DIR}/dead-letter
"""
# Artimon watching itself: a prometheus source per component, each named by its instance
# label (their ports may change from one start to the next; their series must not), into
# VHMS only: the Parquet history keeps the site's metrics, not the collector's chatter, and
# the landing channel's work per round stays what the applications make it


def _self_sources(agent: str, channel: str) -> str:
    sources = "".join(
        SELF_SOURCE.format(agent=agent, name=name, upper=name.upper(), channel=channel)
        for name in ("api", "vhms", "agent")
    )
    return f"# api, vhms, agent: the stack's own /metrics (job artimon, instance named): VHMS only\n{sources}"


AGENT = _AGENT.replace("{self_sources}", _self_sources("up", "durable"))
_KAFKA_AGENTS = """# The agents of `artimon up --kafka` (Flume's properties format, docs/agent.md), written
# at its first start; edit it and they reload. ${...} are set by `artimon up` at each start.
# `up` polls into a durable channel and publishes onto the topic; `store` reads the topic
# twice, as two consumer groups: one into VHMS, one into the landing files for Spark.
# On several machines, run `up` on each polling host and `store` beside the stores
# (docs/operations.md); Kafka is the buffer between them.
up.sources = poll files flume
up.channels = durable
up.sinks = publish
up.sources.poll.type = artimon
up.sources.poll.zk = ${ARTIMON_ZK}
up.sources.poll.interval = ${ARTIMON_INTERVAL}
up.sources.poll.agentId = embedded
up.sources.poll.channels = durable
up.sources.files.type = artimon_file
up.sources.files.directory = ${ARTIMON_DATA_DIR}/run
up.sources.files.interval = ${ARTIMON_INTERVAL}
up.sources.files.channels = durable
up.sources.flume.type = thrift
up.sources.flume.bind = ${ARTIMON_HOST}
up.sources.flume.port = ${ARTIMON_THRIFT_PORT}
up.sources.flume.channels = durable
up.channels.durable.type = file
up.channels.durable.dataDirs = ${ARTIMON_DATA_DIR}/channels/durable
up.channels.durable.minimumRequiredSpace = 104857600
up.channels.durable.deadLetter.dir = ${ARTIMON_DATA_DIR}/dead-letter
up.sinks.publish.type = kafka
up.sinks.publish.channel = durable
up.sinks.publish.kafka.bootstrap.servers = ${ARTIMON_KAFKA}
up.sinks.publish.kafka.topic = artimon-samples
up.sinks.publish.batchSize = 1000
up.sinks.publish.maxBackoffSleep = 1000
up.sinks.publish.deadLetter.dir = ${ARTIMON_DATA_DIR}/dead-letter

store.sources = samples landing api vhms agent
store.channels = tostore toland
store.sinks = store land
store.sources.samples.type = kafka
store.sources.samples.channels = tostore
store.sources.samples.kafka.bootstrap.servers = ${ARTIMON_KAFKA}
store.sources.samples.kafka.topics = artimon-samples
store.sources.samples.kafka.consumer.group.id = artimon-vhms
store.sources.samples.batchDurationMillis = 200
store.sources.samples.deadLetter.dir = ${ARTIMON_DATA_DIR}/dead-letter
store.sources.landing.type = kafka
store.sources.landing.channels = toland
store.sources.landing.kafka.bootstrap.servers = ${ARTIMON_KAFKA}
store.sources.landing.kafka.topics = artimon-samples
store.sources.landing.kafka.consumer.group.id = artimon-raw
store.sources.landing.batchDurationMillis = 200
store.sources.landing.deadLetter.dir = ${ARTIMON_DATA_DIR}/dead-letter
{self_sources}store.channels.tostore.type = file
store.channels.tostore.dataDirs = ${ARTIMON_DATA_DIR}/channels/tostore
store.channels.tostore.minimumRequiredSpace = 104857600
store.channels.tostore.deadLetter.dir = ${ARTIMON_DATA_DIR}/dead-letter
store.channels.toland.type = file
store.channels.toland.dataDirs = ${ARTIMON_DATA_DIR}/channels/toland
store.channels.toland.minimumRequiredSpace = 104857600
store.channels.toland.deadLetter.dir = ${ARTIMON_DATA_DIR}/dead-letter
store.sinks.store.type = vhms
store.sinks.store.channel = tostore
store.sinks.store.zk = ${ARTIMON_ZK}
store.sinks.store.batchSize = 1000
store.sinks.store.maxBackoffSleep = 1000
store.sinks.store.deadLetter.dir = ${ARTIMON_DATA_DIR}/dead-letter
store.sinks.land.type = raw
store.sinks.land.channel = toland
store.sinks.land.directory = ${ARTIMON_DATA_DIR}/landing
store.sinks.land.rollInterval = ${ARTIMON_ROLL_INTERVAL}
store.sinks.land.deadLetter.dir = ${ARTIMON_DATA_DIR}/dead-letter
"""
KAFKA_AGENTS = _KAFKA_AGENTS.replace("{self_sources}", _self_sources("store", "tostore"))
READY_QUERY = 'fetch("http.requests", last=10m) | map(rate, {window}) | reduce(sum, by=[method])'


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--demo", action="store_true", help="add demo applications and alerting rules")
    parser.add_argument(
        "--data-dir",
        type=Path,
        default=Path("artimon-data"),
        help="where every component keeps its data (default ./artimon-data)",
    )
    parser.add_argument(
        "--interval",
        type=float,
        default=None,
        help="seconds between polling rounds (default 60, 5 with --demo)",
    )
    parser.add_argument("--rounds", type=int, default=0, help="stop after N rounds (0: never)")
    parser.add_argument(
        "--zk-port", type=int, default=2181, help="ZooKeeper's port (default 2181; 0: any free one)"
    )
    parser.add_argument("--api-port", type=int, default=8080, help="query API port (0: any free one)")
    parser.add_argument(
        "--thrift-port", type=int, default=4141, help="the agent's Flume Thrift source port (0: any free one)"
    )
    parser.add_argument(
        "--host", default="127.0.0.1", help="bind address of every listener (0.0.0.0 for every interface)"
    )
    parser.add_argument("--no-spark", action="store_true", help="no Spark raw_ingest (no Parquet history)")
    parser.add_argument(
        "--hdfs", action="store_true", help="keep the history on an embedded HDFS (hdfs://), not in file://"
    )
    parser.add_argument(
        "--hdfs-port", type=int, default=0, help="the NameNode's port with --hdfs (0: any free)"
    )
    parser.add_argument(
        "--cluster",
        action="store_true",
        help="run Spark's jobs on a standalone master and worker of their own (under <data-dir>/spark)",
    )
    parser.add_argument(
        "--kafka",
        action="store_true",
        help="Kafka between the polling agent and the store agent (a local broker unless $ARTIMON_KAFKA "
        "names bootstrap servers); agents in <data-dir>/agents-kafka.properties",
    )
    add_wal_arguments(parser)


def _backfill(vhms: VhmsService, history: str) -> Callable[[Any], None]:
    """Rebuild an empty VHMS from the Parquet history (a ``file://`` or ``hdfs://`` URI):
    its retention window (the coarsest ring's), through its Thrift service (so its
    write-ahead log keeps what it gets); nothing when there is no history yet."""
    retention_ms = max(r.step_ms * r.slots for r in vhms.store.resolutions)

    def run(spark: Any) -> None:
        from spark_jobs import backfill_vhms, history_exists  # pyspark's import is slow

        if not history_exists(spark, history):
            return
        end = int(time.time() * 1000) + 60_000
        started = time.monotonic()
        with VhmsClient(vhms.host, vhms.port, timeout=120) as client:
            sent = backfill_vhms.backfill(spark, history, end - retention_ms, end, client)
        print(
            f"[ready] backfill   {sent} samples of the last {retention_ms // 3_600_000} h from {history} "
            f"into vhms in {time.monotonic() - started:.1f} s, {vhms.store.series} series now",
            flush=True,
        )

    return run


def resolutions_for(interval: float) -> str:
    """The store's rings: the finest is the poll interval when that divides a minute (so a
    bucket holds one round, never a partial one), then VHMS's defaults above a minute."""
    seconds = int(interval)
    if seconds == interval and 0 < seconds < 60 and 60 % seconds == 0:
        return f"{seconds}s:{3600 // seconds}," + DEFAULT_RESOLUTIONS.partition(",")[2]
    return DEFAULT_RESOLUTIONS


def _third_party_to(logs: Path) -> None:
    """Warnings and the chatter of Spark's Python side go to a file, not between the round
    lines."""
    logs.mkdir(parents=True, exist_ok=True)
    handler = logging.FileHandler(logs / "up.log")
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    logging.captureWarnings(True)
    warnings.simplefilter("default")
    for name in ("py.warnings", "py4j", "pyspark"):
        logger = logging.getLogger(name)
        logger.addHandler(handler)
        logger.propagate = False


def _start_kafka(directory: Path) -> tuple[KafkaCluster | None, str]:
    """The broker of ``--kafka``: ``$ARTIMON_KAFKA``'s, or one node started here (its ports
    kept in ``cluster.json``) with the topic of samples. ``(the cluster started here or
    None, bootstrap servers)``."""
    external = os.environ.get("ARTIMON_KAFKA")
    if external:
        print(f"[ready] kafka      {external} ($ARTIMON_KAFKA): topic {KAFKA_TOPIC}", flush=True)
        return None, external
    cluster = KafkaCluster(directory).start()
    cluster.create_topic(KAFKA_TOPIC, exist_ok=True)
    print(
        f"[ready] kafka      {cluster.bootstrap_servers} (pid {cluster.pid(0)}, KRaft, started in "
        f"{cluster.start_seconds:.1f} s): topic {KAFKA_TOPIC}",
        flush=True,
    )
    return cluster, cluster.bootstrap_servers


def _metrics_of(agent: Agent, store_agent: Agent | None) -> Callable[[], dict[str, dict[str, float]]]:
    """Both agents' counters as one agent's (their component names differ)."""
    if store_agent is None:
        return agent.metrics
    return lambda: {**agent.metrics(), **store_agent.metrics()}


def _drain_kafka(agent: Agent, store_agent: Agent, timeout: float = 30.0) -> str:
    """Once the polling agent has stopped (what it committed is on the topic), wait until
    each Kafka source of the store agent has taken as many events as were published and
    its channels are empty, so that a stop leaves the last rounds in VHMS and the landing
    files rather than in Kafka (which keeps them for the next start if ``timeout`` passes
    first); a line to print."""
    published = sum(
        c.get("EventDrainSuccessCount", 0) for k, c in agent.metrics().items() if k.startswith("SINK.")
    )
    started = time.monotonic()

    def drained() -> bool:
        now = store_agent.metrics()
        taken = [
            c["EventAcceptedCount"]
            for k, c in now.items()
            if k.startswith("SOURCE.") and "KafkaEmptyCount" in c
        ]
        waiting = sum(c.get("ChannelSize", 0) for k, c in now.items() if k.startswith("CHANNEL."))
        return all(count >= published for count in taken) and waiting == 0

    while not drained():
        if time.monotonic() - started > timeout:
            return (
                f"kafka: the store agent had not taken all {int(published)} published events in "
                f"{timeout:g} s: the rest waits in Kafka for the next start"
            )
        time.sleep(0.1)  # counters to poll: no event to wait on
    took = time.monotonic() - started
    return f"kafka: the store agent took all {int(published)} published events ({took:.1f} s)"


def run(args: argparse.Namespace) -> int:
    data = args.data_dir.resolve()
    try:
        with DirectoryLock(data, "artimon up"):
            return _run(args, data)
    except (DirectoryInUseError, DataDirInUseError) as exc:
        print(f"artimon up: {exc}", file=sys.stderr)
        return 1


def _run(args: argparse.Namespace, data: Path) -> int:
    interval = args.interval or (5.0 if args.demo else 60.0)
    os.environ["ARTIMON_DATA_DIR"] = str(data)  # for notifier commands of the alerting rules
    _third_party_to(data / "logs")
    stop = stop_event()
    zk_server = hdfs = kafka = None
    vhms = agent = monitor = demo = api = watcher = reporter = engine = None
    store_agent = store_watcher = None
    alerts_thread: threading.Thread | None = None
    history: HistoryJob | None = None
    try:
        if not os.environ.get("ARTIMON_ZK"):
            zk_server = ZooKeeperServer(data / "zookeeper", args.zk_port, host=args.host)
            zk_server.start()
            found = (
                "where every Artimon process looks by default"
                if zk_server.port == 2181
                else f"other processes find it with ARTIMON_ZK={zk_server.hosts}"
            )
            print(f"[ready] zookeeper  {zk_server.hosts} (pid {zk_server.pid}): {found}", flush=True)
        zk_hosts = zk_server.hosts if zk_server else os.environ["ARTIMON_ZK"]
        if args.hdfs and not args.no_spark:
            hdfs = HdfsServer(data / "hdfs", args.hdfs_port)
            hdfs.start()
            os.environ["HADOOP_CONF_DIR"] = str(hdfs.conf_dir)  # read by Spark's JVM when it starts
            print(
                f"[ready] hdfs       {hdfs.uri} (NameNode pid {hdfs.namenode_pid}, DataNode pid "
                f"{hdfs.datanode_pid}, WebHDFS {hdfs.webhdfs}) in {hdfs.started_in_s:.1f} s",
                flush=True,
            )
        vhms = VhmsService(
            Store(resolutions_for(interval)),
            shard="default",
            host=args.host,
            snapshot_dir=data / "vhms" / "default",
            snapshot_every=300,
            **wal_options(args),
        )
        vhms.start(zk_hosts)
        assert vhms.registration is not None  # start() registered it
        vhms.registration.registered.wait(30)  # before anything writes to it
        http = vhms.http.url if vhms.http else "-"
        replayed = vhms.replayed.records if vhms.replayed else 0
        print(
            f"[ready] vhms       {vhms.host}:{vhms.port}, {http}/stats, {vhms.store.series} series restored "
            f"({replayed} write-ahead log records replayed), "
            f"finest buckets {vhms.store.resolutions[0].step_s} s",
            flush=True,
        )
        if args.kafka:
            kafka, bootstrap = _start_kafka(data / "kafka")
            os.environ["ARTIMON_KAFKA"] = bootstrap
        if args.demo:
            demo = DemoApps(zk_hosts, host=args.host)
            demo.start()
            print(f"[ready] demo apps  {len(demo.bookkeepers)} contexts serving", flush=True)
        dashboards = data / "dashboards"
        dashboards.mkdir(parents=True, exist_ok=True)
        if args.demo and not (dashboards / "demo.json").exists():
            shutil.copy(EXAMPLES / "demo.json", dashboards / "demo.json")
        if not (dashboards / "artimon.json").exists():  # the stack's own panels, from its /metrics
            shutil.copy(EXAMPLES / "artimon.json", dashboards / "artimon.json")
        source = StoreSource(vhms.store)
        alert_metrics = AlertEngineMetrics(None)  # its engine, if any, comes below
        zk_host, _, zk_port = zk_hosts.split(",")[0].partition("/")[0].rpartition(":")
        own: list[AlertEngineMetrics | LandingBacklog | ZooKeeperMetrics] = [alert_metrics]
        own += [LandingBacklog(data / "landing"), ZooKeeperMetrics(zk_host, int(zk_port))]
        api = BackgroundServer(
            create_app(source, dashboards_dir=dashboards, extra_metrics=own),
            args.host,
            args.api_port,
            name="query-api",
        )
        api.start()
        window = "1m" if vhms.store.resolutions[0].step_s <= 30 else "5m"  # two buckets at least
        print(
            f"[ready] query api  {api.url}/api/v1/query (try: artimon query --url {api.url} "
            f"'{READY_QUERY.format(window=window)}')",
            flush=True,
        )
        page = f"{api.url}/?d=demo" if args.demo else f"{api.url}/"
        print(f"[ready] dashboard  {page} (saved dashboards in {dashboards})", flush=True)
        rules = data / "alerts.yaml"
        if args.demo and not rules.exists():
            shutil.copy(EXAMPLES.parent / "alerts" / "demo.yaml", rules)
        if rules.exists():
            config = load_rules(rules)
            engine = AlertEngine(config, EvaluatorSource(source), state_file=data / "alerts-state.json")
            alert_metrics.engine = engine
            alerts_thread = threading.Thread(
                target=engine.run, args=(stop, report_alerts), name="alerts", daemon=True
            )
            alerts_thread.start()
            print(
                f"[ready] alerts     {len(config.rules)} rules from {rules}, "
                f"every {config.interval_ms / 1000:g} s, notifications in {data / 'alerts.log'}",
                flush=True,
            )
        if not args.no_spark:
            history = HistoryJob(
                data,
                interval="10 seconds" if args.demo else "5 minutes",
                on_ready=lambda where: print(f"[ready] spark      raw_ingest {where}", flush=True),
                root=f"{hdfs.uri}/artimon/history" if hdfs else None,
                cluster=SparkCluster(data / "spark") if args.cluster else None,
            )
            if vhms.store.series == 0:
                history.before_ingest = _backfill(vhms, history.output)
            history.start()
        (data / "run").mkdir(parents=True, exist_ok=True)
        properties = data / "agent.properties"
        thrift_port = args.thrift_port or free_port()
        monitor_port = free_port(args.host)
        scraped = vhms.http.url if vhms.http else None
        os.environ.update(
            ARTIMON_API_METRICS=f"{api.url}/metrics",
            ARTIMON_VHMS_METRICS=f"{scraped}/metrics" if scraped else "",
            ARTIMON_AGENT_METRICS=f"http://{args.host}:{monitor_port}/metrics?format=prometheus",
            ARTIMON_ZK=zk_hosts,
            ARTIMON_INTERVAL=f"{interval:g}",
            ARTIMON_ROLL_INTERVAL=str(max(5, int(interval * 2))),
            ARTIMON_THRIFT_PORT=str(thrift_port),
            ARTIMON_HOST=args.host,
        )
        if args.kafka:
            properties = data / "agents-kafka.properties"
        if not properties.exists():
            properties.write_text(KAFKA_AGENTS if args.kafka else AGENT)
        if args.kafka:  # the store side first: it is ready when the first round is published
            store_agent = Agent.from_properties(properties.read_text(), "store")
            store_agent.start()
            store_watcher = ConfigWatcher(store_agent, properties, interval=min(5.0, interval))
            store_watcher.start()
        agent = Agent.from_properties(properties.read_text(), "up")
        agent.start()
        watcher = ConfigWatcher(agent, properties, interval=min(5.0, interval))
        watcher.start()
        metrics = _metrics_of(agent, store_agent)
        monitor = MonitorServer(metrics, "up", args.host, monitor_port)
        monitor.start()
        reporter = SelfReporter(metrics, agent.name)
        reporter.start()
        reporter.bookkeeper.serve(zk_hosts=zk_hosts)  # polled like any app: the agent watches itself
        print(
            f"[ready] agent      every {interval:g} s from {properties} (edit it: it reloads), "
            f"metrics on {monitor.url}/metrics and in VHMS as flume.*; "
            f".artimon files in {data / 'run'}; "
            f"Flume Thrift on {args.host}:{thrift_port}. Ctrl-C stops everything",
            flush=True,
        )
        rounds = 0
        before = metrics()
        interval_ms = int(interval * 1000)
        while True:
            next_report = (int(time.time() * 1000) // interval_ms + 1) * interval_ms + interval_ms * 0.8
            if stop.wait(max(0.0, next_report / 1000 - time.time())):
                break
            now = metrics()
            polled_source, sink = now["SOURCE.poll"], now["SINK.store"]
            polled = polled_source["PollSuccessCount"] - before["SOURCE.poll"]["PollSuccessCount"]
            failed = polled_source["PollFailCount"] - before["SOURCE.poll"]["PollFailCount"]
            stored = sink["SamplesStoredCount"] - before["SINK.store"]["SamplesStoredCount"]
            print(
                f"round {time.strftime('%H:%M:%S')}: {int(polled)} endpoints polled, {int(failed)} failed, "
                f"{int(stored)} samples stored, {vhms.store.series} series in VHMS, "
                f"{int(now['CHANNEL.durable']['ChannelSize'])} events waiting",
                flush=True,
            )
            before = now
            rounds += 1
            if args.rounds and rounds >= args.rounds:
                break
    finally:
        stop.set()
        if alerts_thread is not None:
            alerts_thread.join(timeout=30)
        if engine is not None:
            engine.close(10.0)
        for component in (monitor, watcher, agent):
            if component is not None:
                component.stop()
        if agent is not None and store_agent is not None:
            print(_drain_kafka(agent, store_agent), flush=True)
        for rest in (api, store_watcher, store_agent, reporter, demo):
            if rest is not None:
                rest.stop()
        if reporter is not None:
            reporter.bookkeeper.close()
        if history is not None:
            print(history.stop(), flush=True)
        for service in (vhms, kafka, hdfs, zk_server):
            if service is not None:
                service.stop()
        print("stopped.", flush=True)
    return 0
