"""PocketMQ's Spark data source, found by Spark without a ``register`` call.

PySpark looks for top-level modules named ``pyspark_*`` that expose a ``DefaultSource`` and registers each
under ``DefaultSource.name()``: installing PocketMQ makes ``spark.read.format("pocketmq")`` work.
"""

from pocketmq.spark.source import PocketDataSource as DefaultSource

__all__ = ["DefaultSource"]
