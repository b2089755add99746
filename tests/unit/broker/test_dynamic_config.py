"""UPDATE_BROKER_CONFIG's rule: dynamic settings change, everything else is refused, all at once."""

import pytest

from pocketmq.broker.config import BrokerConfig
from pocketmq.broker.dynamic_config import changed_config, config_properties
from pocketmq.common.errors import BadRequestError


def test_dynamic_settings_change_by_field_name_or_broker_conf_alias():
    new = changed_config(BrokerConfig(), {"autoCreateTopicEnable": "false", "default_topic_queue_nums": "4"})
    assert new.auto_create_topic_enable is False
    assert new.default_topic_queue_nums == 4


def test_unknown_key_is_refused_and_named():
    with pytest.raises(BadRequestError, match="noSuchSetting"):
        changed_config(BrokerConfig(), {"noSuchSetting": "1"})


def test_bad_value_is_refused_not_clamped():
    with pytest.raises(BadRequestError, match="default_topic_queue_nums"):
        changed_config(BrokerConfig(), {"default_topic_queue_nums": "0"})


def test_a_bad_value_is_named_as_the_setting_not_as_a_flag():
    with pytest.raises(BadRequestError) as refused:
        changed_config(BrokerConfig(), {"breaker_failure_threshold": "abc"})
    assert str(refused.value) == (
        "invalid configuration: new value: breaker_failure_threshold='abc': expected an integer"
    )


def test_static_setting_is_refused_with_the_reason():
    with pytest.raises(BadRequestError, match="restart"):
        changed_config(BrokerConfig(), {"remoting_port": "1234"})


def test_setting_a_static_field_to_its_current_value_is_allowed():
    config = BrokerConfig()
    assert (
        changed_config(config, {"broker_name": config.broker_name, "long_polling_enable": "false"}).long_polling_enable
        is False
    )


def test_config_properties_render_every_field_as_text():
    props = config_properties(BrokerConfig())
    assert props["flush_mode"] == "async"
    assert props["auto_create_topic_enable"] == "true"
    assert props["namesrv_addr"] == ""
    assert set(props) >= {"broker_name", "remoting_port", "data_dir"}
