"""Run the embedded stack on this machine, with all data under --data-dir.

``artimon up`` is a declared list of components (:mod:`artimon.stack`) run by one
:class:`~artimon.stack.Supervisor`: each starts in the order of the list and prints its
``[ready]`` line, a failure stops what had started in reverse order, and Ctrl-C or SIGTERM
(or the last of --rounds) stops them all in reverse order. The list, in order:

- ZooKeeper on 127.0.0.1:2181 (--zk-port; none when $ARTIMON_ZK names one), every znode
  of the stack under ACLs: the credentials given (--zk-auth-file, $ARTIMON_ZK_AUTH_FILE,
  $ARTIMON_ZK_AUTH), else the stack's own in <data-dir>/zk.auth (created at the first start,
  mode 0600; :mod:`artimon.stack.credentials`), which its ready line names;
- with --hdfs, a single-node HDFS for the history (``artimon hdfs``'s, data in
  <data-dir>/hdfs, Hadoop's jars resolved with Maven on the first run): Parquet and checkpoint
  under ``hdfs://127.0.0.1:<port>/artimon/history``, read by Spark's Hadoop client through
  ``HADOOP_CONF_DIR``; without it the history stays in <data-dir>/history (``file://``);
- a VHMS shard, registered before anything writes to it, its rings --resolutions (as
  ``artimon vhms``'s), by default a finest ring of the poll interval (when it divides a
  minute, else a minute) kept for two hours, then 5m:48,15m:96,1h:72;
- with --kafka, a Kafka broker (KRaft, Apache's jars; $ARTIMON_KAFKA names another);
- the demo applications (--demo);
- the HTTP query API with the dashboard page (saved dashboards in <data-dir>/dashboards);
- Spark's raw_ingest (in ``local[2]``, or with --cluster on a standalone master and worker of
  its own) turning the landing files, or with --kafka the topic artimon-samples (Spark's
  Kafka source, its connector's jars resolved with Maven on the first run), into Parquet
  history (and, when VHMS starts empty while that history exists, sending the store's
  retention window of it back into VHMS first); its ready line comes when its JVM is up;
- the alerting rules of <data-dir>/alerts.yaml (the demo's with --demo);
- the agent of <data-dir>/agent.properties (written at the first start, re-read on change:
  edit it and the agent reloads): its artimon source polls every registered bookkeeper (the
  agent's own self-report among them) each --interval, its artimon_file source reads
  <data-dir>/run/*.artimon files, its Flume Thrift source listens for other agents
  (--thrift-port), into two file channels drained by the vhms sink and the raw sink; and
  three prometheus sources scrape the stack's own ``/metrics`` (the query API's, VHMS's, the
  agent's) under the job ``artimon`` into VHMS only (the saved dashboard "artimon" shows
  them). With --kafka, two agents of <data-dir>/agents-kafka.properties instead: ``up`` polls
  into a file channel drained by a Kafka sink onto the topic artimon-samples, and ``store``
  reads the topic into VHMS (and scrapes the stack's own ``/metrics`` into VHMS); Spark
  reads the same topic for the history, so no landing file is written;
- the registrations ``artimon status`` reads (``/services/<kind>/<name>``: the agents'
  monitoring, the query API, Kafka, HDFS and the Spark master started here;
  :mod:`artimon.status`), the view also served at the query API's ``/status``.

Then a line per round. Every listener binds --host, 127.0.0.1 by default. With
--web.config.file every HTTP port (the query API, VHMS's, the agent's monitoring) is served
behind that file, the agent scraping them as a user of up's own
(:mod:`artimon.stack.webconfig`). Third-party output
(Spark, its Python workers, warnings) goes to <data-dir>/logs/. The stop, in reverse: the
agent (its channels closed, its last landing file rolled), the alerts, Spark (after bringing
the history up to date), the API, the demo, Kafka, VHMS (a last snapshot written), HDFS,
ZooKeeper; then ``stopped.``.

--data-dir serves one ``artimon up`` at a time (``in_use.lock``): a second one on it exits
with status 1, naming the PID of the first. Nothing it starts outlives it, even after a
``kill -9``: ZooKeeper's JVM dies with it (``bookkeeper.ground.spawn``), and Spark's JVM
exits when its standard input, a pipe from this process, closes (pyspark's launcher); with
--cluster the master and worker die with it too, and their executors with the worker.
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
import warnings
from pathlib import Path

from artimon.commands._signals import stop_event
from artimon.commands._web import web_config_of
from artimon.commands.api import query_budgets
from artimon.commands.vhms import wal_options
from artimon.servers import ZooKeeperServer
from artimon.stack import (
    Agents,
    Alerts,
    Component,
    Demo,
    Hdfs,
    History,
    Kafka,
    QueryApi,
    Supervisor,
    Vhms,
    ZooKeeper,
    report_rounds,
    stack_credentials,
    stack_web_config,
)
from artimon.status import StackRegistrations
from bookkeeper import DirectoryInUseError, ZkAuthError
from bookkeeper.ground import DirectoryLock, WebConfig, WebConfigError
from vhms import DataDirInUseError, VhmsError, parse_resolutions


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


def _components(
    args: argparse.Namespace, data: Path, interval: float, credentials: str, web_config: WebConfig | None
) -> tuple[list[Component], Agents]:
    """The stack of these flags, in the order it starts; and its agents (for the round lines)."""
    external = os.environ.get("ARTIMON_ZK")
    server = None if external else ZooKeeperServer(data / "zookeeper", args.zk_port, host=args.host)
    zookeeper = ZooKeeper(server, external, credentials=credentials)
    hdfs = Hdfs(data / "hdfs", args.hdfs_port) if args.hdfs and not args.no_spark else None
    host = args.host
    vhms = Vhms(
        zookeeper,
        data / "vhms" / "default",
        interval=interval,
        host=host,
        wal=wal_options(args),
        resolutions=args.resolutions,
        web_config=web_config,
    )
    limits, budget = query_budgets(args)
    api = QueryApi(
        vhms,
        zookeeper,
        data,
        host=host,
        port=args.api_port,
        demo=args.demo,
        limits=limits,
        budget=budget,
        web_config=web_config,
    )
    agents = Agents(
        zookeeper,
        vhms,
        api,
        data,
        interval=interval,
        host=host,
        thrift_port=args.thrift_port,
        kafka=args.kafka,
        web_config=web_config,
    )
    spark = (
        None
        if args.no_spark
        else History(
            data,
            vhms,
            demo=args.demo,
            hdfs=hdfs,
            cluster=args.cluster,
            kafka=args.kafka,
            say=_say,
            ledger=agents.ledger.files_committed,
        )
    )
    kafka = Kafka(data / "kafka") if args.kafka else None
    components: list[Component | None] = [
        zookeeper,
        hdfs,
        vhms,
        kafka,
        Demo(zookeeper, host) if args.demo else None,
        api,
        spark,
        Alerts(vhms, api, data, demo=args.demo),
        agents,
        StackRegistrations(zookeeper, agents, api, kafka=kafka, hdfs=hdfs, history=spark),
    ]
    return [component for component in components if component is not None], agents


def _say(line: str) -> None:
    print(line, flush=True)


def run(args: argparse.Namespace) -> int:
    if args.resolutions is not None:
        try:
            parse_resolutions(args.resolutions)
        except VhmsError as exc:
            print(f"artimon up: --resolutions: {exc}", file=sys.stderr)
            return 2
    data = args.data_dir.resolve()
    web_config = web_config_of(args, "up")
    try:
        with DirectoryLock(data, "artimon up"):
            return _run(args, data, web_config)
    except (DirectoryInUseError, DataDirInUseError) as exc:
        print(f"artimon up: {exc}", file=sys.stderr)
        return 1
    except (ZkAuthError, WebConfigError) as exc:
        print(f"artimon up: {exc}", file=sys.stderr)
        return 2


def _run(args: argparse.Namespace, data: Path, web_config: WebConfig | None) -> int:
    interval = args.interval or (5.0 if args.demo else 60.0)
    os.environ["ARTIMON_DATA_DIR"] = str(data)  # for the agent's properties and the alerts' notifiers
    credentials = stack_credentials(data)  # before any component reads them
    served = stack_web_config(data, web_config, args.web_config_file)
    _third_party_to(data / "logs")
    stop = stop_event()
    components, agents = _components(args, data, interval, credentials, served)
    supervisor = Supervisor(components, say=_say)
    try:
        supervisor.start()
        report_rounds(stop, agents.metrics, agents.vhms.service.store, interval, args.rounds)
    finally:
        supervisor.stop()
        print("stopped.", flush=True)
    return 0
