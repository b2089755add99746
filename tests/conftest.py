"""Shared fixtures. Real-process helpers live in pocketmq.testing.processes, test doubles in
pocketmq.testing.fakes, polling with a deadline in pocketmq.testing.polling."""

from __future__ import annotations

import os

import pytest
from hypothesis import HealthCheck, settings

from pocketmq.protocol.transport import RemotingClient
from pocketmq.testing.fakes import FakePeer, Script
from pocketmq.testing.java import MIN_JAVA_MAJOR, java_problem, java_required

# The shipped plugin (docs/testing.md): its fixtures start brokers for the integration tests that need a plain one.
# Installed, the package registers it by this name too, and pytest loads it once.
pytest_plugins = ["pocketmq.testing.pytest_plugin"]

# Property tests run on a 2-core CI machine: bounded examples, no wall-clock deadline per example.
settings.register_profile("pocketmq", max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "pocketmq"))


def pytest_report_header(config) -> str:
    """Said first: whether the Spark tests (tests/spark) can run here, and what happens when they cannot."""
    problem = java_problem()
    if problem is None:
        return f"java: {MIN_JAVA_MAJOR}+ found, the Spark tests run"
    then = "fail (CI is set)" if java_required() else "are skipped"
    return f"java: {problem}; the Spark tests {then}"


@pytest.fixture
def home(tmp_path, monkeypatch):
    """A temporary HOME: the official client writes its logs under ~/logs."""
    monkeypatch.setenv("HOME", str(tmp_path))
    return tmp_path


@pytest.fixture
async def remoting():
    """A remoting client, closed after the test."""
    client = RemotingClient()
    yield client
    await client.close()


@pytest.fixture
async def peers():
    """Starts fake remoting peers: ``await peers(default_script)``; each is stopped after the test."""
    started: list[FakePeer] = []

    async def start(default: Script | None = None) -> FakePeer:
        peer = await FakePeer(default).start()
        started.append(peer)
        return peer

    yield start
    for peer in started:
        await peer.stop()
