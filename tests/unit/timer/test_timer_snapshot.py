"""The saved timer wheel (``timer.snapshot``): the file alone, and restarts of a real in-process broker in virtual
time, clean or from a crash image, that load it, refuse a stale or damaged one, and neither lose nor duplicate a
timer."""

import re
import shutil
from array import array

import pytest
from tests.unit.pop.pop_support import FaultyStore
from tests.unit.virtual_time import advance_until

from pocketmq.broker.broker import Broker
from pocketmq.broker.config import BrokerConfig
from pocketmq.broker.timer import service, snapshot
from pocketmq.broker.timer.snapshot import SNAPSHOT_FILE
from pocketmq.broker.timer.wheel import TimerWheel
from pocketmq.common.message import Message
from pocketmq.runtime.clock import ManualClock
from pocketmq.store.api import PutStatus

pytestmark = pytest.mark.timeout(60)


def drain(wheel: TimerWheel) -> list[tuple[int, int]]:
    return wheel.pop_due(10**15, 10**9)


def test_a_saved_wheel_loads_back_whole_opened_second_included(tmp_path):
    wheel = TimerWheel()
    for key, deliver_ms in enumerate([5_100, 5_900, 5_400, 7_000, 123_456_789, 5_100]):
        wheel.add(deliver_ms, key)
    assert wheel.next_due_ms() == 5_100  # opens second 5: its timers move to the near heap
    wheel.add(5_050, 99)  # added to an opened second
    path = tmp_path / SNAPSHOT_FILE
    snapshot.save(path, 3, 100, 0xDEADBEEF, wheel.buckets())
    saved = snapshot.read(path)
    assert saved is not None
    assert (saved.progress_offset, saved.loaded_until, saved.anchor_crc, saved.timers) == (3, 100, 0xDEADBEEF, 7)
    loaded = TimerWheel()
    for second, pairs in saved.buckets:
        loaded.add_bucket(second, pairs)
    assert len(loaded) == 7
    assert drain(loaded) == drain(wheel)


@pytest.mark.parametrize(
    "damage",
    [
        lambda data: data[:-1],  # torn
        lambda data: data[:20] + bytes([data[20] ^ 1]) + data[21:],  # a bit flipped
        lambda data: b"NOTAWHEEL" + data[9:],  # another file
        lambda data: b"",
    ],
    ids=["torn", "flipped", "foreign", "empty"],
)
def test_a_damaged_file_is_not_used(tmp_path, damage):
    path = tmp_path / SNAPSHOT_FILE
    snapshot.save(path, 0, 2, 1, [(5, array("q", [5_000, 0, 5_500, 1]))])
    path.write_bytes(damage(path.read_bytes()))
    assert snapshot.read(path) is None


def test_add_bucket_into_an_opened_second_keeps_the_heap():
    wheel = TimerWheel()
    wheel.add(2_500, 1)
    assert wheel.next_due_ms() == 2_500
    wheel.add_bucket(2, array("q", [2_100, 2, 2_900, 3]))
    wheel.add_bucket(4, array("q", [4_000, 4]))
    wheel.add_bucket(4, array("q", [4_001, 5]))
    assert drain(wheel) == [(2_100, 2), (2_500, 1), (2_900, 3), (4_000, 4), (4_001, 5)]


# -- a real broker ---------------------------------------------------------------------------------------------------
def make_broker(tmp_path, clock):
    return Broker(BrokerConfig(data_dir=tmp_path, remoting_port=0, message_delay_level="1s 2s 3s 4s 5s"), clock=clock)


@pytest.fixture
def clock():
    return ManualClock()


def visible(broker, topic="t"):
    got = broker.store.get_messages(topic, 0, 0, 1000, max_bytes=1 << 24, tag_filter=None)
    return got.messages()


async def tick(broker, clock, advance_ms):
    clock.advance(advance_ms)
    broker.timer.load_new()
    await broker.timer.fire_due(clock.now_ms())


async def send_delayed(broker, count, first=0):
    for i in range(first, first + count):
        msg = Message.create("t", f"m{i}", properties={"DELAY": str(1 + i % 5)})
        await broker.messages.send([msg], topic="t", queue_id=0)


async def started(tmp_path, clock):
    broker = make_broker(tmp_path, clock)
    await broker.start(remoting_port=10911)
    return broker


