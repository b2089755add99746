"""``SendAccumulator`` (pure asyncio logic, the batch send faked): the sends of one loop turn make one batch per
topic, a full batch leaves early, each sender gets its own outcome, a failed batch fails all its senders, sends
with another retry count (``send_async``'s) make a batch of their own, a cancelled sender's message stays home,
and ``close`` sends what is pending."""

from __future__ import annotations

import asyncio

import pytest

from pocketmq.client.send_accumulator import SendAccumulator
from pocketmq.common.errors import RemotingError
from pocketmq.common.message import Message

pytestmark = pytest.mark.timeout(10)

RETRIES = 2


class FakeBroker:
    def __init__(self, fail: Exception | None = None):
        self.batches: list[list[bytes]] = []
        self.retry_times: list[int] = []
        self.fail = fail

    async def send_batch(self, messages: list[Message], retry_times: int) -> list:
        await asyncio.sleep(0)  # a real batch send suspends: senders must not depend on it being synchronous
        if self.fail:
            raise self.fail
        self.batches.append([m.body for m in messages])
        self.retry_times.append(retry_times)
        return [
            ValueError(f"refused {m.body!r}") if m.body == b"bad" else f"{m.topic}:{m.body.decode()}" for m in messages
        ]


def accumulator(broker: FakeBroker, max_messages: int = 64, max_bytes: int = 1 << 20) -> SendAccumulator:
    return SendAccumulator(broker.send_batch, max_messages=max_messages, max_bytes=max_bytes)


async def test_sends_of_one_turn_make_one_batch_per_topic_and_each_gets_its_result():
    broker = FakeBroker()
    acc = accumulator(broker)
    futures = [acc.add(Message(topic, str(i).encode()), RETRIES) for i in range(3) for topic in ("a", "b")]
    results = await asyncio.gather(*futures)
    assert results == [f"{topic}:{i}" for i in range(3) for topic in ("a", "b")]
    assert sorted(broker.batches) == [[b"0", b"1", b"2"], [b"0", b"1", b"2"]]


async def test_a_lone_send_leaves_at_the_end_of_its_turn():
    broker = FakeBroker()
    acc = accumulator(broker)
    assert await acc.add(Message("t", b"alone"), RETRIES) == "t:alone"
    assert await acc.add(Message("t", b"next"), RETRIES) == "t:next"
    assert broker.batches == [[b"alone"], [b"next"]]


@pytest.mark.parametrize("limits", [{"max_messages": 2}, {"max_bytes": 2}])
async def test_a_full_batch_leaves_early(limits):
    broker = FakeBroker()
    acc = accumulator(broker, **limits)
    results = await asyncio.gather(*(acc.add(Message("t", str(i).encode()), RETRIES) for i in range(5)))
    assert results == [f"t:{i}" for i in range(5)]
    assert broker.batches == [[b"0", b"1"], [b"2", b"3"], [b"4"]]


async def test_a_failed_batch_fails_every_sender_of_it():
    acc = accumulator(FakeBroker(fail=RemotingError("broker gone")))
    outcomes = await asyncio.gather(*(acc.add(Message("t", b"x"), RETRIES) for _ in range(3)), return_exceptions=True)
    assert [type(o) for o in outcomes] == [RemotingError] * 3


async def test_close_sends_what_is_pending():
    broker = FakeBroker()
    acc = accumulator(broker)
    future = acc.add(Message("t", b"last"), RETRIES)
    await acc.close()
    assert future.result() == "t:last"
    assert broker.batches == [[b"last"]]


async def test_a_message_failed_alone_fails_only_its_sender():
    acc = accumulator(FakeBroker())
    outcomes = await asyncio.gather(
        *(acc.add(Message("t", body), RETRIES) for body in (b"1", b"bad", b"2")), return_exceptions=True
    )
    assert outcomes[0] == "t:1" and outcomes[2] == "t:2"
    assert isinstance(outcomes[1], ValueError)


async def test_a_sender_cancelled_before_the_batch_leaves_takes_its_message_back():
    broker = FakeBroker()
    acc = accumulator(broker)
    kept, cancelled = acc.add(Message("t", b"kept"), RETRIES), acc.add(Message("t", b"cancelled"), RETRIES)
    cancelled.cancel()
    assert await kept == "t:kept"
    assert broker.batches == [[b"kept"]]


async def test_sends_with_another_retry_count_make_another_batch():
    broker = FakeBroker()
    acc = accumulator(broker)
    results = await asyncio.gather(*(acc.add(Message("t", str(i).encode()), i % 2) for i in range(4)))
    assert results == [f"t:{i}" for i in range(4)]
    assert sorted(zip(broker.retry_times, broker.batches)) == [(0, [b"0", b"2"]), (1, [b"1", b"3"])]
