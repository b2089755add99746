"""The data directory lock with real processes (docs/store.md "The data directory lock"): a second ``pocketmq
serve`` on a directory a running broker owns exits at once with one error line naming the lock file and the
owner's PID, and changes nothing; once the owner dies (``kill -9``: no clean release) a new broker takes the
directory over and serves every message the first one acknowledged."""

from __future__ import annotations

import subprocess
import sys

import pytest

from pocketmq.client import Admin, ClientConfig, Message, Producer, PullConsumer, PullStatus
from pocketmq.testing.processes import broker_process

pytestmark = pytest.mark.timeout(60)
TOPIC = "locked_orders"


def send_bodies(namesrv: str, bodies: list[str]) -> None:
    with Producer(ClientConfig(namesrv_addr=namesrv)) as producer:
        for body in bodies:
            producer.send(Message(TOPIC, body.encode()))  # raises unless the broker acknowledged it


def stored_bodies(namesrv: str) -> list[str]:
    with PullConsumer("lock-checker", ClientConfig(namesrv_addr=namesrv)) as consumer:
        bodies = []
        for queue in consumer.fetch_queues(TOPIC):
            result = consumer.pull(queue, 0, 64)
            if result.status is PullStatus.FOUND:
                bodies += [m.body.decode() for m in result.messages]
        return sorted(bodies)


def test_a_second_broker_on_an_owned_data_dir_is_refused_and_takes_over_once_the_owner_dies(tmp_path):
    owner = broker_process(tmp_path, "broker-lock").start()
    try:
        with Admin(ClientConfig(namesrv_addr=owner.namesrv)) as admin:
            admin.create_topic(TOPIC, queues=2)
        send_bodies(owner.namesrv, ["m0", "m1", "m2"])

        intruder_ready = tmp_path / "intruder.ready.json"
        intruder = subprocess.run(
            [sys.executable, "-m", "pocketmq.cli.main", *owner.args, "--ready-file", str(intruder_ready)],
            cwd=owner.workdir,
            env=owner.env,
            capture_output=True,
            text=True,
            timeout=30,
        )
        assert intruder.returncode != 0, intruder
        assert "Traceback" not in intruder.stderr, intruder.stderr
        error = intruder.stderr.strip().splitlines()[-1]
        lock_file = tmp_path / "data" / "lock"
        assert error.startswith("pocketmq serve: error:"), intruder.stderr
        assert f"in use by process {owner.proc.pid}" in error and str(lock_file) in error, error
        assert not intruder_ready.exists()
        assert lock_file.read_text().strip() == str(owner.proc.pid)

        send_bodies(owner.namesrv, ["m3"])  # the owner still serves, undisturbed
        owner.kill()
        owner.restart()  # the kernel dropped the dead owner's lock: no stale lock to clean by hand
        assert lock_file.read_text().strip() == str(owner.proc.pid)
        assert stored_bodies(owner.namesrv) == ["m0", "m1", "m2", "m3"]
    finally:
        owner.kill()
