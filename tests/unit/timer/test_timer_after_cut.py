"""The timer after the store's tail was cut (a slave dropping records its new master never had): timers of the
dropped records are forgotten and a new timer record written at a dropped offset is due at its own time."""

from pocketmq.broker.broker import Broker
from pocketmq.broker.config import BrokerConfig
from pocketmq.common.message import Message
from pocketmq.common.record import decode_record
from pocketmq.common.topic import TIMER_TOPIC
from pocketmq.runtime.clock import ManualClock


async def _delay(broker, body: str, delay_ms: int) -> None:
    await broker.messages.send(
        [Message.create("t", body, properties={"TIMER_DELAY_MS": str(delay_ms)})], topic="t", queue_id=0
    )


def _delivered(broker) -> list[bytes]:
    got = broker.store.get_messages("t", 0, 0, 100, max_bytes=1 << 20, tag_filter=None)
    return [m.body for m in got.messages()]


async def _tick(broker, clock, advance_ms: int) -> None:
    clock.advance(advance_ms)
    broker.timer.load_new()
    await broker.timer.fire_due(clock.now_ms())


async def test_timers_of_cut_records_are_forgotten_and_new_ones_keep_their_time(tmp_path):
    clock = ManualClock()
    broker = Broker(BrokerConfig(data_dir=tmp_path, remoting_port=0), clock=clock)
    await broker.start(remoting_port=10911)
    try:
        await _delay(broker, "kept", 5_000)
        await _delay(broker, "dropped", 5_000)
        broker.timer.load_new()
        second = broker.store.get_messages(TIMER_TOPIC, 0, 1, 1, max_bytes=1 << 20, tag_filter=None).records[0]
        await broker.store.truncate_tail(decode_record(second)[0].phys_offset)
        broker.timer.after_cut()
        assert broker.timer.pending == 1

        await _delay(broker, "new", 1_000)  # timer queue offset 1 again
        await _tick(broker, clock, 1_000)
        assert _delivered(broker) == [b"new"]  # at its own time, not the dropped record's
        await _tick(broker, clock, 4_000)
        assert _delivered(broker) == [b"new", b"kept"] and broker.timer.pending == 0
    finally:
        await broker.shutdown()
