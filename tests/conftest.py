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


# `make test` runs the suite in TEST_WORKERS processes (pytest-xdist): most of its time is spent waiting on real
# brokers, not on this machine's two cores. A test module goes to one worker whole, so its module-scoped brokers
# start once; the Spark tests go together, since each worker would start a Spark session (a JVM) of its own.
# They and the chaos runs, the longest units, are handed out first so that no long one starts last.
SPARK_SCOPE = "tests/spark"
FIRST_SCOPES = (SPARK_SCOPE, "tests/chaos/")


def _work_unit(nodeid: str) -> str:
    path = nodeid.split("::", 1)[0]
    return SPARK_SCOPE if path.startswith(SPARK_SCOPE + "/") else path


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config, log):
    from xdist.scheduler import LoadScopeScheduling

    class ByModule(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return _work_unit(nodeid)

        def remove_node(self, node):
            # xdist hands a crashed worker's unit to another worker whole, the test that ended the worker too
            # (never reported complete), so a test that ends its worker (a Spark test past its timeout, see
            # tests/spark/conftest.py) would run again until the restarts ran out. It is reported failed once.
            for work_unit in self.assigned_work.get(node, {}).values():
                crashed = next((nodeid for nodeid, completed in work_unit.items() if not completed), None)
                if crashed is not None:
                    work_unit[crashed] = True
                    break
            else:
                return super().remove_node(node)
            super().remove_node(node)
            return crashed

    config.option.loadscopereorder = False  # keep the order below, not the biggest count of tests first
    return ByModule(config, log)


def pytest_collection_modifyitems(config, items) -> None:
    """Under xdist, the long units first (every worker sorts alike, as xdist requires)."""
    if os.environ.get("PYTEST_XDIST_WORKER"):
        items.sort(key=lambda item: not item.nodeid.startswith(FIRST_SCOPES))


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
