"""The settings of POP revive's remote reads change on a running broker (real processes, the cluster of
test_ha_revive_remote.py: broker B revives CKs whose messages are on broker A, which is down).

B starts with a backoff table that would keep its CKs for a minute; ``pocketmq config set`` of a maximum total
time ends them within seconds (dead letters, docs/ha.md), and the remote read timeout and retry delays are
accepted at run time too (they used to take a restart)."""

from __future__ import annotations

import re

import pytest
from tests.integration.test_ha_revive_remote import Cluster, count

from pocketmq.client import AsyncAdmin
from pocketmq.testing.polling import wait_until

pytestmark = [pytest.mark.slow, pytest.mark.timeout(120)]
STEPS = 30  # 2 s each: a minute of rewrites without a maximum total time
RUN_TIME_KEYS = ("remote_read_timeout_ms", "remote_read_retry_unreachable_ms", "pop_ck_rewrite_max_total_ms")


async def test_a_maximum_total_time_set_at_run_time_ends_the_cks_of_an_unreachable_broker(tmp_path):
    cluster = Cluster(tmp_path)
    try:
        await cluster.send_and_seed()
        cluster.a.kill()
        cluster.start_b("pop_ck_rewrite_backoff_ms=" + ",".join(["2000"] * STEPS))
        wait_until(lambda: "event=ck_rewritten" in cluster.b_log(), timeout_s=20, message="B rewrites its CKs")
        async with AsyncAdmin(cluster.config) as admin:  # were static: a restart took them
            await admin.update_broker_config(
                cluster.b.remoting, {"remote_read_timeout_ms": "700", "remote_read_retry_unreachable_ms": "1500"}
            )
            changed = cluster.cli("config", "set", "pop_ck_rewrite_max_total_ms", "4000", "--broker", "rv-b")
            assert changed.returncode == 0, changed.stderr
            settings = await admin.broker_config(cluster.b.remoting)
        assert [settings[key] for key in RUN_TIME_KEYS] == ["700", "1500", "4000"]
        wait_until(
            lambda: count("event=dead_lettered_after_failed_reads", cluster.b_log()) >= len(cluster.sent),
            timeout_s=30,
            message="every CK ended at the maximum total time, long before its table",
        )
        rewrites = [int(n) for n in re.findall(r"event=ck_rewritten .* rewrites=(\d+)", cluster.b_log())]
        assert rewrites and max(rewrites) < STEPS // 2, rewrites  # no CK went far into its table
    finally:
        await cluster.close()
