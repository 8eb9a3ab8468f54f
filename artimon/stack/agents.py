"""The agents of ``artimon up``, built with :func:`~artimon.stack.properties.agent_properties`
and written to ``<data-dir>/agent.properties`` (or ``agents-kafka.properties`` with
``--kafka``) at the first start. ``${...}`` are set by ``up`` at each start: ``ARTIMON_ZK``,
``ARTIMON_INTERVAL``, ``ARTIMON_ROLL_INTERVAL``, ``ARTIMON_THRIFT_PORT``, ``ARTIMON_HOST``,
``ARTIMON_DATA_DIR``, ``ARTIMON_KAFKA``, the ``ARTIMON_<PART>_METRICS`` URLs, and
``ARTIMON_SELF_CA``, ``ARTIMON_SELF_USER``, ``ARTIMON_SELF_PASSWORD_FILE``,
``ARTIMON_WEB_CONFIG_FILE`` (:mod:`artimon.stack.webconfig`; empty without a web config file).
"""

from __future__ import annotations

from artimon.stack.properties import Keys, agent_properties

KAFKA_TOPIC = "artimon-samples"
DEAD_LETTER = "${ARTIMON_DATA_DIR}/dead-letter"
_HEADER = (
    "{what} of `artimon up{flag}` (Flume's properties format, docs/agent.md), written at its\n"
    "first start. Edit it: the agent re-reads it every few seconds and applies the difference.\n"
    "${{...}} are set by `artimon up` at each start (its flags and the ZooKeeper it runs).\n"
)
_SELF = ("api", "vhms", "agent")
_SELF_COMMENT = (
    "The sources api, vhms and agent scrape the stack's own /metrics (job artimon, instance named)\n"
    "into VHMS only: the Parquet history keeps the site's metrics, not the collector's chatter.\n"
)


def _self_sources(channel: str) -> dict[str, Keys]:
    """Artimon watching itself: a prometheus source per part, each named by its instance
    label (their ports may change from one start to the next; their series must not), into
    VHMS only, so that the landing channel's work per round stays what the applications make
    it."""
    return {
        name: {
            "type": "prometheus",
            "targets": f"${{ARTIMON_{name.upper()}_METRICS}}",
            "job": "artimon",
            "labels.instance": name,
            "interval": "${ARTIMON_INTERVAL}",
            # empty unless `up --web.config.file` (artimon/stack/webconfig.py)
            "tlsCaFile": "${ARTIMON_SELF_CA}",
            "basicAuthUsername": "${ARTIMON_SELF_USER}",
            "basicAuthPasswordFile": "${ARTIMON_SELF_PASSWORD_FILE}",
            "channels": channel,
        }
        for name in _SELF
    }


def _polling(channels: list[str]) -> dict[str, Keys]:
    """The sources of a polling agent: registered bookkeepers, ``.artimon`` files, other
    agents over Flume's Thrift."""
    return {
        "poll": {
            "type": "artimon",
            "zk": "${ARTIMON_ZK}",
            "interval": "${ARTIMON_INTERVAL}",
            "agentId": "embedded",
            "channels": channels,
        },
        "files": {
            "type": "artimon_file",
            "directory": "${ARTIMON_DATA_DIR}/run",
            "interval": "${ARTIMON_INTERVAL}",
            "channels": channels,
        },
        "flume": {
            "type": "thrift",
            "bind": "${ARTIMON_HOST}",
            "port": "${ARTIMON_THRIFT_PORT}",
            "channels": channels,
        },
    }


def _file_channel(name: str) -> Keys:
    return {
        "type": "file",
        "dataDirs": f"${{ARTIMON_DATA_DIR}}/channels/{name}",
        "minimumRequiredSpace": 104857600,
        "deadLetter.dir": DEAD_LETTER,
    }


def _store_sink(channel: str, **keys: object) -> Keys:
    return {"type": "vhms", "channel": channel, "zk": "${ARTIMON_ZK}", **keys, "deadLetter.dir": DEAD_LETTER}


def _land_sink(channel: str) -> Keys:
    return {
        "type": "raw",
        "channel": channel,
        "directory": "${ARTIMON_DATA_DIR}/landing",
        "rollInterval": "${ARTIMON_ROLL_INTERVAL}",
        "deadLetter.dir": DEAD_LETTER,
    }


def _kafka_source(channel: str, group: str) -> Keys:
    return {
        "type": "kafka",
        "channels": channel,
        "kafka.bootstrap.servers": "${ARTIMON_KAFKA}",
        "kafka.topics": KAFKA_TOPIC,
        "kafka.consumer.group.id": group,
        "batchDurationMillis": 200,
        "deadLetter.dir": DEAD_LETTER,
    }


def up_agent() -> str:
    """The one agent of ``artimon up``: polling into two file channels, drained by the vhms
    sink and the raw sink (the landing files of Spark's raw_ingest)."""
    return agent_properties(
        "up",
        sources={**_polling(["durable", "landing"]), **_self_sources("durable")},
        channels={"durable": _file_channel("durable"), "landing": _file_channel("landing")},
        sinks={
            "store": _store_sink("durable", maxBackoffSleep=1000),
            "land": _land_sink("landing"),
        },
        comment=_HEADER.format(what="The agent", flag="") + _SELF_COMMENT,
    )


def kafka_agents() -> str:
    """The two agents of ``artimon up --kafka``: ``up`` polls into a durable channel and
    publishes onto the topic; ``store`` reads it into VHMS. Spark's raw_ingest reads the
    same topic for the history (no landing files)."""
    publish = {
        "type": "kafka",
        "channel": "durable",
        "kafka.bootstrap.servers": "${ARTIMON_KAFKA}",
        "kafka.topic": KAFKA_TOPIC,
        "batchSize": 1000,
        "maxBackoffSleep": 1000,
        "deadLetter.dir": DEAD_LETTER,
    }
    polling = agent_properties(
        "up",
        sources=_polling(["durable"]),
        channels={"durable": _file_channel("durable")},
        sinks={"publish": publish},
        comment=_HEADER.format(what="The agents", flag=" --kafka")
        + "`up` polls into a durable channel and publishes onto the topic; `store` reads the topic\n"
        "into VHMS; Spark's raw_ingest reads the same topic into the Parquet history.\n"
        "On several machines, run `up` on each polling host and `store` beside the stores\n"
        "(docs/operations.md); Kafka is the buffer between them.\n",
    )
    storing = agent_properties(
        "store",
        sources={
            "samples": _kafka_source("tostore", "artimon-vhms"),
            **_self_sources("tostore"),
        },
        channels={"tostore": _file_channel("tostore")},
        sinks={"store": _store_sink("tostore", batchSize=1000, maxBackoffSleep=1000)},
        comment=_SELF_COMMENT,
    )
    return f"{polling}\n{storing}"
