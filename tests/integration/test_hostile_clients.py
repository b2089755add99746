"""Hostile clients against a real broker with small limits (docs/limits.md): each abuse is answered fast, closed,
or slowed to the abuser's own pace, the broker's memory stays bounded, the limit is counted and logged with the
client's address, and a normal client's send still completes promptly."""

from __future__ import annotations

import asyncio
import base64
import json
import os
import re
import resource
import struct
import time
import urllib.request

import pytest
from remoting_calls import call, client, serve_for_module  # noqa: F401 (client is a fixture)

from pocketmq.protocol.codes import RequestCode as R
from pocketmq.protocol.codes import ResponseCode as C
from pocketmq.protocol.command import FrameDecoder, RemotingCommand
from pocketmq.protocol.transport import RemotingClient
from pocketmq.testing.polling import wait_until
from pocketmq.testing.processes import broker_process

pytestmark = pytest.mark.timeout(60)

MIB = 1024 * 1024
REPLY_BUFFER_BYTES = 1 * MIB
FRAME_TIMEOUT_S = 0.5
IDLE_TIMEOUT_S = 3.0
MAX_CONNECTIONS = 40
PER_HOST = 8
PULLS = 100
LIMIT_ARGS = [
    "--metrics-port",
    "0",
    "--set",
    f"remoting_max_reply_buffer_bytes={REPLY_BUFFER_BYTES}",
    "--set",
    f"remoting_frame_receive_timeout_ms={int(FRAME_TIMEOUT_S * 1000)}",
    "--set",
    f"remoting_idle_timeout_ms={int(IDLE_TIMEOUT_S * 1000)}",
    "--set",
    f"remoting_max_frame_bytes={8 * MIB}",
    "--set",
    f"remoting_max_connections={MAX_CONNECTIONS}",
    "--set",
    f"remoting_max_connections_per_host={PER_HOST}",
]


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    yield from serve_for_module(tmp_path_factory, "broker-hostile", LIMIT_ARGS)


def rss_bytes(pid: int) -> int:
    for line in open(f"/proc/{pid}/status"):
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    raise AssertionError("no VmRSS")


def limit_count(broker, limit: str) -> float:
    with urllib.request.urlopen(f"http://{broker.metrics}/metrics", timeout=5) as response:
        text = response.read().decode()
    match = re.search(rf'^pocketmq_remoting_limit_exceeded_total{{limit="{limit}"}} (\S+)$', text, re.M)
    return float(match.group(1)) if match else 0.0


def logged(broker, limit: str) -> bool:
    return re.search(rf"event=limit_exceeded limit={limit} remote=127\.0\.0\.\d+:\d+", broker.log_tail(400)) is not None


async def send_promptly(addr: str, within_s: float = 2.0) -> None:
    """A normal client on a fresh connection sends one message within ``within_s``."""
    remoting = RemotingClient()
    try:
        started = time.monotonic()
        reply = await call(
            remoting,
            addr,
            R.SEND_MESSAGE_V2,
            {"a": "pg", "b": "hostile-canary", "e": 0, "i": ""},
            b"still here",
            timeout_s=within_s,
        )
        assert reply.code == C.SUCCESS, reply.remark
        assert time.monotonic() - started < within_s
    finally:
        await remoting.close()


async def connect(addr: str, local_host: str | None = None):
    host, port = addr.rsplit(":", 1)
    return await asyncio.open_connection(host, int(port), local_addr=(local_host, 0) if local_host else None)


async def closed_within(reader: asyncio.StreamReader, timeout_s: float) -> float:
    """Seconds until the broker closed the connection (reading everything it sent), failing after ``timeout_s``."""
    started = time.monotonic()
    async with asyncio.timeout(timeout_s):
        try:
            while await reader.read(1 << 16):
                pass
        except ConnectionResetError:
            pass
    return time.monotonic() - started


async def served(addr: str, local_host: str | None = None, timeout_s: float = 2.0):
    """A raw connection (from ``local_host``) that got an answer; None when the broker closed it instead."""
    reader, writer = await connect(addr, local_host)
    writer.write(RemotingCommand.request(R.GET_MAX_OFFSET, {"topic": "hostile-canary", "queueId": 0}).encode())
    try:
        async with asyncio.timeout(timeout_s):
            if await reader.read(1 << 16):
                return reader, writer
    except ConnectionResetError:
        pass
    writer.close()
    return None


