"""``BusyPollSelector`` over a real socket pair: ready events come back at once, a poll of 0 never waits, the
selector polls only while its events come close together (not after a quiet spell, again after a run of events,
not after waits that found nothing), it polls for its poll time and then sleeps until the timeout, and data that
arrives while it polls or sleeps is returned. And a busy-polling loop runs asyncio code like any other."""

from __future__ import annotations

import asyncio
import selectors
import socket
import threading
import time

import pytest

from pocketmq.runtime.busy_poll import BusyPollSelector, loop_factory

pytestmark = pytest.mark.timeout(10)


@pytest.fixture
def pair():
    a, b = socket.socketpair()
    yield a, b
    a.close()
    b.close()


def test_ready_events_come_back_at_once_and_a_zero_timeout_never_waits(pair):
    a, b = pair
    selector = BusyPollSelector(poll_s=1.0)
    selector.register(b, selectors.EVENT_READ)
    a.send(b"x")
    assert [key.fileobj for key, _ in selector.select(5)] == [b]
    b.recv(1)
    started = time.monotonic()
    assert selector.select(0) == []
    assert time.monotonic() - started < 0.5  # within its poll time, but a timeout of 0 is just a look


def _events_in_a_row(selector: BusyPollSelector, a: socket.socket, b: socket.socket, count: int) -> None:
    for _ in range(count):
        a.send(b"x")
        assert selector.select(1)
        b.recv(1)


def test_it_polls_only_while_events_come_close_together(pair):
    a, b = pair
    selector = BusyPollSelector(poll_s=0.05)
    selector.register(b, selectors.EVENT_READ)
    assert not selector.polling  # a fresh loop is as after a quiet spell
    _events_in_a_row(selector, a, b, 10)  # each found waiting: idle times of ~0
    assert selector.polling
    for _ in range(10):  # waits that find nothing for longer than the poll time
        assert selector.select(0.06) == []
    assert not selector.polling
    started = time.monotonic()
    assert selector.select(0) == []  # a look between callbacks is not idle time and never waits
    assert time.monotonic() - started < 0.05
    assert not selector.polling


def test_waits_that_alternate_between_short_and_long_never_start_polling(pair):
    # one send at a time under SYNC_FLUSH: the next request comes soon, the fsync's completion does not
    a, b = pair
    selector = BusyPollSelector(poll_s=0.05)
    selector.register(b, selectors.EVENT_READ)
    for _ in range(8):
        _events_in_a_row(selector, a, b, 1)
        assert selector.select(0.06) == []
        assert not selector.polling


def test_while_polling_it_polls_then_sleeps_until_the_timeout(pair):
    a, b = pair
    selector = BusyPollSelector(poll_s=0.05)
    selector.register(b, selectors.EVENT_READ)
    _events_in_a_row(selector, a, b, 10)
    assert selector.polling
    started_cpu, started = time.process_time(), time.monotonic()
    assert selector.select(0.3) == []
    elapsed = time.monotonic() - started
    assert 0.3 <= elapsed < 1.0
    assert time.process_time() - started_cpu < 0.2  # polled ~0.05 s, slept the rest


@pytest.mark.parametrize("while_polling", [True, False], ids=["while-polling", "while-sleeping"])
def test_data_arriving_while_it_polls_or_sleeps_is_returned(pair, while_polling):
    a, b = pair
    selector = BusyPollSelector(poll_s=5.0 if while_polling else 0.001)
    selector.register(b, selectors.EVENT_READ)
    _events_in_a_row(selector, a, b, 10)
    assert selector.polling
    timer = threading.Timer(0.05, a.send, args=(b"later",))
    timer.start()
    try:
        assert [key.fileobj for key, _ in selector.select(10)] == [b]
    finally:
        timer.cancel()


def test_a_busy_polling_loop_runs_asyncio_code():
    async def echo_round_trip() -> bytes:
        server = await asyncio.start_server(lambda r, w: _echo(r, w), "127.0.0.1", 0)
        reader, writer = await asyncio.open_connection("127.0.0.1", server.sockets[0].getsockname()[1])
        writer.write(b"ping\n")
        line = await reader.readline()
        writer.close()
        server.close()
        await asyncio.sleep(0.01)  # timers still fire on time
        return line

    with asyncio.Runner(loop_factory=loop_factory(200)) as runner:
        assert runner.run(echo_round_trip()) == b"ping\n"
    assert loop_factory(0) is None


async def _echo(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    writer.write(await reader.readline())
    await writer.drain()
    writer.close()


def test_serve_takes_busy_poll_us_and_refuses_a_negative_one():
    from pocketmq.cli.main import build_parser
    from pocketmq.cli.serve_cmd import broker_config_from_args
    from pocketmq.common.errors import ConfigError

    parse = build_parser().parse_args
    assert broker_config_from_args(parse(["serve"])).busy_poll_us == 200
    assert broker_config_from_args(parse(["serve", "--busy-poll-us", "0"])).busy_poll_us == 0
    assert broker_config_from_args(parse(["serve", "--busy-poll-us", "500"])).busy_poll_us == 500
    with pytest.raises(ConfigError, match="busy_poll_us"):
        broker_config_from_args(parse(["serve", "--busy-poll-us", "-1"]))
