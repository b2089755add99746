"""Spark pickles the planning reader (inside the read function) and the writers to executors: only options and
plain data may travel, never a client with threads and sockets."""

from __future__ import annotations

import threading

import pytest
from pyspark import cloudpickle
from pyspark.sql.datasource import InputPartition

from pocketmq.spark import reader as reader_module
from pocketmq.spark.options import parse_sink_options, parse_source_options
from pocketmq.spark.range_reader import QueueRangePartition, ReadSettings
from pocketmq.spark.reader import PocketBatchReader, PocketStreamReader
from pocketmq.spark.sink_rows import SinkLayout
from pocketmq.spark.writer import PocketStreamWriter

SOURCE = {"namesrv": "127.0.0.1:9876", "topic": "orders"}


def test_readers_travel_with_their_options_only():
    for cls, streaming in ((PocketBatchReader, False), (PocketStreamReader, True)):
        reader = cls.__new__(cls)  # as built on the driver, minus the cluster checks
        reader.options = parse_source_options(SOURCE, streaming=streaming)
        reader._catalog = threading.Lock()  # stands for the client: unpicklable
        copy = cloudpickle.loads(cloudpickle.dumps(reader))
        assert copy.options == reader.options and not hasattr(copy, "_catalog")


def test_readers_read_their_partitions_after_the_trip_and_refuse_others(monkeypatch):
    read = []
    monkeypatch.setattr(reader_module, "read_partition", lambda partition: iter(read.append(partition) or ()))
    planned = QueueRangePartition((), ReadSettings.of(parse_source_options(SOURCE, streaming=False)))
    arrived = cloudpickle.loads(cloudpickle.dumps(planned))  # as an executor gets it
    for cls in (PocketBatchReader, PocketStreamReader):
        assert list(cls.__new__(cls).read(arrived)) == []
        with pytest.raises(TypeError, match="not a PocketMQ partition"):
            cls.__new__(cls).read(InputPartition(0))
    assert read == [arrived, arrived]


def test_stream_writer_pickles():
    writer = PocketStreamWriter.__new__(PocketStreamWriter)
    writer.options = parse_sink_options({"namesrv": "127.0.0.1:9876", "topic": "out"})
    writer.layout = SinkLayout(("body",), "out")
    copy = cloudpickle.loads(cloudpickle.dumps(writer))
    assert copy.options == writer.options and copy.layout == writer.layout
