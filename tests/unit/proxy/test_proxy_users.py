"""The proxy's copy of the brokers' users and ACLs (proxy/users.py): read when old, at once for a user it does
not know (after a short gap), a new version only when something changed, the last table kept when the brokers
cannot be read."""

from __future__ import annotations

import asyncio

import pytest

from pocketmq.auth.model import User
from pocketmq.common.errors import RemotingError
from pocketmq.protocol.codes import AUTH_LIST_ACL, AUTH_LIST_USER
from pocketmq.proxy.users import BrokerUsers
from pocketmq.runtime.clock import ManualClock

pytestmark = pytest.mark.timeout(10)

TTL_MS, GAP_MS = 3_000, 200
ALICE_ACL = {"subject": "User:alice", "policies": [{"entries": [{"resource": "Topic:t", "actions": ["Pub"]}]}]}


class FakeAdmin:
    """The brokers' answers to AUTH_LIST_USER and AUTH_LIST_ACL."""

    def __init__(self):
        self.users = [{"username": "alice", "password": "a-secret"}]
        self.acls = [ALICE_ACL]
        self.reads = 0
        self.down = False
        self.fields: dict[str, str] = {}

    async def auth_read(self, code: int, fields: dict[str, str]):
        if self.down:
            raise RemotingError("no broker")
        if code == AUTH_LIST_USER:
            self.reads += 1
            self.fields = fields
            return list(self.users)
        assert code == AUTH_LIST_ACL
        return list(self.acls)


@pytest.fixture
def setup():
    admin, clock = FakeAdmin(), ManualClock()
    return admin, clock, BrokerUsers(admin, clock, TTL_MS, GAP_MS)  # type: ignore[arg-type]


async def test_users_are_read_with_their_secrets_and_kept_their_time_to_live(setup):
    admin, clock, users = setup
    await users.refresh("alice")
    assert users.user("alice") == User("alice", "a-secret") and users.acl("User:alice") is not None
    assert admin.fields == {"withSecret": "true"} and users.version == 1
    clock.advance(TTL_MS - 1)
    await users.refresh("alice")
    assert admin.reads == 1
    clock.advance(1)
    await users.refresh("alice")
    assert admin.reads == 2 and users.version == 1  # read again, nothing changed


async def test_an_unknown_user_is_read_at_once_after_the_gap(setup):
    admin, clock, users = setup
    await users.refresh(None)
    admin.users.append({"username": "bob", "password": "b-secret"})
    waiting = asyncio.ensure_future(users.refresh("bob"))
    await asyncio.sleep(0)
    assert not waiting.done() and admin.reads == 1  # not sooner than the gap after the last read
    clock.advance(GAP_MS)
    await waiting
    assert users.user("bob") is not None and admin.reads == 2 and users.version == 2
    await asyncio.gather(users.refresh("mallory"), users.refresh("mallory"), clock_advance(clock, GAP_MS))
    assert admin.reads == 3  # calls waiting together share one read


async def clock_advance(clock: ManualClock, delta_ms: int) -> None:
    await asyncio.sleep(0)
    clock.advance(delta_ms)


async def test_the_last_table_is_kept_when_the_brokers_cannot_be_read(setup):
    admin, clock, users = setup
    await users.refresh("alice")
    admin.down = True
    clock.advance(TTL_MS)
    await users.refresh("alice")
    assert users.user("alice") is not None and users.version == 1
