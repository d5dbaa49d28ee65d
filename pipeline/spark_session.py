"""A Spark session set up the way every Horologe job needs it."""

from __future__ import annotations

import os
import sys

# For a job whose JVM side is light (reading, sorting, handing Arrow batches to Python
# workers): the first-tier JIT compiler only, and the serial collector. Cold, the second
# tier's compiler threads took 16 s of CPU where these take 10, CPU that spark schedule's
# Python workers (and on one machine, the nodes) need. Not for the audit: its
# aggregations ran 40 % slower so (docs/benchmarks.md).
LIGHT_JVM = "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC"


def spark_session(master: str = "local[*]", app_name: str = "horologe", *, java_options: str = ""):
    """Local mode by default; any Spark master URL otherwise. Quiet, and with workers on
    this Python (they must see the installed ``horologe`` package). ``java_options``: more
    options for the driver's JVM (in local mode, the executors' too), e.g. LIGHT_JVM;
    they apply only if no session is running yet in this process."""
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    from pyspark.sql import SparkSession

    spark = (
        SparkSession.builder.master(master)
        .appName(app_name)
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")  # our own progress display instead
        .config("spark.sql.execution.arrow.pyspark.enabled", "true")
        .config("spark.sql.shuffle.partitions", "8")
        .config("spark.driver.extraJavaOptions", f"-Dlog4j2.level=ERROR {java_options}".strip())
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    from .datasource import HorologeDataSource

    spark.dataSource.register(HorologeDataSource)
    return spark
