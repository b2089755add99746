"""Raw remoting calls of tests and benchmarks: one request and its reply, SEND_MESSAGE of one message, and every
message of a queue read back with PULL_MESSAGE (no SDK between the caller and the broker)."""

from __future__ import annotations

from pocketmq.common import properties as props
from pocketmq.common.message import MessageExt
from pocketmq.common.record import decode_records
from pocketmq.protocol.codes import RequestCode, ResponseCode
from pocketmq.protocol.command import RemotingCommand
from pocketmq.protocol.request_headers import SendMessageRequestHeader
from pocketmq.protocol.transport import RemotingClient


async def call(
    client: RemotingClient, addr: str, code: int, fields: dict | None = None, body: bytes = b"", timeout_s: float = 5.0
) -> RemotingCommand:
    return await client.invoke(addr, RemotingCommand.request(code, fields, body), timeout_s)


async def send(
    client: RemotingClient,
    addr: str,
    topic: str,
    body: bytes,
    properties: dict | None = None,
    *,
    timeout_s: float = 5.0,
) -> RemotingCommand:
    """SEND_MESSAGE of one message to queue 0 of ``topic`` (auto-created with one queue where the broker allows);
    the reply, whatever its code."""
    fields = SendMessageRequestHeader.ext_fields(
        producer_group="raw-producers",
        topic=topic,
        default_topic="TBW102",
        default_topic_queue_nums=1,
        queue_id=0,
        sys_flag=0,
        born_timestamp_ms=0,
        flag=0,
        properties=props.encode_properties(properties or {}),
        reconsume_times=0,
    )
    return await call(client, addr, RequestCode.SEND_MESSAGE, fields, body, timeout_s)


async def queue_messages(client: RemotingClient, addr: str, topic: str, queue_id: int = 0) -> list[MessageExt]:
    """Every message of one queue of ``topic`` on the broker at ``addr``: PULLs from offset 0 until one answers
    no record (whatever its code: callers compare what they got with what they expect)."""
    messages: list[MessageExt] = []
    while True:
        reply = await call(
            client,
            addr,
            RequestCode.PULL_MESSAGE,
            {
                "consumerGroup": "queue-reader",
                "topic": topic,
                "queueId": queue_id,
                "queueOffset": messages[-1].queue_offset + 1 if messages else 0,
                "maxMsgNums": 64,
                "sysFlag": 0,
                "commitOffset": 0,
                "suspendTimeoutMillis": 0,
                "subscription": "*",
                "subVersion": 0,
            },
        )
        batch = decode_records(reply.body) if reply.code == ResponseCode.SUCCESS else []
        if not batch:
            return messages
        messages += batch
