"""The pure parts of ``pocketmq cluster`` (lag and breaker columns) and ``pocketmq config set`` (the local check)."""

from __future__ import annotations

import json

import pytest

from pocketmq.cli.cluster_cmd import CONTROLLER_COLUMNS, add_runtime_columns, columns, table_row
from pocketmq.common.errors import BadRequestError
from pocketmq.ops.broker_settings import checked_change, setting_name

ROWS = [
    {"broker": "a", "broker_id": 0, "role": "master", "address": "m:1"},
    {"broker": "a", "broker_id": 1, "role": "slave", "address": "s:1"},
    {"broker": "b", "broker_id": 0, "role": "master", "address": "b:1"},
]


def test_slave_rows_get_the_lag_their_master_reports_and_every_row_its_breakers():
    runtime = {
        "m:1": {
            "haSlaveLag": json.dumps({"s:1": {"lagBytes": 300, "lagMs": 1500}}),
            "breakerStates": json.dumps({"b": "OPEN"}),
        },
        "s:1": {"breakerStates": "{}"},
        "b:1": None,
    }  # did not answer
    rows = add_runtime_columns(ROWS, runtime)
    assert [(r["lag_bytes"], r["lag_s"], r["breakers"]) for r in rows] == [
        (None, None, {"b": "OPEN"}),
        (300, 1.5, {}),
        (None, None, None),
    ]
    assert [table_row(r)["breakers"] for r in rows] == ["b:OPEN", "-", "?"]
    assert columns(rows)[-1] == "breakers"  # no controller: no controller columns


def test_under_a_controller_each_row_shows_the_group_as_its_broker_read_it_from_etcd():
    controlled = {
        "breakerStates": "{}",
        "controllerEpoch": "3",
        "controllerMasterEpoch": "3",
        "controllerMaster": "1@m:1",
        "controllerInSync": "0,1",
        "controllerLease": "694d",
    }
    runtime = {"m:1": controlled, "s:1": {**controlled, "controllerMasterEpoch": "0"}, "b:1": None}
    rows = add_runtime_columns(ROWS, runtime)
    assert [(r["epoch"], r["master"], r["in_sync"], r["lease"]) for r in rows[:2]] == [(3, "1@m:1", [0, 1], "694d")] * 2
    assert [rows[2][c] for c in CONTROLLER_COLUMNS] == [None] * 4  # did not answer
    assert columns(rows)[-4:] == CONTROLLER_COLUMNS
    assert table_row(rows[0])["in_sync"] == "0,1"
    leaderless = add_runtime_columns(ROWS[:1], {"m:1": {"controllerEpoch": "4", "controllerInSync": ""}})[0]
    assert (leaderless["master"], table_row(leaderless)["in_sync"], leaderless["lease"]) == ("-", "-", "-")


def test_a_slave_whose_master_is_gone_shows_no_lag():
    rows = add_runtime_columns(ROWS[1:2], {"s:1": {"breakerStates": "{}"}})
    assert rows[0]["lag_bytes"] is None


def test_a_slave_acting_for_its_gone_master_shows_as_acting_master():
    runtime = {"s:1": {"breakerStates": "{}", "actingMaster": "true"}, "b:1": {"actingMaster": "false"}}
    rows = add_runtime_columns([*ROWS[1:2], ROWS[2]], runtime)
    assert [r["role"] for r in rows] == ["acting master", "master"]


def test_config_set_is_checked_before_anything_is_sent():
    assert checked_change("enableRemoteEscape", "true") == "enable_remote_escape"
    assert checked_change("pop_ck_rewrite_backoff_ms", "1000,2000") == "pop_ck_rewrite_backoff_ms"
    with pytest.raises(BadRequestError, match="unknown setting 'nope'"):
        checked_change("nope", "1")
    with pytest.raises(BadRequestError, match="only at a restart"):
        checked_change("remoting_port", "1")
    with pytest.raises(BadRequestError, match="must be dlq or drop"):
        checked_change("pop_ck_rewrite_ending", "forever")
    assert setting_name("brokerRole") == "broker_role"