async def test_a_huge_batch_ack_is_answered_at_once(broker, client):
    body = json.dumps(
        {
            "brokerName": "broker-hostile",
            "acks": [
                {
                    "c": "g",
                    "t": "hostile-canary",
                    "r": "0",
                    "so": 0,
                    "q": 0,
                    "rq": 0,
                    "pt": 1,
                    "it": 60_000,
                    "b": base64.b64encode(b"\xff" * 128 * 1024).decode(),
                }
            ],
        }
    ).encode()
    started = time.monotonic()
    reply = await call(client, broker.remoting, R.BATCH_ACK_MESSAGE, body=body)
    assert time.monotonic() - started < 2.0  # was 18.8 s with the loop stalled
    assert reply.code == C.INVALID_PARAMETER
    assert "more than a pop hands out (32)" in reply.remark
    assert limit_count(broker, "batch_ack_bits") >= 1
    assert logged(broker, "batch_ack_bits")


async def test_a_client_that_never_reads_its_replies_is_not_served_into_memory(broker, client):
    record = b"x" * (64 * 1024)
    for _ in range(32):  # one pull of them: ~2 MiB
        sent = await call(
            client, broker.remoting, R.SEND_MESSAGE_V2, {"a": "pg", "b": "hostile-pull", "e": 0, "i": ""}, record
        )
        assert sent.code == C.SUCCESS, sent.remark
    pid = broker.proc.pid
    rss_before = rss_bytes(pid)
    pull = {
        "consumerGroup": "g-hostile",
        "topic": "hostile-pull",
        "queueId": 0,
        "queueOffset": 0,
        "maxMsgNums": 32,
        "sysFlag": 0,
        "commitOffset": 0,
        "suspendTimeoutMillis": 0,
        "subscription": "*",
        "subVersion": 0,
    }
    reader, writer = await connect(broker.remoting)
    try:
        # ~2 MiB each: ~200 MiB of replies if the broker served them all into its memory
        writer.write(b"".join(RemotingCommand.request(R.PULL_MESSAGE, pull).encode() for _ in range(PULLS)))
        await writer.drain()
        await asyncio.to_thread(
            wait_until,
            lambda: limit_count(broker, "reply_buffer_bytes") >= 1,
            10.0,
            "the broker stops reading the abuser",
            interval_s=0.05,
        )
        await send_promptly(broker.remoting)
        grown = rss_bytes(pid) - rss_before
        assert grown < 60 * MIB, f"broker RSS grew {grown / MIB:.0f} MiB"
        assert logged(broker, "reply_buffer_bytes")
        # the abuser starts reading: every reply arrives, in order
        decoder, replies = FrameDecoder(), []
        async with asyncio.timeout(30):
            while len(replies) < PULLS:
                chunk = await reader.read(1 << 20)
                assert chunk, "the broker closed a connection that reads again"
                replies += decoder.feed(chunk)
        assert all(r.code == C.SUCCESS for r in replies)
    finally:
        writer.close()
    await send_promptly(broker.remoting)


async def test_a_frame_that_arrives_too_slowly_is_closed_at_its_deadline(broker):
    reader, writer = await connect(broker.remoting)
    try:
        started = time.monotonic()
        writer.write(struct.pack(">ii", 1_000_000, 20))  # a frame of 1 MB announced, then a byte now and then
        for _ in range(50):
            await asyncio.sleep(0.1)
            if writer.is_closing() or reader.at_eof():
                break
            try:
                writer.write(b"x")
                await writer.drain()
            except ConnectionError:
                break
        elapsed = await closed_within(reader, 5.0) + (time.monotonic() - started)
    finally:
        writer.close()
    assert FRAME_TIMEOUT_S <= elapsed < FRAME_TIMEOUT_S + 3.0
    assert logged(broker, "frame_receive_timeout")
    await send_promptly(broker.remoting)


@pytest.mark.parametrize(
    "frame,limit",
    [
        (struct.pack(">i", 8 * MIB + 1), "frame_bytes"),
        (struct.pack(">ii", 4 * MIB, 1 * MIB), "header_bytes"),
        (
            struct.pack(">ii", 4 + 200_016, 200_016) + b'{"code":10,"x":' + b"[" * 100_000 + b"]" * 100_000 + b"}",
            "json_depth",
        ),
        (struct.pack(">ii", 4 + 28, 28) + b'{"code":1e400,"opaque":1}   ', "malformed_frame"),
    ],
    ids=["frame-bytes", "header-bytes", "json-depth", "code-1e400"],
)
async def test_framing_faults_close_the_connection_at_once_without_a_traceback(broker, frame, limit):
    reader, writer = await connect(broker.remoting)
    try:
        writer.write(frame)
        assert await closed_within(reader, 2.0) < 2.0
    finally:
        writer.close()
    await send_promptly(broker.remoting)
    log = broker.log_tail(400)
    assert "Fatal error" not in log and "Traceback" not in log
    assert logged(broker, limit)


