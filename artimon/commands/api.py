"""Serve the HTTP query API and the dashboard page over every VHMS shard registered in
ZooKeeper (--zk, else $ARTIMON_ZK) or listed with --vhms host:port, until Ctrl-C. With
--vhms-ca the shards are spoken to over TLS (--vhms-cert and --vhms-key: the client
certificate a shard with --tls-client-ca asks for). --query-max-mib bounds one query's
memory, --query-budget-mib all queries' at once (query_dsl.budget). --web.config.file serves the API
behind Prometheus's web configuration file (TLS, basic auth)."""

from __future__ import annotations

import argparse
import sys

from artimon.commands._signals import stop_event
from artimon.commands._web import web_config_of
from artimon.status import add_status_routes, register_service
from bookkeeper import TlsConfigError
from bookkeeper.ground import BackgroundServer, keep_freed_memory_returnable
from bookkeeper.wire import client_context
from query_dsl import Limits, MemoryBudget, ShardedSource, create_app


def query_budgets(args: argparse.Namespace, timeout_s: float = 30.0) -> tuple[Limits, MemoryBudget]:
    """The query limits and the process's memory budget of ``--query-max-mib``,
    ``--query-budget-mib`` and ``--query-wait`` (``artimon api``'s and ``artimon up``'s)."""
    limits = Limits(timeout_s=timeout_s, max_bytes=args.query_max_mib << 20)
    return limits, MemoryBudget(args.query_budget_mib << 20, args.query_wait)


def run(args: argparse.Namespace) -> int:
    if args.dashboards is not None and not args.dashboards.is_dir():
        print(f"artimon api: --dashboards {args.dashboards} is not a directory", file=sys.stderr)
        return 2
    web_config = web_config_of(args, "api")
    if web_config is not None and web_config.users and args.token:
        print(
            "artimon api: --token and the web config's basic_auth_users both need the Authorization "
            "header: choose one",
            file=sys.stderr,
        )
        return 2
    ssl_context = None
    if args.vhms_ca is not None:
        try:
            ssl_context = client_context(
                args.vhms_ca,
                certfile=args.vhms_cert,
                keyfile=args.vhms_key,
                check_hostname=not args.vhms_no_check_hostname,
            )
        except TlsConfigError as exc:
            print(f"artimon api: {exc}", file=sys.stderr)
            return 2
    elif args.vhms_cert is not None or args.vhms_key is not None:
        print("artimon api: --vhms-cert and --vhms-key need --vhms-ca", file=sys.stderr)
        return 2
    keep_freed_memory_returnable()  # before the server's threads: large answers' memory goes back
    servers = [(h, int(p)) for h, _, p in (s.rpartition(":") for s in args.vhms)] or None
    source = ShardedSource(args.zk, servers, ssl_context=ssl_context)
    limits, budget = query_budgets(args, args.timeout)
    app = create_app(source, token=args.token, limits=limits, dashboards_dir=args.dashboards, budget=budget)
    add_status_routes(app, args.zk)
    server = BackgroundServer(
        app,
        args.host,
        args.port,
        name="query-api",
        web_config=web_config,
    )
    stop = stop_event()
    server.start()
    address = server.url.split("://", 1)[1]
    registration = None if servers else register_service(args.zk, "api", address, server.url)
    print(
        f"query API on {server.url} (dashboards at {server.url}/, OpenAPI at {server.url}/openapi.json). "
        "Ctrl-C stops it.",
        flush=True,
    )
    try:
        stop.wait()
    finally:
        if registration is not None:
            registration.close()
        server.stop()
        source.close()
    return 0
