"""SIGUSR1 to a running ``pocketmq serve`` writes every thread's stack into its log and changes nothing else
(cli/running.py): what the test harness asks of a process that does not stop, before it kills it."""

from __future__ import annotations

import os
import signal

import pytest

from pocketmq.testing.polling import wait_until
from pocketmq.testing.processes import broker_process

pytestmark = pytest.mark.timeout(60)


def test_sigusr1_writes_the_threads_stacks_to_the_log_and_the_broker_goes_on(tmp_path):
    broker = broker_process(tmp_path, "broker-stacks").start()
    try:
        os.kill(broker.pid, signal.SIGUSR1)
        log = wait_until(lambda: "most recent call first" in broker.log_path.read_text() and broker.log_path, 20)
        assert "Thread 0x" in log.read_text()
    finally:
        assert broker.stop() == 0, broker.log_tail()  # still serving, and it stops cleanly
