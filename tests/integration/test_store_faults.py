"""The store against real processes: corruption is never served, a small or full filesystem is no crash.

- A clean stop, then the last 100 bytes of the commit log corrupted: ``pocketmq store verify`` names the
  record and exits 1; after the restart PULL and POP hand out the 24 valid messages and never the corrupt
  25th, the consumer moves past it, a new send gets the next queue offset, and /metrics counts it.
- On a 64 MiB tmpfs (the commit log segment is 128 MiB, sparse): start, send, clean stop, start again.
- On a full 64 MiB tmpfs: sends are refused with "disk full", every acknowledged message stays readable, a
  clean restart works on the full disk, and sends work again once there is room.

The tmpfs tests mount one (the suite runs as root); they skip, saying why, where mounting is impossible.
"""

from __future__ import annotations

import json
import subprocess
import time
import urllib.request
from pathlib import Path

import pytest

from pocketmq.client import Admin, ClientConfig, Message, Producer, PullConsumer, PullStatus, SendStatus, SimpleConsumer
from pocketmq.common.errors import PocketMQError
from pocketmq.testing.processes import broker_process, run_cli

pytestmark = pytest.mark.timeout(90)


@pytest.fixture
def small_fs(tmp_path):
    """A 64 MiB tmpfs, unmounted at the end."""
    mount_point = tmp_path / "tmpfs"
    mount_point.mkdir()
    try:
        mounted = subprocess.run(
            ["mount", "-t", "tmpfs", "-o", "size=64m", "tmpfs", str(mount_point)],
            capture_output=True,
            text=True,
            timeout=10,
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        pytest.skip(f"cannot mount a tmpfs here: {exc}")
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here (needs root): {mounted.stderr.strip()}")
    try:
        yield mount_point
    finally:
        subprocess.run(["umount", "-l", str(mount_point)], capture_output=True, timeout=10)


def _pocketmq(*args: str) -> subprocess.CompletedProcess:
    return run_cli(*args, timeout_s=60)


def _read_queue(config: ClientConfig, topic: str) -> tuple[list, int]:
    """(every message of the topic's one queue, the offset the reads ended at)."""
    with PullConsumer(f"{topic}-reader", config) as consumer:
        queue = consumer.fetch_queues(topic)[0]
        messages, offset, end = [], 0, consumer.max_offset(queue)
        while offset < end:
            result = consumer.pull(queue, offset, 8)
            assert result.status in (PullStatus.FOUND, PullStatus.NO_MATCHED_MSG), result
            assert result.next_begin_offset > offset, "the consumer must move on"
            messages += result.messages
            offset = result.next_begin_offset
        return messages, offset


def _create_topic(config: ClientConfig, topic: str) -> None:
    with Admin(config) as admin:
        admin.create_topic(topic, queues=1)


def test_a_corrupt_tail_after_a_clean_stop_is_reported_and_never_served(tmp_path):
    # no trace records: the sampled sends' would add records to the count checked below
    broker = broker_process(
        tmp_path / "b", "broker-crc", extra_args=["--metrics-port", "0", "--set", "trace_enabled=false"]
    ).start()
    try:
        config = ClientConfig(namesrv_addr=broker.namesrv)
        _create_topic(config, "crc")
        with Producer(config) as producer:
            for i in range(25):
                assert producer.send(Message.create("crc", f"{i:03d}".encode() * 70)).status is SendStatus.SEND_OK
    finally:
        assert broker.stop() == 0, broker.log_tail()
    data_dir = tmp_path / "b" / "data"
    log_end = json.loads((data_dir / "checkpoint").read_text())["phys_offset"]
    with open(data_dir / "commitlog" / "00000000000000000000", "r+b") as f:
        f.seek(log_end - 100)
        tail = f.read(100)
        f.seek(log_end - 100)
        f.write(bytes(b ^ 0xA5 for b in tail))

    verified = _pocketmq("store", "verify", "--data-dir", str(data_dir))
    assert verified.returncode == 1, verified.stdout + verified.stderr
    corrupt_lines = [line for line in verified.stdout.splitlines() if line.startswith("corrupt ")]
    assert len(corrupt_lines) == 1 and "records=crc/0@24" in corrupt_lines[0], verified.stdout
    assert "store verify CORRUPT" in verified.stdout and "24 record(s) ok" in verified.stdout

    broker.start()
    try:
        config = ClientConfig(namesrv_addr=broker.namesrv)
        messages, ended_at = _read_queue(config, "crc")
        assert [m.queue_offset for m in messages] == list(range(24)) and ended_at == 25
        assert [m.body for m in messages] == [f"{i:03d}".encode() * 70 for i in range(24)]
        with SimpleConsumer("crc-pop", {"crc": "*"}, config) as consumer:
            popped = []
            deadline = time.monotonic() + 20
            while len(popped) < 24 and time.monotonic() < deadline:
                popped += consumer.receive(32, 60_000, await_duration_ms=500)
            assert sorted(m.queue_offset for m in popped) == list(range(24))
            assert consumer.receive(32, 60_000, await_duration_ms=200) == []  # never the corrupt one
        with Producer(config) as producer:
            assert producer.send(Message.create("crc", b"after")).queue_offset == 25
        with urllib.request.urlopen(f"http://{broker.metrics}/metrics", timeout=10) as reply:
            metrics = reply.read().decode()
        assert 'pocketmq_store_corrupt_records_total{found_by="recovery"} 1' in metrics, metrics
    finally:
        assert broker.stop() == 0, broker.log_tail()
    assert "store.recovery corrupt_regions=1" in broker.log_tail(400)


def _broker_on(small_fs: Path, workdir: Path, name: str):
    """A broker whose data directory is on ``small_fs`` (its log stays in ``workdir``, off the small disk)."""
    return broker_process(workdir, name, extra_args=["--data-dir", str(small_fs / "data")])


def test_restart_on_a_64_mib_tmpfs_with_128_mib_segments(small_fs, tmp_path):
    broker = _broker_on(small_fs, tmp_path / "b", "broker-tiny").start()
    try:
        config = ClientConfig(namesrv_addr=broker.namesrv)
        _create_topic(config, "tiny")
        with Producer(config) as producer:
            assert producer.send(Message.create("tiny", b"one")).status is SendStatus.SEND_OK
    finally:
        assert broker.stop() == 0, broker.log_tail()
    broker.start()
    try:
        messages, _ = _read_queue(ClientConfig(namesrv_addr=broker.namesrv), "tiny")
        assert [m.body for m in messages] == [b"one"]
    finally:
        assert broker.stop() == 0, broker.log_tail()


def _fill(mount_point: Path) -> Path:
    """Write a file until the filesystem is full; returns it."""
    filler = mount_point / "filler"
    chunk = b"\xee" * (1 << 20)
    with open(filler, "wb", buffering=0) as f:
        try:
            while True:
                f.write(chunk)
        except OSError:
            pass
        try:
            while True:
                f.write(chunk[:512])
        except OSError:
            pass
    return filler


def test_a_full_disk_refuses_sends_and_keeps_reads_and_restarts_working(small_fs, tmp_path):
    broker = _broker_on(small_fs, tmp_path / "b", "broker-full").start()
    acked: list[bytes] = []
    try:
        config = ClientConfig(namesrv_addr=broker.namesrv)
        _create_topic(config, "full")
        with Producer(config) as producer:
            for i in range(5):
                producer.send(Message.create("full", f"before-{i}".encode()))
                acked.append(f"before-{i}".encode())
            filler = _fill(small_fs)
            refusal = None
            for i in range(400):  # the pages the log and queue already hold take a few more, then no more
                body = f"full-{i}".encode() * 60
                try:
                    producer.send(Message.create("full", body))
                except PocketMQError as exc:
                    refusal = exc
                    break
                acked.append(body)
            assert refusal is not None, "a full disk never refused a send"
            assert "disk full" in str(refusal), refusal
        messages, _ = _read_queue(config, "full")
        assert [m.body for m in messages] == acked
    finally:
        assert broker.stop() == 0, broker.log_tail()
    broker.start()  # on the full disk
    try:
        config = ClientConfig(namesrv_addr=broker.namesrv)
        assert [m.body for m in _read_queue(config, "full")[0]] == acked
        filler.unlink()
        with Producer(config) as producer:
            assert producer.send(Message.create("full", b"room again")).status is SendStatus.SEND_OK
        assert [m.body for m in _read_queue(config, "full")[0]] == acked + [b"room again"]
    finally:
        assert broker.stop() == 0, broker.log_tail()
