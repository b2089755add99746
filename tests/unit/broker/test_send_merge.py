"""Single sends of one socket read stored in one append (MessageService.send_all_nowait, RequestRouter.serve_all),
each keeping its own result and its own failure."""

import asyncio

import pytest

from pocketmq.broker.broker import Broker
from pocketmq.broker.config import BrokerConfig
from pocketmq.broker.messages import SendRequest
from pocketmq.common.errors import IllegalMessageError, IllegalTopicError
from pocketmq.common.message import Message
from pocketmq.protocol.codes import RequestCode, ResponseCode
from pocketmq.protocol.command import FrameDecoder, RemotingCommand
from pocketmq.protocol.transport import RemotingServer, RequestRouter
from pocketmq.store.api import FlushMode, PutStatus

SEGMENT_BYTES = 64 * 1024


async def _started(tmp_path, **options) -> Broker:
    broker = Broker(
        BrokerConfig(
            data_dir=tmp_path,
            remoting_port=0,
            auto_create_topic_enable=True,
            commit_log_segment_bytes=SEGMENT_BYTES,
            **options,
        )
    )
    await broker.start()
    return broker


@pytest.fixture
async def broker(tmp_path):
    b = await _started(tmp_path)
    yield b
    await b.shutdown()


def _count_appends(store) -> list[int]:
    """The number of messages of each append_messages call from now on."""
    sizes: list[int] = []
    append = store.append_messages

    def counting(msgs):
        sizes.append(len(msgs))
        return append(msgs)

    store.append_messages = counting
    return sizes


def _send(topic: str, body: bytes = b"x", queue_id: int | None = 0) -> SendRequest:
    return SendRequest([Message(topic, body)], topic, queue_id)


async def test_sends_of_one_read_share_one_append_and_keep_their_own_results(broker):
    appends = _count_appends(broker.store)
    outcomes = broker.messages.send_all_nowait([_send("t"), _send("t"), _send("u"), _send("t", queue_id=1)])
    assert appends == [4]
    assert [[(r.topic, r.queue_id, r.queue_offset) for r in o] for o in outcomes] == [
        [("t", 0, 0)],
        [("t", 0, 1)],
        [("u", 0, 0)],
        [("t", 1, 0)],
    ]
    assert len({o[0].phys_offset for o in outcomes}) == 4
    got = broker.store.get_messages("t", 0, 0, 10)
    assert len(got.records) == 2


async def test_a_send_refused_by_its_checks_fails_only_itself(broker):
    outcomes = broker.messages.send_all_nowait([_send("t"), _send("bad topic!"), _send("t", body=b"")])
    assert outcomes[0][0].queue_offset == 0
    assert isinstance(outcomes[1], IllegalTopicError)
    assert isinstance(outcomes[2], IllegalMessageError)
    assert broker.store.max_queue_offset("t", 0) == 1


async def test_a_merged_append_the_store_refuses_falls_back_to_one_append_per_send(broker):
    appends = _count_appends(broker.store)
    too_big_for_a_segment = b"y" * SEGMENT_BYTES  # under the broker's body limit, larger than a segment
    outcomes = broker.messages.send_all_nowait([_send("t"), _send("t", body=too_big_for_a_segment), _send("t")])
    assert appends == [3, 1, 1, 1]
    assert [r.queue_offset for r in outcomes[0]] == [0]
    assert isinstance(outcomes[1], IllegalMessageError)
    assert [r.queue_offset for r in outcomes[2]] == [1]
    assert broker.store.max_queue_offset("t", 0) == 2


async def test_idempotent_sends_keep_their_own_path_beside_merged_ones(broker):
    def idempotent() -> SendRequest:
        msg = Message("t", b"once", properties={"PMQ_IDEMPOTENT": "true", "UNIQ_KEY": "K1"})
        return SendRequest([msg], "t", 0)

    first = await broker.messages.send_all_nowait([idempotent()])[0]
    appends = _count_appends(broker.store)
    outcomes = broker.messages.send_all_nowait([_send("t"), idempotent(), _send("t")])
    assert appends == [2]
    assert [r.queue_offset for r in outcomes[0]] + [r.queue_offset for r in outcomes[2]] == [1, 2]
    again = await outcomes[1]
    assert (again[0].duplicate, again[0].queue_offset) == (True, first[0].queue_offset)
    assert broker.store.max_queue_offset("t", 0) == 3


