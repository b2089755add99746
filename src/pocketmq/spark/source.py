"""The ``pocketmq`` data source: what ``spark.read/readStream/write/writeStream.format("pocketmq")`` build.

Spark imports ``pyspark_pocketmq`` (a top-level ``pyspark_*`` module exposing ``DefaultSource``) in its
Python workers and registers this class under ``name()``, so no ``spark.dataSource.register`` call is
needed once the package is installed. The class only dispatches: options are checked by the readers and
writers it builds, at query start, on the driver.
"""

from __future__ import annotations

from pyspark.sql.datasource import DataSource
from pyspark.sql.types import StructType

from pocketmq.spark.options import OptionError
from pocketmq.spark.reader import PocketBatchReader, PocketStreamReader
from pocketmq.spark.schema import SOURCE_SCHEMA
from pocketmq.spark.writer import PocketBatchWriter, PocketStreamWriter


class PocketDataSource(DataSource):
    """PocketMQ topics as a Spark source (batch and streaming) and sink (batch and streaming)."""

    @classmethod
    def name(cls) -> str:
        return "pocketmq"

    def schema(self) -> StructType:
        return SOURCE_SCHEMA

    def reader(self, schema: StructType) -> PocketBatchReader:
        _check_read_schema(schema)
        return PocketBatchReader(dict(self.options))

    def streamReader(self, schema: StructType) -> PocketStreamReader:
        _check_read_schema(schema)
        return PocketStreamReader(dict(self.options))

    def writer(self, schema: StructType, overwrite: bool) -> PocketBatchWriter:
        return PocketBatchWriter(dict(self.options), schema, overwrite)

    def streamWriter(self, schema: StructType, overwrite: bool) -> PocketStreamWriter:
        return PocketStreamWriter(dict(self.options), schema, overwrite)


def _check_read_schema(schema: StructType) -> None:
    """The source's schema is fixed: a user schema (``.schema(...)``) must be exactly it."""
    if schema.simpleString() != SOURCE_SCHEMA.simpleString():
        raise OptionError(
            "schema",
            f"the pocketmq source has a fixed schema ({SOURCE_SCHEMA.simpleString()}); "
            f"do not pass another one ({schema.simpleString()})",
        )
