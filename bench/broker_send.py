"""The broker's CPU per stored message on the send path, in process and without sockets.

A real ``Broker`` (ASYNC_FLUSH, temp data dir) and its remoting router; a ``RemotingConnection`` whose transport
only collects the reply bytes is fed reads of frames as the SDK encodes them (``Producer._request``'s header):

- ``single_45``: reads of 45 SEND_MESSAGE_V2 frames (what 100 sends in flight bring per read);
- ``single_1``: reads of one SEND_MESSAGE_V2 frame (one send at a time);
- ``batch_32``: reads of one SEND_BATCH_MESSAGE of 32 messages.

1 KiB bodies, 8 queues, a UNIQ_KEY per message. Process CPU (``time.process_time``) per message, best of
``--rounds``; steadier than ``bench/produce.py`` on a shared machine since no client or kernel loopback runs in
between, but it leaves out the socket reads and writes and the event loop's turns.

    python bench/broker_send.py [--messages 40000] [--rounds 3] [--cases single_45,single_1,batch_32]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import tempfile
import time

from pocketmq.broker.broker import Broker
from pocketmq.broker.config import BrokerConfig
from pocketmq.common import properties as props
from pocketmq.common.message import Message
from pocketmq.common.topic import DEFAULT_TOPIC
from pocketmq.protocol.batch_codec import encode_batch
from pocketmq.protocol.codes import RequestCode
from pocketmq.protocol.command import RemotingCommand
from pocketmq.protocol.request_headers import SendMessageRequestHeaderV2
from pocketmq.protocol.transport import RemotingConnection
from pocketmq.server.remoting_broker import build_broker_router

BODY = b"x" * 1024
TOPIC = "bench_send"
QUEUES = 8
CASES = {"single_45": (45, 1), "single_1": (1, 1), "batch_32": (1, 32)}  # frames per read, messages per frame


class _CollectingTransport:
    """The part of an asyncio transport a RemotingConnection uses; keeps the byte count of what it writes."""

    def __init__(self) -> None:
        self.written_bytes = 0

    def get_extra_info(self, name, default=None):
        return ("127.0.0.1", 40000) if name == "peername" else default

    def write(self, data: bytes) -> None:
        self.written_bytes += len(data)

    def get_write_buffer_size(self) -> int:
        return 0

    def is_closing(self) -> bool:
        return False


def _uniq_key(n: int) -> str:
    return f"7F000001{n:024X}"


def _frame(code: int, queue_id: int, properties: str, body: bytes, batch: bool, now_ms: int) -> bytes:
    fields = SendMessageRequestHeaderV2.ext_fields(
        producer_group="bench_group",
        topic=TOPIC,
        default_topic=DEFAULT_TOPIC,
        default_topic_queue_nums=4,
        queue_id=queue_id,
        sys_flag=0,
        born_timestamp_ms=now_ms,
        flag=0,
        properties=properties,
        reconsume_times=0,
        unit_mode=False,
        batch=batch,
    )
    return RemotingCommand.request(code, fields, body).encode()


def _reads(case: str, messages: int) -> list[bytes]:
    frames_per_read, per_frame = CASES[case]
    now_ms = int(time.time() * 1000)
    frames, n = [], 0
    while n < messages:
        queue_id = len(frames) % QUEUES
        if per_frame == 1:
            frames.append(
                _frame(
                    RequestCode.SEND_MESSAGE_V2,
                    queue_id,
                    props.encode_properties({props.UNIQ_KEY: _uniq_key(n)}),
                    BODY,
                    False,
                    now_ms,
                )
            )
        else:
            batch = [Message(TOPIC, BODY, properties={props.UNIQ_KEY: _uniq_key(n + k)}) for k in range(per_frame)]
            frames.append(_frame(RequestCode.SEND_BATCH_MESSAGE, queue_id, "", encode_batch(batch), True, now_ms))
        n += per_frame
    return [b"".join(frames[k : k + frames_per_read]) for k in range(0, len(frames), frames_per_read)]


async def _run(case: str, messages: int) -> float:
    with tempfile.TemporaryDirectory(prefix="pmq-bench-send-") as data_dir:
        broker = Broker(
            BrokerConfig(
                data_dir=data_dir, remoting_port=0, auto_create_topic_enable=True, default_topic_queue_nums=QUEUES
            )
        )
        await broker.start()
        try:
            conn = RemotingConnection(build_broker_router(broker))
            transport = _CollectingTransport()
            conn.connection_made(transport)  # type: ignore[arg-type]
            for data in _reads(case, 2000):  # warm-up: topic creation, first segments
                conn.data_received(data)
            reads = _reads(case, messages)
            start = time.process_time()
            for data in reads:
                conn.data_received(data)
            cpu_s = time.process_time() - start
            if not transport.written_bytes:
                raise RuntimeError("no replies written")
        finally:
            await broker.shutdown()
    return cpu_s * 1e6 / messages


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--messages", type=int, default=40_000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--cases", default=",".join(CASES))
    args = parser.parse_args()
    for case in args.cases.split(","):
        runs = [asyncio.run(_run(case, args.messages)) for _ in range(args.rounds)]
        print(
            json.dumps(
                {
                    "case": case,
                    "messages": args.messages,
                    "broker_cpu_us_per_msg": round(min(runs), 2),
                    "runs": [round(r, 2) for r in runs],
                }
            )
        )


if __name__ == "__main__":
    main()
