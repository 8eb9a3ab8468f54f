"""The whole stack as separate processes, as an operator runs it, with faults to inject:
the harness of the accounting test, reusable by benchmarks and by hand. Its parts serve
alone too: :func:`start_agent_process` runs one agent (``artimon agent -f ... -n ...``) so
that it can be killed with SIGKILL, :func:`start_ready_process` any command that prints a
ready line.

:class:`Stack` is a list of components run by the :class:`~artimon.stack.Supervisor` of
``artimon up`` (started in order, stopped in reverse, a failed start stopping what had
started), all under one directory:

- ZooKeeper (:class:`~artimon.servers.ZooKeeperServer`, restartable on its port);
- a VHMS shard (``artimon vhms``) whose finest resolution is the polling interval, so each
  round has a bucket of its own, for ``ring_seconds`` (an hour by default);
- applications (``python -m bookkeeper.testing --aligned``) whose counters follow
  :func:`~bookkeeper.testing.formula_value`: every value polled in a round can be checked;
- an agent (``artimon agent``): the ``artimon`` source replicating into two file channels,
  one drained by the ``vhms`` sink, one by the ``raw`` sink into the landing directory, plus
  a Flume Thrift source (the edge Flume clients talk to) into a memory channel;
- the query API (``artimon api``) over the shards found in ZooKeeper.

Every process it starts dies with the process that runs the stack
(:func:`bookkeeper.ground.spawn`), so a test killed half-way leaves nothing running.

Faults: :meth:`Stack.kill_agent` (SIGKILL) and :meth:`Stack.start_agent`,
:meth:`Stack.stop_vhms` (SIGTERM: a last snapshot), :meth:`Stack.kill_vhms` (SIGKILL: what it
acknowledged is in its write-ahead log only) and :meth:`Stack.start_vhms` (on the same data),
:meth:`Stack.restart_zookeeper`, :meth:`Stack.pace_vhms_sink` (a sink slower than the
inflow, through the agent's reload of its configuration file).

Accounting: :meth:`Stack.vhms_values` reads what VHMS holds per (context, i, round) and
:meth:`Stack.expected` says what it should hold.

| concept | module |
|---|---|
| a command or an agent in a process of its own, waited for its ready line | ``processes.py`` |
| the stack: its components, faults and accounting | ``stack.py`` |
"""

from __future__ import annotations

from artimon.testing.processes import StackProcess, start_agent_process, start_ready_process
from artimon.testing.stack import Stack

__all__ = ["Stack", "StackProcess", "start_agent_process", "start_ready_process"]
