"""Spark pickles the planning reader (inside the read function) and the writers to executors: only options and
plain data may travel, never a client with threads and sockets."""

from __future__ import annotations

import threading

from pyspark import cloudpickle

from pocketmq.spark.options import parse_sink_options, parse_source_options
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


def test_stream_writer_pickles():
    writer = PocketStreamWriter.__new__(PocketStreamWriter)
    writer.options = parse_sink_options({"namesrv": "127.0.0.1:9876", "topic": "out"})
    writer.layout = SinkLayout(("body",), "out")
    copy = cloudpickle.loads(cloudpickle.dumps(writer))
    assert copy.options == writer.options and copy.layout == writer.layout
