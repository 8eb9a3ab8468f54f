"""Spark's own Kafka source (``readStream.format("kafka")``) for ``raw_ingest --kafka``: the
connector ``org.apache.spark:spark-sql-kafka-0-10_2.13`` and its runtime dependencies,
resolved with Maven once into the jar cache (:func:`~artimon.servers.resolve_jars`) and
handed to a Spark session as ``spark.jars`` (:func:`spark_kafka_conf`), which ships them to
the executors of a cluster too.

Why 4.2.0: Maven Central serves the connector for Spark 4.2.0, not for 4.2.1 nor 4.3.0,
hence pyspark's bound ``>=4.2,<4.3`` (pyproject.toml); a connector runs on the patch
releases of its minor. Maven's runtime scope leaves out the connector's test dependencies
(the ``spark-token-provider-kafka-0-10_2.13:4.2.0:tests`` test-jar, which Central refuses
and which Ivy's ``spark.jars.packages`` would ask for). The jars the pyspark wheel carries
already (Scala, Hadoop's client, slf4j, snappy, lz4...) are left out of ``spark.jars``, by
artifact name whatever their version: the wheel's own are the ones Spark was built with.
"""

from __future__ import annotations

import re
from pathlib import Path

from artimon.servers.jars import resolve_jars
from artimon.servers.zookeeper import pyspark_jars

__all__ = ["SPARK_KAFKA_ARTIFACTS", "SPARK_KAFKA_JAR_SET", "spark_kafka_conf", "spark_kafka_jars"]

SPARK_KAFKA_VERSION = "4.2.0"
SPARK_KAFKA_JAR_SET = f"spark-sql-kafka-{SPARK_KAFKA_VERSION}"
SPARK_KAFKA_ARTIFACTS = (
    f"org.apache.spark:spark-sql-kafka-0-10_2.13:{SPARK_KAFKA_VERSION}",
    # from_avro, which decodes a record's value in the JVM: the wheel has Avro's file format
    # but not these functions
    f"org.apache.spark:spark-avro_2.13:{SPARK_KAFKA_VERSION}",
)

_VERSIONED = re.compile(r"^(?P<artifact>.+?)-\d[^-]*(?:-[A-Za-z0-9.]+)*\.jar$")


def _artifact(jar: Path) -> str:
    """``scala-library-2.13.18.jar`` -> ``scala-library``."""
    matched = _VERSIONED.match(jar.name)
    return matched.group("artifact") if matched else jar.stem


def spark_kafka_jars() -> list[Path]:
    """The connector's runtime jars that the pyspark wheel does not carry (resolved with
    Maven on first use)."""
    carried = {_artifact(jar) for jar in pyspark_jars().glob("*.jar")}
    return [
        jar
        for jar in resolve_jars(SPARK_KAFKA_JAR_SET, SPARK_KAFKA_ARTIFACTS)
        if _artifact(jar) not in carried
    ]


def spark_kafka_conf() -> dict[str, str]:
    """The session settings that put the connector on the driver's and executors' class path."""
    return {"spark.jars": ",".join(str(jar) for jar in spark_kafka_jars())}
