"""Client sessions of a real ``pocketmq serve``: a silent client is expired after the heartbeat timeout (here
1.5 s, set by config), a client that says goodbye is dropped at once; either way its Telemetry stream ends (after a
goodbye, when the client ends it, as the clients do)."""

from __future__ import annotations

import queue
import threading
import time

import pytest
from grpc_support import CLIENT_ID, producer_settings, run_official_client, stub
from rocketmq.grpc_protocol import service_pb2 as spb

from pocketmq.protocol.codes import V2StatusCode
from pocketmq.testing.processes import broker_process

pytestmark = pytest.mark.slow
HEARTBEAT_TIMEOUT_MS = 1500


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    proc = broker_process(
        tmp_path_factory.mktemp("grpc-sessions"),
        extra_args=[
            "--set",
            f"client_channel_expire_ms={HEARTBEAT_TIMEOUT_MS}",
            "--set",
            "client_scan_interval_ms=100",
        ],
    ).start()
    yield proc
    assert proc.stop() == 0, proc.log_tail()


class TelemetryStream:
    """A Telemetry stream of a raw stub; ``ended_after_s`` is how long the server kept it open."""

    def __init__(self, address: str, client_id=CLIENT_ID):
        self.channel, v2 = stub(address)
        self._outgoing: queue.Queue = queue.Queue()
        self._outgoing.put(producer_settings("t"))
        self.started = time.monotonic()
        self.replies = v2.Telemetry(iter(self._outgoing.get, None), metadata=client_id)
        self.first = next(self.replies)
        self.ended = threading.Event()
        threading.Thread(target=self._drain, daemon=True).start()

    def _drain(self) -> None:
        for _ in self.replies:
            pass
        self.ended_after_s = time.monotonic() - self.started
        self.ended.set()

    def done_writing(self) -> None:
        self._outgoing.put(None)

    def close(self) -> None:
        self.done_writing()
        self.replies.cancel()
        self.channel.close()


def test_a_silent_client_is_expired_after_the_heartbeat_timeout(broker):
    stream = TelemetryStream(broker.grpc)
    try:
        assert stream.first.status.code == V2StatusCode.OK
        assert stream.ended.wait(10), "the stream of an expired client must end"
        assert stream.ended_after_s >= HEARTBEAT_TIMEOUT_MS / 1000 * 0.9
    finally:
        stream.close()


def test_heartbeats_keep_a_client_alive_and_termination_drops_it_at_once(broker):
    stream = TelemetryStream(broker.grpc)
    channel, v2 = stub(broker.grpc)
    try:
        deadline = time.monotonic() + 2 * HEARTBEAT_TIMEOUT_MS / 1000
        while time.monotonic() < deadline:  # beat for twice the timeout
            assert v2.Heartbeat(spb.HeartbeatRequest(), metadata=CLIENT_ID).status.code == V2StatusCode.OK
            assert not stream.ended.wait(0.3)
        goodbye = time.monotonic()
        assert (
            v2.NotifyClientTermination(spb.NotifyClientTerminationRequest(), metadata=CLIENT_ID).status.code
            == V2StatusCode.OK
        )
        stream.done_writing()  # as the clients do right after: the server leaves the stream's end to them
        assert stream.ended.wait(5)
        assert stream.started + stream.ended_after_s - goodbye < 1.0  # at once, not at the next expiry
    finally:
        stream.close()
        channel.close()


def test_the_official_client_starts_and_shuts_down_cleanly(broker, tmp_path):
    outcomes = run_official_client(
        {"endpoint": broker.grpc, "topic": "grpc_session", "count": 3, "prefix": "s"}, tmp_path / "home"
    )
    assert [o["ok"] for o in outcomes] == [True] * 3
    assert "event=grpc_client_terminated" in broker.log_tail(200)
