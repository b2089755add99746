"""The acks of one event-loop turn: one request per broker, and each ack's own outcome."""

from __future__ import annotations

import asyncio
import base64
import json

import pytest

from pocketmq.client.batch_ack import BROKER_NAME_PROPERTY, AckCoalescer
from pocketmq.common import properties as props
from pocketmq.common.message import MessageExt
from pocketmq.protocol.codes import RequestCode, ResponseCode
from pocketmq.protocol.command import RemotingCommand
from pocketmq.protocol.error_codes import RemoteServerError

pytestmark = pytest.mark.timeout(30)


def received(offset: int, broker: str = "b1", queue_id: int = 0, start: int = 0, topic: str = "T") -> MessageExt:
    msg = MessageExt(topic=topic, body=b"x", queue_id=queue_id, queue_offset=offset)
    msg.properties[props.POP_CK] = f"{start} 1000 30000 1 0 {broker} {queue_id} {offset}"
    msg.properties[BROKER_NAME_PROPERTY] = broker
    return msg


class FakeBroker:
    """Answers batch acks with ``failed`` (entry index, offset) -> (code, remark), or with ``whole_code``; single
    acks of ``stale`` offsets fail. Records what it was sent."""

    def __init__(self, failed=None, whole_code=ResponseCode.SUCCESS, list_failures=True, stale=()):
        self.failed, self.whole_code, self.list_failures, self.stale = failed or {}, whole_code, list_failures, stale
        self.batches: list[tuple[str, dict]] = []
        self.singles: list[int] = []

    async def invoke(self, broker: str, request: RemotingCommand) -> RemotingCommand:
        assert request.code == RequestCode.BATCH_ACK_MESSAGE
        body = json.loads(request.body)
        self.batches.append((broker, body))
        if self.whole_code != ResponseCode.SUCCESS:
            return request.response(self.whole_code, remark="refused whole")
        if not self.list_failures:
            return request.response(ResponseCode.SUCCESS)
        failed = [[entry, offset, code, remark] for (entry, offset), (code, remark) in self.failed.items()]
        return request.response(ResponseCode.SUCCESS, body=json.dumps({"failed": failed}).encode())

    async def ack_one(self, msg: MessageExt) -> None:
        self.singles.append(msg.queue_offset)
        if msg.queue_offset in self.stale:
            raise RemoteServerError(ResponseCode.INVALID_PARAMETER, "stale")


def coalescer(broker: FakeBroker) -> AckCoalescer:
    return AckCoalescer("G", lambda topic: topic, broker.invoke, broker.ack_one)


def acked_offsets(entry: dict) -> list[int]:
    bits = int.from_bytes(base64.b64decode(entry["b"]), "little")
    return [entry["so"] + i for i in range(bits.bit_length()) if bits >> i & 1]


async def outcomes(acks: AckCoalescer, messages: list[MessageExt]) -> list[BaseException | None]:
    return await asyncio.gather(*(acks.ack(m) for m in messages), return_exceptions=True)


async def test_the_acks_of_one_turn_are_one_request_per_broker():
    broker = FakeBroker()
    messages = [received(o) for o in range(5)] + [received(o, broker="b2", queue_id=3, start=7) for o in (7, 9)]
    assert await outcomes(coalescer(broker), messages) == [None] * 7
    assert broker.singles == []
    (name1, body1), (name2, body2) = broker.batches
    assert (name1, name2) == ("b1", "b2")
    assert [acked_offsets(entry) for entry in body1["acks"]] == [[0, 1, 2, 3, 4]]
    assert [(e["q"], acked_offsets(e)) for e in body2["acks"]] == [(3, [7, 9])]


async def test_one_ack_alone_is_a_single_ack():
    broker = FakeBroker()
    await coalescer(broker).ack(received(4))
    assert broker.singles == [4] and broker.batches == []


async def test_acks_of_later_turns_are_later_requests():
    broker = FakeBroker()
    acks = coalescer(broker)
    await outcomes(acks, [received(0), received(1)])
    await outcomes(acks, [received(2), received(3)])
    assert [acked_offsets(body["acks"][0]) for _, body in broker.batches] == [[0, 1], [2, 3]]


async def test_an_ack_the_broker_lists_as_refused_fails_alone():
    broker = FakeBroker(failed={(0, 1): (ResponseCode.INVALID_PARAMETER, "stale handle")})
    got = await outcomes(coalescer(broker), [received(0), received(1), received(2)])
    assert got[0] is None and got[2] is None
    assert isinstance(got[1], RemoteServerError)
    assert got[1].response_code == ResponseCode.INVALID_PARAMETER and got[1].remark == "stale handle"


async def test_a_refused_ack_fails_its_own_message_when_brokers_interleave():
    """Offset 9 is listed as refused, and only broker b2 holds an ack at offset 9: only that message fails."""
    broker = FakeBroker(failed={(0, 9): (ResponseCode.INVALID_PARAMETER, "stale handle")})
    messages = [received(0), received(9, broker="b2", start=7), received(1), received(7, broker="b2", start=7)]
    got = await outcomes(coalescer(broker), messages)
    assert [type(o) for o in got] == [type(None), RemoteServerError, type(None), type(None)]
    assert sorted(name for name, _ in broker.batches) == ["b1", "b2"]


async def test_a_batch_refused_whole_is_sent_again_one_ack_at_a_time():
    broker = FakeBroker(whole_code=ResponseCode.INVALID_PARAMETER, stale=(1,))
    got = await outcomes(coalescer(broker), [received(0), received(1), received(2)])
    assert got[0] is None and got[2] is None and isinstance(got[1], RemoteServerError)
    assert broker.singles == [0, 1, 2]


async def test_any_other_refusal_fails_every_ack_of_the_batch():
    broker = FakeBroker(whole_code=ResponseCode.SYSTEM_BUSY)
    got = await outcomes(coalescer(broker), [received(0), received(1)])
    assert all(isinstance(e, RemoteServerError) and e.response_code == ResponseCode.SYSTEM_BUSY for e in got)
    assert broker.singles == []


async def test_a_transport_failure_fails_every_ack_of_the_batch():
    async def unreachable(broker, request):
        raise ConnectionResetError("gone")

    acks = AckCoalescer("G", lambda topic: topic, unreachable, FakeBroker().ack_one)
    got = await outcomes(acks, [received(0), received(1)])
    assert all(isinstance(e, ConnectionResetError) for e in got)


async def test_a_broker_that_lists_nothing_is_taken_at_its_word():
    broker = FakeBroker(list_failures=False)
    assert await outcomes(coalescer(broker), [received(0), received(1)]) == [None, None]


async def test_a_handle_that_does_not_parse_sends_each_ack_alone():
    broker = FakeBroker()
    garbage = received(1)
    garbage.properties[props.POP_CK] = "not a handle"
    got = await outcomes(coalescer(broker), [received(0), garbage])
    assert got == [None, None] and broker.singles == [0, 1] and broker.batches == []