async def test_an_idempotent_batch_stores_each_key_once_and_answers_its_copies_with_the_first(broker):
    def batch(*keys: str | None) -> SendRequest:
        props = [{"PMQ_IDEMPOTENT": "true", "UNIQ_KEY": k} if k else {} for k in keys]
        return SendRequest([Message("t", b"m", properties=p) for p in props], "t", 0, batch=True)

    first = await broker.messages.send_all_nowait([batch("K1", None, "K1", "K2")])[0]
    assert [(r.duplicate, r.queue_offset) for r in first] == [(False, 0), (False, 1), (True, 0), (False, 2)]
    again = await broker.messages.send_all_nowait([batch("K2", "K1")])[0]
    assert [(r.duplicate, r.queue_offset) for r in again] == [(True, 2), (True, 0)]
    assert broker.store.max_queue_offset("t", 0) == 3


async def test_sync_flush_sends_share_one_append_and_answer_once_durable(tmp_path):
    broker = await _started(tmp_path, flush_mode=FlushMode.SYNC)
    try:
        appends = _count_appends(broker.store)
        outcomes = broker.messages.send_all_nowait([_send("t"), _send("t")])
        assert appends == [2]
        results = [await o for o in outcomes]
        assert [[(r.status, r.queue_offset) for r in rs] for rs in results] == [
            [(PutStatus.PUT_OK, 0)],
            [(PutStatus.PUT_OK, 1)],
        ]
        assert broker.store.durable_phys_offset >= results[1][0].phys_offset
    finally:
        await broker.shutdown()


def _send_v2(topic: str, body: bytes, queue_id: int = 0) -> RemotingCommand:
    return RemotingCommand.request(
        RequestCode.SEND_MESSAGE_V2, {"a": "pg", "b": topic, "e": queue_id, "f": 0, "g": 0, "h": 0, "i": ""}, body
    )


async def test_the_send_frames_of_one_write_get_their_own_replies(broker):
    """Through the broker's real router and transport: three sends and a lookup in one socket write."""
    from pocketmq.server.remoting_broker import build_broker_router

    server = RemotingServer(build_broker_router(broker))
    await server.start()
    appends = _count_appends(broker.store)
    requests = [
        _send_v2("t", b"a"),
        _send_v2("bad topic!", b"b"),
        _send_v2("t", b"c"),
        RemotingCommand.request(RequestCode.GET_MAX_OFFSET, {"topic": "t", "queueId": 0}),
    ]
    reader, writer = await asyncio.open_connection("127.0.0.1", server.port)
    try:
        writer.write(b"".join(r.encode() for r in requests))
        decoder, replies = FrameDecoder(), {}
        async with asyncio.timeout(10):
            while len(replies) < len(requests):
                for reply in decoder.feed(await reader.read(65536)):
                    replies[reply.opaque] = reply
    finally:
        writer.close()
        await server.stop()
    assert appends == [2]
    ok_a, bad, ok_c, max_offset = (replies[r.opaque] for r in requests)
    assert (ok_a.code, ok_a.ext_fields["queueOffset"]) == (ResponseCode.SUCCESS, "0")
    assert bad.code != ResponseCode.SUCCESS and "bad topic!" in bad.remark
    assert (ok_c.code, ok_c.ext_fields["queueOffset"]) == (ResponseCode.SUCCESS, "1")
    assert max_offset.ext_fields["offset"] == "2"  # handled after the sends before it in the read


def test_serve_all_hands_runs_of_batch_codes_to_the_batch_handler_in_order():
    router = RequestRouter()
    runs: list[list[int]] = []

    def batch(conn, requests):
        runs.append([r.opaque for r in requests])
        return [ValueError("boom") if r.body == b"fail" else r.response(ResponseCode.SUCCESS) for r in requests]

    router.register(1, lambda conn, r: batch(conn, [r])[0], batch)
    router.register(2, lambda conn, r: r.response(ResponseCode.SUCCESS, remark="single"))
    requests = [
        RemotingCommand(code=c, opaque=i, body=body)
        for i, (c, body) in enumerate([(1, b""), (1, b"fail"), (2, b""), (1, b"")])
    ]

    class Conn:
        remote_address = "test"

    replies = router.serve_all(Conn(), requests)
    assert runs == [[0, 1], [3]]
    assert [r.code for r in replies] == [
        ResponseCode.SUCCESS,
        ResponseCode.SYSTEM_ERROR,
        ResponseCode.SUCCESS,
        ResponseCode.SUCCESS,
    ]
    assert replies[2].remark == "single"
    assert [r.opaque for r in replies] == [0, 1, 2, 3]
