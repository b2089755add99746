"""The shipped pytest plugin and ``embedded_broker()`` (docs/testing.md): the documented example runs as written,
the fixtures' scopes hold, and a broker does not outlive the test process that started it."""

from __future__ import annotations

import json
import re
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from pocketmq.testing import embedded_broker
from pocketmq.testing.polling import wait_until
from pocketmq.testing.processes import broker_process

pytest_plugins = ["pytester"]
pytestmark = pytest.mark.timeout(180)

TESTING_MD = Path(__file__).resolve().parents[2] / "docs" / "testing.md"
PLUGIN = ("-p", "pocketmq.testing.pytest_plugin", "-p", "no:cacheprovider")


@pytest.fixture
def pytester(pytester):
    """The nested runs set what pytest-asyncio otherwise warns about in every run."""
    pytester.makeini("[pytest]\nasyncio_default_fixture_loop_scope = function\n")
    return pytester


def python_blocks() -> list[str]:
    return re.findall(r"```python\n(.*?)```", TESTING_MD.read_text(), flags=re.S)


def test_the_documented_examples_pass(pytester):
    pytest_module, unittest_module = python_blocks()
    pytester.makepyfile(test_orders=pytest_module, test_orders_unittest=unittest_module)

    result = pytester.runpytest(*PLUGIN)

    result.assert_outcomes(passed=4)


def test_the_session_broker_is_shared_and_a_per_test_broker_is_not(pytester):
    pytester.makepyfile(
        """
        import os

        seen = {}

        def test_first(pocketmq_broker, pocketmq_broker_per_test, pocketmq_topic):
            seen["session"] = pocketmq_broker.namesrv_addr
            seen["own"] = (pocketmq_broker_per_test.namesrv_addr, pocketmq_broker_per_test.process.pid)
            seen["topic"] = pocketmq_topic
            assert pocketmq_broker_per_test.data_dir != pocketmq_broker.data_dir

        def test_second(pocketmq_broker, pocketmq_broker_per_test, pocketmq_topic):
            assert pocketmq_broker.namesrv_addr == seen["session"]
            first_own_addr, first_own_pid = seen["own"]
            assert pocketmq_broker_per_test.namesrv_addr != first_own_addr
            assert pocketmq_topic != seen["topic"]
            try:
                os.kill(first_own_pid, 0)
            except ProcessLookupError:
                return
            raise AssertionError("the first test's broker still runs")
        """
    )

    pytester.runpytest(*PLUGIN).assert_outcomes(passed=2)


def test_the_context_manager_removes_its_directory_and_stops_the_broker():
    with embedded_broker() as broker:
        topic = broker.create_topic()
        results = broker.produce(topic, ["one", b"two"])
        messages = broker.read(topic, 2)
        assert sorted(m.body for m in messages) == [b"one", b"two"]
        assert {m.msg_id for m in messages} == {r.msg_id for r in results}
        workdir, proc = broker.process.workdir, broker.process.proc
    assert not workdir.exists()
    assert proc is not None and proc.returncode == 0


PARENT_SCRIPT = """
import json, sys
from pocketmq.testing import embedded_broker

with embedded_broker(sys.argv[1]) as broker:
    print(json.dumps({"pid": broker.process.pid, "namesrv": broker.namesrv_addr}), flush=True)
    sys.stdin.read()  # until the test kills this process
"""


def is_gone(pid: int) -> bool:
    """Whether process ``pid`` has ended (a zombie waiting for its new parent to reap it has)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] in ("Z", "X")
    except FileNotFoundError:
        return True


def test_a_broker_stops_when_the_test_process_is_killed(tmp_path):
    parent = subprocess.Popen(
        [sys.executable, "-c", PARENT_SCRIPT, str(tmp_path)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    try:
        started = json.loads(parent.stdout.readline())
        assert not is_gone(started["pid"])
        parent.send_signal(signal.SIGKILL)
        parent.wait(timeout=10)

        wait_until(lambda: is_gone(started["pid"]), 20, "the orphaned broker has stopped")
    finally:
        parent.kill()
        parent.wait(timeout=10)
    # what the dead run left (its data directory, its lock file) does not keep the next broker from starting there
    again = broker_process(tmp_path).start()
    assert again.stop() == 0, again.log_tail()