async def test_an_idle_connection_is_closed_but_a_long_poll_is_not_idle(broker, client):
    reader, writer = await connect(broker.remoting)
    try:
        assert IDLE_TIMEOUT_S - 0.2 <= await closed_within(reader, IDLE_TIMEOUT_S + 3.0) < IDLE_TIMEOUT_S + 3.0
    finally:
        writer.close()
    assert logged(broker, "idle_timeout")
    # a pull held for longer than the idle timeout is answered on the same connection
    empty_queue = {
        "consumerGroup": "g-idle",
        "topic": "hostile-pull",
        "queueId": 5,
        "queueOffset": 0,
        "maxMsgNums": 1,
        "sysFlag": 2,
        "commitOffset": 0,
        "suspendTimeoutMillis": int((IDLE_TIMEOUT_S + 1) * 1000),
        "subscription": "*",
        "subVersion": 0,
    }
    started = time.monotonic()
    held = await call(client, broker.remoting, R.PULL_MESSAGE, empty_queue, timeout_s=IDLE_TIMEOUT_S + 5)
    assert held.code in (C.PULL_NOT_FOUND, C.PULL_RETRY_IMMEDIATELY), held.remark
    assert time.monotonic() - started >= IDLE_TIMEOUT_S


async def test_connections_are_capped_per_host_and_in_all(broker):
    held = []
    try:
        from_one_host = await asyncio.gather(*(served(broker.remoting, "127.0.0.2") for _ in range(PER_HOST + 2)))
        held += [c for c in from_one_host if c is not None]
        assert len(held) == PER_HOST
        assert logged(broker, "max_connections_per_host")
        # other hosts fill the broker up to its total
        hosts = [f"127.0.0.{i}" for i in range(3, 3 + MAX_CONNECTIONS // PER_HOST + 1)]
        others = await asyncio.gather(*(served(broker.remoting, h) for h in hosts for _ in range(PER_HOST)))
        held += [c for c in others if c is not None]
        assert len(held) <= MAX_CONNECTIONS and None in others
        assert logged(broker, "max_connections")
        assert await served(broker.remoting, "127.0.0.100") is None
        for _, writer in held[:4]:
            writer.close()
        del held[:4]
        deadline = time.monotonic() + 5.0
        while (fresh := await served(broker.remoting, "127.0.0.100")) is None:  # the broker saw the closes
            assert time.monotonic() < deadline, "no room after closing connections"
            await asyncio.sleep(0.05)
        fresh[1].close()
    finally:
        for _, writer in held:
            writer.close()


async def test_out_of_file_descriptors_the_broker_accepts_again_once_some_are_free(tmp_path):
    proc = broker_process(tmp_path, "broker-emfile", extra_args=["--metrics-port", "0"]).start()
    pid = proc.proc.pid
    soft, hard = resource.prlimit(pid, resource.RLIMIT_NOFILE)
    abusers = []
    try:
        open_fds = len(os.listdir(f"/proc/{pid}/fd"))
        resource.prlimit(pid, resource.RLIMIT_NOFILE, (open_fds + 4, hard))
        for _ in range(8):  # four get in, the others wait in the listen backlog
            abusers.append(await connect(proc.remoting))
        locked_out = await connect(proc.remoting)
        locked_out[1].write(RemotingCommand.request(R.GET_MAX_OFFSET, {"topic": "t", "queueId": 0}).encode())
        with pytest.raises(TimeoutError):
            async with asyncio.timeout(1.5):
                await locked_out[0].read(1 << 16)
        wait_until(
            lambda: re.search(
                r"event=limit_exceeded limit=open_files remote=127\.0\.0\.1:\d+ "
                r"reason=OSError\(24",
                proc.log_tail(200),
            ),
            5.0,
            message="EMFILE logged",
        )
        for _, writer in abusers:
            writer.close()
        async with asyncio.timeout(10):
            assert await locked_out[0].read(1 << 16)  # accepted and answered once descriptors are free
        locked_out[1].close()
        fresh = await served(proc.remoting)  # a new client gets in too
        assert fresh is not None
        fresh[1].close()
        # asyncio's own report is a traceback a second; the broker's is the rate-limited line above (other parts
        # of the broker that needed a descriptor meanwhile, such as the store's flush, may log their failures)
        assert "socket.accept() out of system resource" not in proc.log_tail(400)
    finally:
        resource.prlimit(pid, resource.RLIMIT_NOFILE, (soft, hard))
        for _, writer in abusers:
            writer.close()
        assert proc.stop() == 0, proc.log_tail()
