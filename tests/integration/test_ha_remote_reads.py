"""RemoteMessageReader against real processes: one result per FOUND / NOT_FOUND cause / FAILED reason that
real brokers can produce on demand (TIMEOUT and BROKER_BUSY come from fake remoting peers the name server routes
to, BELOW_MIN_OFFSET from retention on a broker with tiny segments).

Unreachable brokers are real brokers that advertise a port nobody listens on (``--advertise``), so the name
server keeps routing to them while every connection is refused.
"""

from __future__ import annotations

import pytest
from tests.integration.remoting_calls import send as send_message

from pocketmq.cluster.breaker import BreakerBoard
from pocketmq.cluster.namesrv_client import NamesrvClient
from pocketmq.cluster.remote_reader import RemoteMessageReader
from pocketmq.common.read_result import FailureReason, NotFoundCause, ReadStatus
from pocketmq.common.topic import PERM_WRITE
from pocketmq.protocol.codes import RequestCode, ResponseCode
from pocketmq.protocol.command import RemotingCommand
from pocketmq.protocol.transport import RemotingClient
from pocketmq.testing.fakes import FakePeer, answer, silent
from pocketmq.testing.polling import eventually
from pocketmq.testing.processes import broker_process, namesrv_process

pytestmark = pytest.mark.slow
TOPIC = "rr-orders"


def broker(tmp_path, namesrv: str, dirname: str, group: str, broker_id: int, *extra: str):
    role = "slave" if broker_id else "async_master"
    return broker_process(
        tmp_path / dirname,
        group,
        namesrv=namesrv,
        extra_args=["--cluster", "rr", "--broker-id", str(broker_id), "--role", role, *extra],
    ).start()


async def send(remoting: RemotingClient, addr: str, topic: str, body: bytes) -> None:
    reply = await send_message(remoting, addr, topic, body)
    assert reply.code == ResponseCode.SUCCESS, reply


async def test_each_result_of_a_remote_read(tmp_path):
    namesrv = namesrv_process(tmp_path / "ns").start()
    procs = [namesrv, broker(tmp_path, namesrv.namesrv, "good", "good", 0)]
    remoting = RemotingClient()
    names = NamesrvClient([namesrv.namesrv], remoting)
    board = BreakerBoard()

    def reader(group: str) -> RemoteMessageReader:
        return RemoteMessageReader(group, names, remoting, breakers=board, timeout_ms=2000)

    try:
        good = procs[1].remoting
        for i in range(3):
            await send(remoting, good, TOPIC, b"m%d" % i)
        reply = await remoting.invoke(
            good,
            RemotingCommand.request(
                RequestCode.UPDATE_AND_CREATE_TOPIC,
                {"topic": "rr-write-only", "readQueueNums": 1, "writeQueueNums": 1, "perm": PERM_WRITE},
            ),
        )
        assert reply.code == ResponseCode.SUCCESS

        found = await reader("good").read(TOPIC, 0, 1)
        assert found.status is ReadStatus.FOUND and found.message.body == b"m1" and found.message.queue_offset == 1
        assert (await reader("good").read(TOPIC, 0, 9)).not_found_cause is NotFoundCause.BEYOND_MAX_OFFSET
        assert (await reader("good").read("rr-none", 0, 0)).not_found_cause is NotFoundCause.TOPIC_GONE
        no_permission = await reader("good").read("rr-write-only", 0, 0)
        assert (no_permission.failure, no_permission.need_retry) == (FailureReason.NO_PERMISSION, True)
        assert (await reader("nowhere").read(TOPIC, 0, 0)).failure is FailureReason.BROKER_ADDR_UNKNOWN

        procs.append(broker(tmp_path, namesrv.namesrv, "dead-master", "dead", 0, "--advertise", "127.0.0.1:1"))
        refused = await reader("dead").read(TOPIC, 0, 0)
        assert (refused.failure, refused.need_retry) == (FailureReason.CONNECTION_REFUSED, True)
        # a broker registers before it reports ready, so the route lists the slave from here on
        procs.append(broker(tmp_path, namesrv.namesrv, "dead-slave", "dead", 1, "--advertise", "127.0.0.1:2"))
        unreachable = await reader("dead").read(TOPIC, 0, 0)
        assert unreachable.failure is FailureReason.GROUP_UNREACHABLE, unreachable
        assert "127.0.0.1:1" in unreachable.description and "127.0.0.1:2" in unreachable.description
    finally:
        await remoting.close()
        for proc in reversed(procs):
            proc.kill()


async def test_timeout_busy_and_below_min_offset(tmp_path):
    """A group whose routed address is a server that never answers (TIMEOUT) or answers SYSTEM_BUSY
    (BROKER_BUSY), and a message retention removed (BELOW_MIN_OFFSET)."""
    silent_peer = await FakePeer(silent).start()  # takes every request, answers none
    busy_peer = await FakePeer(answer(ResponseCode.SYSTEM_BUSY, "too busy")).start()
    namesrv = namesrv_process(tmp_path / "ns").start()
    procs = [
        namesrv,
        broker(tmp_path, namesrv.namesrv, "silent", "silent", 0, "--advertise", silent_peer.addr),
        broker(tmp_path, namesrv.namesrv, "busy", "busy", 0, "--advertise", busy_peer.addr),
        broker(
            tmp_path,
            namesrv.namesrv,
            "old",
            "old",
            0,
            "--set",
            "commit_log_segment_bytes=65536",
            "--set",
            "file_reserved_hours=0.0002",
            "--set",
            "cleanup_interval_ms=200",
        ),
    ]
    remoting = RemotingClient()
    names = NamesrvClient([namesrv.namesrv], remoting)
    board = BreakerBoard()
    try:
        timed_out = await RemoteMessageReader("silent", names, remoting, breakers=board, timeout_ms=300).read(
            TOPIC, 0, 0
        )
        assert (timed_out.failure, timed_out.need_retry) == (FailureReason.TIMEOUT, True), timed_out
        refused = await RemoteMessageReader("busy", names, remoting, breakers=board).read(TOPIC, 0, 0)
        assert (refused.failure, refused.code, refused.need_retry) == (
            FailureReason.BROKER_BUSY,
            ResponseCode.SYSTEM_BUSY,
            True,
        ), refused

        old = procs[3].remoting
        for i in range(300):  # about 5 segments of 64 KiB: retention deletes all but the active one
            await send(remoting, old, "rr-old", b"%04d" % i + b"x" * 1020)
        reader = RemoteMessageReader("old", names, remoting, breakers=board)

        async def removed():
            result = await reader.read("rr-old", 0, 0)
            assert result.status is not ReadStatus.FAILED, result
            return result.status is ReadStatus.NOT_FOUND and result

        gone = await eventually(removed, 30, "retention removed offset 0")
        assert (gone.not_found_cause, gone.need_retry) == (NotFoundCause.BELOW_MIN_OFFSET, False)
        assert (await reader.read("rr-old", 0, 299)).message.body.startswith(b"0299")
    finally:
        await remoting.close()
        for proc in reversed(procs):
            proc.kill()
        await silent_peer.stop()
        await busy_peer.stop()
