"""ACL 1.0's plain_acl.yml converted to ACL 2.0 users and policies (auth/acl1.py)."""

from __future__ import annotations

import ipaddress

import pytest

from pocketmq.auth.acl1 import convert_plain_acl, read_yaml
from pocketmq.auth.decide import authorize
from pocketmq.auth.model import AclFormatError, Action, Resource, ResourceType, UserType
from pocketmq.common.errors import AccessDeniedError

# RocketMQ's distribution/conf/plain_acl.yml in shape (the names are ours)
PLAIN_ACL = """\
globalWhiteRemoteAddresses:
  - 10.10.103.*
  - 192.168.0.*

accounts:
  - accessKey: rocket
    secretKey: 12345678
    whiteRemoteAddress:
    admin: false
    defaultTopicPerm: DENY
    defaultGroupPerm: SUB
    topicPerms:
      - topicA=DENY
      - topicB=PUB|SUB
      - topicC=SUB
    groupPerms:
      # the group should convert to retry topic
      - groupA=DENY
      - groupB=PUB|SUB
  - accessKey: "admin-user"
    secretKey: 1234567890
    whiteRemoteAddress: 192.168.1.*
    # if it is admin, it could access all resources
    admin: true
"""


def test_the_yaml_subset_reads_blocks_lists_and_flow_lists():
    assert read_yaml("a: 1\nb:\n  - x\n  - y: 2\n    z: [p, 'q']\nc:\n") == {
        "a": "1",
        "b": ["x", {"y": "2", "z": ["p", "q"]}],
        "c": None,
    }


def test_accounts_become_users_and_policies():
    converted = convert_plain_acl(PLAIN_ACL)
    users = {u.username: u for u in converted.users}
    assert users["rocket"].user_type is UserType.NORMAL and users["rocket"].password == "12345678"
    assert users["admin-user"].user_type is UserType.SUPER
    assert [acl.subject for acl in converted.acls] == ["User:rocket"]  # a Super user needs no policy
    assert any("globalWhiteRemoteAddresses" in w for w in converted.warnings)

    rocket, acl = users["rocket"], converted.acls[0]

    def allowed(kind: ResourceType, name: str, action: Action) -> bool:
        try:
            authorize(rocket, acl, Resource(kind, name), frozenset({action}), ipaddress.ip_address("10.0.0.1"))
            return True
        except AccessDeniedError:
            return False

    assert allowed(ResourceType.TOPIC, "topicB", Action.PUB) and allowed(ResourceType.TOPIC, "topicC", Action.SUB)
    assert not allowed(ResourceType.TOPIC, "topicA", Action.SUB)  # DENY
    assert not allowed(ResourceType.TOPIC, "topicC", Action.PUB)
    assert not allowed(ResourceType.TOPIC, "other", Action.PUB)  # defaultTopicPerm DENY
    assert allowed(ResourceType.GROUP, "anyGroup", Action.SUB)  # defaultGroupPerm SUB
    assert not allowed(ResourceType.GROUP, "groupA", Action.SUB)


def test_a_white_address_becomes_the_entries_source_range():
    converted = convert_plain_acl(
        "accounts:\n  - accessKey: a\n    secretKey: s\n    whiteRemoteAddress: 10.1.*.*\n    defaultTopicPerm: PUB\n"
    )
    entries = converted.acls[0].policies[0].entries
    assert all(e.source_ips == (ipaddress.ip_network("10.1.0.0/16"),) for e in entries)
    ranged = convert_plain_acl("accounts:\n  - accessKey: a\n    secretKey: s\n    whiteRemoteAddress: 10.1.1.1-9\n")
    assert ranged.warnings and ranged.acls[0].policies[0].entries[0].source_ips == ()


def test_a_bad_permission_or_account_is_refused():
    with pytest.raises(AclFormatError, match="permission"):
        convert_plain_acl("accounts:\n  - accessKey: a\n    secretKey: s\n    topicPerms:\n      - t=WRITE\n")
    with pytest.raises(AclFormatError, match="accessKey and secretKey"):
        convert_plain_acl("accounts:\n  - accessKey: a\n")