async def test_two_clean_restarts_load_the_saved_wheel_and_deliver_each_timer_once(tmp_path, clock, caplog):
    first = await started(tmp_path, clock)
    await send_delayed(first, 50)
    await tick(first, clock, 1500)  # level 1 delivered
    await first.shutdown()
    path = first.config.metadata_dir() / SNAPSHOT_FILE
    assert path.exists()

    caplog.set_level("INFO", logger="pocketmq.broker.timer.service")
    second = await started(tmp_path, clock)
    try:
        assert "records_read=0 pending=40 from_snapshot=40" in caplog.text
        await send_delayed(second, 10, first=50)
        await tick(second, clock, 1000)  # level 2 delivered, old and new
    finally:
        await second.shutdown()
    caplog.clear()
    third = await started(tmp_path, clock)
    try:
        assert "pending=38 from_snapshot=38" in caplog.text
        await tick(third, clock, 5000)
        bodies = sorted(m.body.decode() for m in visible(third))
        assert bodies == sorted(f"m{i}" for i in range(60))  # each once
        assert third.timer.pending == 0
    finally:
        await third.shutdown()
    assert not path.exists()  # nothing pending: nothing saved


async def test_a_snapshot_whose_anchor_names_another_record_is_refused_and_the_records_are_read(
    tmp_path, clock, caplog
):
    first = await started(tmp_path, clock)
    await send_delayed(first, 20)
    await first.shutdown()
    path = first.config.metadata_dir() / SNAPSHOT_FILE
    saved = snapshot.read(path)
    assert saved is not None
    # as if the store had another record there (cut and rewritten); one timer fewer in the file
    fewer = [(second, pairs[2:]) for second, pairs in saved.buckets]
    snapshot.save(path, saved.progress_offset, saved.loaded_until, saved.anchor_crc ^ 1, fewer)
    caplog.set_level("INFO", logger="pocketmq.broker.timer.service")
    second = await started(tmp_path, clock)
    try:
        assert "event=timer_snapshot_stale" in caplog.text
        assert "records_read=20 pending=20 from_snapshot=0" in caplog.text
        await tick(second, clock, 5000)
        assert sorted(m.body.decode() for m in visible(second)) == sorted(f"m{i}" for i in range(20))
    finally:
        await second.shutdown()


async def test_a_timer_whose_delivery_failed_is_saved_as_pending(tmp_path, clock):
    first = await started(tmp_path, clock)
    await send_delayed(first, 1)
    await first.timer.stop_delivery()  # only the test's rounds deliver
    store = FaultyStore(first.store)
    first.timer.writes._store = store
    store.refuse = lambda msgs: PutStatus.SERVICE_NOT_AVAILABLE  # a full disk
    await tick(first, clock, 1000)
    assert first.timer.pending == 1 and first.timer.next_due_ms() is None  # out of the wheel, backing off
    await first.shutdown()
    second = await started(tmp_path, clock)
    try:
        assert second.timer.pending == 1 and second.timer.next_due_ms() is not None
        await tick(second, clock, 1)
        assert [m.body for m in visible(second)] == [b"m0"]
    finally:
        await second.shutdown()


async def test_a_start_from_a_crash_image_loads_the_wheel_saved_while_running(tmp_path, clock, caplog, monkeypatch):
    """The delivery loop saves the wheel while timers arrive; a crash image taken after more timers came and
    some were delivered starts from that wheel plus the records after it, and delivers each timer once."""
    monkeypatch.setattr(service, "_SNAPSHOT_AFTER_RECORDS", 10)
    first = await started(tmp_path / "running", clock)
    path = first.config.metadata_dir() / SNAPSHOT_FILE
    try:
        await send_delayed(first, 20)
        await advance_until(clock, path.exists, step_ms=100)  # the loop's rounds saved it
        saved = snapshot.read(path)
        assert saved is not None and saved.timers == 20
        await send_delayed(first, 10, first=20)
        await advance_until(clock, lambda: len(visible(first)) >= 6, step_ms=100)  # level 1 delivered, old and new
        delivered_before = {m.body.decode() for m in visible(first)}
        assert snapshot.read(path).loaded_until == saved.loaded_until  # too few new records for another save
        image = tmp_path / "image"
        shutil.copytree(tmp_path / "running", image)  # what a kill -9 leaves
    finally:
        await first.shutdown()
    caplog.set_level("INFO", logger="pocketmq.broker.timer.service")
    second = await started(image, clock)
    try:
        rebuilt = next(r.getMessage() for r in caplog.records if "event=timer_rebuilt" in r.getMessage())
        read, from_snapshot = (
            int(re.search(rf"{f}=(\d+)", rebuilt).group(1)) for f in ("records_read", "from_snapshot")
        )
        # the saved wheel (less what a progress saved after it says was done), then the records after it
        assert 0 < from_snapshot <= 20 and read == 30 - saved.loaded_until + len(delivered_before)
        assert second.timer.pending == 30 - len(delivered_before)
        await tick(second, clock, 5000)
        bodies = [m.body.decode() for m in visible(second)]
        assert sorted(bodies) == sorted(f"m{i}" for i in range(30))  # each once
    finally:
        await second.shutdown()
