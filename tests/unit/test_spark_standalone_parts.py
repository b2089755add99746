"""The pure parts of the test standalone cluster (pocketmq.testing.spark_standalone), without Java."""

from __future__ import annotations

import subprocess
import sys

from pocketmq.testing.polling import wait_until
from pocketmq.testing.spark_standalone import executor_jvm_pid, is_running, scala_version


def test_the_scala_version_is_read_from_the_launcher_jar(tmp_path):
    (tmp_path / "jars").mkdir()
    (tmp_path / "jars" / "spark-launcher_2.13-4.3.0.jar").touch()
    assert scala_version(tmp_path) == "2.13"


def test_a_process_outside_an_executor_has_no_executor():
    assert executor_jvm_pid() is None


def test_an_exited_process_is_not_running_even_before_it_is_reaped():
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    assert is_running(child.pid) or child.poll() is not None
    wait_until(lambda: not is_running(child.pid), timeout_s=30, message="the child exited (a zombie until reaped)")
    child.wait(timeout=10)
    assert not is_running(child.pid) and not is_running(None)
