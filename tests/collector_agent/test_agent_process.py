"""An agent started by the harness dies with the process that started it, and a second
agent on the same file channel directory is refused naming the first one's PID."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

from artimon.stack import agent_properties
from artimon.testing import start_agent_process
from bookkeeper.testing import running
from collector_agent import Agent, ChannelException


def properties(root: Path) -> str:
    """A seq source into a file channel under ``root``, drained into nothing."""
    return agent_properties(
        "a1",
        sources={"r1": {"type": "seq", "channels": "c1"}},
        channels={"c1": {"type": "file", "dataDirs": root / "c1", "minimumRequiredSpace": 1048576}},
        sinks={"k1": {"type": "null", "channel": "c1"}},
    )


# starts the agent through the harness, prints its PID, then waits to be killed
PARENT = """
import sys, time
from pathlib import Path
from artimon.testing import start_agent_process
agent = start_agent_process(Path(sys.argv[1]), "a1")
print(agent.pid, flush=True)
time.sleep(600)
"""


def test_an_agent_dies_with_the_process_that_started_it(tmp_path: Path, wait: Callable[..., None]) -> None:
    config = tmp_path / "agent.properties"
    config.write_text(properties(tmp_path))
    parent = subprocess.Popen([sys.executable, "-c", PARENT, str(config)], stdout=subprocess.PIPE, text=True)
    try:
        assert parent.stdout is not None
        agent = int(parent.stdout.readline())
        assert running(agent)
        os.kill(parent.pid, signal.SIGKILL)
        parent.wait(timeout=30)
        wait(lambda: not running(agent), timeout=15, what=f"the agent (pid {agent}) to die with its parent")
    finally:
        if parent.poll() is None:
            parent.kill()
        parent.communicate()


def test_a_second_agent_on_a_held_channel_directory_names_the_first(tmp_path: Path) -> None:
    config = tmp_path / "agent.properties"
    config.write_text(properties(tmp_path))
    first = start_agent_process(config, "a1")
    try:
        second = Agent.from_properties(config.read_text(), "a1", {})
        second.start()  # the agent runs; the channel it cannot have is reported
        try:
            channel = second.channels["c1"]
            assert channel.state.value == "ERROR" and channel.metrics()["Unhealthy"] == 1
            tx = channel.transaction()
            tx.begin()
            try:
                tx.take_batch(1)
                raise AssertionError("a channel that did not start gave events")
            except ChannelException as exc:
                assert f"in use by pid {first.pid} (file channel c1)" in str(exc)
            finally:
                tx.rollback()
                tx.close()
        finally:
            second.stop()
    finally:
        first.send_signal(signal.SIGTERM)
        first.wait(timeout=60)
        if first.stdout is not None:
            first.stdout.close()
