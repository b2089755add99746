"""With access control off, each attack of ``acl_attacks`` does its harm (real processes): so the refusals of
test_acl.py, where the same requests are made against a broker with access control on, prove something."""

from __future__ import annotations

import pytest
from tests.integration.acl_attacks import ATTACKS, attempt
from tests.integration.remoting_calls import serve_for_module

from pocketmq.protocol.codes import ResponseCode

pytestmark = pytest.mark.timeout(60)


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    yield from serve_for_module(tmp_path_factory, "broker-open", [])


@pytest.mark.parametrize("attack", ATTACKS, ids=lambda attack: attack.__name__)
async def test_each_attack_works_on_an_open_broker(broker, attack):
    outcome = await attempt(attack, broker)
    assert outcome.reply.code == ResponseCode.SUCCESS, (outcome.reply.code, outcome.reply.remark)
    assert outcome.harmed
