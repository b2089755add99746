"""PocketMQ topics as PySpark sources and sinks (the ``pocketmq`` data source; see docs/spark.md).

Pure planning in ``options``, ``offsets``, ``planning`` and ``sink_rows``; I/O in ``reader``, ``writer`` and
``clients``; ``source`` is the ``DataSource`` that the top-level ``pyspark_pocketmq`` module exposes.
"""
