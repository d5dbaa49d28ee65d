"""A Spark session set up the way every Horologe job needs it."""

from __future__ import annotations

import os
import sys


def spark_session(master: str = "local[*]", app_name: str = "horologe"):
    """Local mode by default; any Spark master URL otherwise. Quiet, and with workers on
    this Python (they must see the installed ``horologe`` package)."""
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
        .config("spark.driver.extraJavaOptions", "-Dlog4j2.level=ERROR")
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    from .datasource import HorologeDataSource

    spark.dataSource.register(HorologeDataSource)
    return spark
