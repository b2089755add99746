"""A broker.conf written for RocketMQ starts PocketMQ: its keys map where they mean something, the rest are
ignored with one warning line; a flag or ``--set`` naming a key that means nothing is still refused."""

from __future__ import annotations

import logging

import pytest

from pocketmq.broker.config import BrokerConfig, BrokerRole
from pocketmq.common.config import load_config
from pocketmq.common.errors import ConfigError
from pocketmq.store.api import FlushMode

# The broker.conf RocketMQ ships (conf/broker.conf), and two keys of its multi-broker examples
STOCK_BROKER_CONF = """\
brokerClusterName = DefaultCluster
brokerName = broker-a
brokerId = 0
deleteWhen = 04
fileReservedTime = 48
brokerRole = ASYNC_MASTER
flushDiskType = ASYNC_FLUSH
brokerIP1 = 127.0.0.1
storePathCommitLog = /tmp/rmqstore/commitlog
"""


def test_a_stock_broker_conf_loads_with_its_keys_mapped_and_one_note(tmp_path, caplog):
    path = tmp_path / "broker.conf"
    path.write_text(STOCK_BROKER_CONF)
    with caplog.at_level(logging.WARNING, logger="pocketmq.common.config"):
        config = load_config(BrokerConfig, file=path, section="broker", env={})
    assert (config.cluster_name, config.broker_name, config.broker_id) == ("DefaultCluster", "broker-a", 0)
    assert config.file_reserved_hours == 48.0
    assert config.broker_role == BrokerRole.ASYNC_MASTER
    assert config.flush_mode == FlushMode.ASYNC
    assert config.advertise_host == "127.0.0.1"
    [note] = [r.getMessage() for r in caplog.records]
    assert note.startswith(f"file {path}: RocketMQ settings PocketMQ does not use, ignored: deleteWhen: ")
    assert "; storePathCommitLog: " in note


def test_an_unknown_key_in_a_file_is_still_refused(tmp_path):
    path = tmp_path / "broker.conf"
    path.write_text("deleteWhen = 04\nbrokerNmae = typo\n")
    with pytest.raises(ConfigError, match=r"unknown setting 'brokerNmae'$"):
        load_config(BrokerConfig, file=path, env={})


def test_an_ignored_key_as_an_override_is_refused_and_named_by_its_source():
    with pytest.raises(ConfigError) as refused:
        load_config(
            BrokerConfig,
            env={},
            overrides={"deleteWhen": "04", "remoting_port": "ten"},
            override_sources={"deleteWhen": "--set deleteWhen", "remoting_port": "--set remoting_port"},
        )
    assert str(refused.value) == (
        "invalid configuration: --set deleteWhen: unknown setting 'deleteWhen'; "
        "--set remoting_port: remoting_port='ten': expected an integer"
    )
