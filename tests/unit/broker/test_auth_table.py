"""The broker's users and ACLs on disk (broker/auth_table.py)."""

from __future__ import annotations

import stat

import pytest

from pocketmq.auth.model import Acl, PolicyType, ResourcePattern, User, UserType
from pocketmq.broker import auth_table
from pocketmq.broker.auth_table import AuthTable
from pocketmq.common.errors import BadRequestError

pytestmark = pytest.mark.timeout(10)


def acl_of(subject: str, *entries: tuple[str, str, str], policy_type: str = "Custom") -> Acl:
    return Acl.from_json(
        {
            "subject": subject,
            "policies": [
                {
                    "policyType": policy_type,
                    "entries": [{"resource": r, "actions": [a], "decision": d} for r, a, d in entries],
                }
            ],
        }
    )


def entries(acl: Acl | None) -> set[tuple[str, str, str]]:
    assert acl is not None
    return {
        (p.policy_type.value, str(e.resource), e.decision.value + ":" + ",".join(sorted(a.value for a in e.actions)))
        for p in acl.policies
        for e in p.entries
    }


def test_users_survive_a_restart_in_an_owner_only_file(tmp_path):
    table = AuthTable(tmp_path)
    table.create_user(User("alice", "s3cret"))
    with pytest.raises(BadRequestError, match="already exists"):
        table.create_user(User("alice", "other"))
    table.update_user(User("alice", "new-secret", UserType.SUPER))
    again = AuthTable(tmp_path)
    assert again.user("alice") == User("alice", "new-secret", UserType.SUPER)
    assert stat.S_IMODE((tmp_path / "auth.json").stat().st_mode) == 0o600
    with pytest.raises(BadRequestError, match="does not exist"):
        again.update_user(User("bob", "x"))


def test_acl_create_and_update_merge_by_resource_and_delete_takes_what_is_named(tmp_path):
    table = AuthTable(tmp_path)
    table.put_acl(acl_of("User:alice", ("Topic:a", "Pub", "Allow"), ("Topic:b", "Sub", "Allow")))
    table.put_acl(acl_of("User:alice", ("Topic:a", "Pub", "Deny")))  # replaces Topic:a, keeps Topic:b
    table.put_acl(acl_of("User:alice", ("*", "Get", "Allow"), policy_type="Default"))
    assert entries(table.acl("User:alice")) == {
        ("Custom", "Topic:a", "Deny:Pub"),
        ("Custom", "Topic:b", "Allow:Sub"),
        ("Default", "*", "Allow:Get"),
    }
    table.delete_acl("User:alice", PolicyType.CUSTOM, [ResourcePattern.parse("Topic:a")])
    assert entries(AuthTable(tmp_path).acl("User:alice")) == {
        ("Custom", "Topic:b", "Allow:Sub"),
        ("Default", "*", "Allow:Get"),
    }
    table.delete_acl("User:alice", PolicyType.DEFAULT)
    assert entries(table.acl("User:alice")) == {("Custom", "Topic:b", "Allow:Sub")}
    table.delete_acl("User:alice")
    assert table.acl("User:alice") is None and AuthTable(tmp_path).acl("User:alice") is None
    with pytest.raises(BadRequestError, match="no ACL"):
        table.delete_acl("User:alice")


def test_deleting_a_user_deletes_its_acl_and_listing_filters(tmp_path):
    table = AuthTable(tmp_path)
    for name in ("alice", "albert", "bob"):
        table.create_user(User(name, "pw"))
        table.put_acl(acl_of(f"User:{name}", (f"Topic:{name}-t", "Pub", "Allow")))
    table.delete_user("bob")
    assert [u.username for u in table.users("al")] == ["albert", "alice"]
    assert [a.subject for a in table.acls()] == ["User:albert", "User:alice"]
    assert [a.subject for a in table.acls(resource_filter="alice-")] == ["User:alice"]


def test_a_failed_write_changes_nothing(tmp_path, monkeypatch):
    table = AuthTable(tmp_path)
    table.create_user(User("alice", "pw"))

    def full_disk(*args, **kwargs):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(auth_table, "atomic_write_json", full_disk)
    with pytest.raises(OSError):
        table.create_user(User("bob", "pw"))
    with pytest.raises(OSError):
        table.delete_user("alice")
    assert table.user("bob") is None and table.user("alice") is not None and table.version == 1


def test_the_bootstrap_super_user_is_made_once_and_never_overwritten(tmp_path):
    table = AuthTable(tmp_path)
    assert table.ensure_super_user("root", "first")
    table.update_user(User("root", "rotated", UserType.SUPER))
    assert not AuthTable(tmp_path).ensure_super_user("root", "first")
    assert AuthTable(tmp_path).user("root") == User("root", "rotated", UserType.SUPER)


def test_a_slave_takes_the_master_s_document_whole_or_not_at_all(tmp_path):
    master = AuthTable(tmp_path / "master")
    master.create_user(User("alice", "pw"))
    master.put_acl(acl_of("User:alice", ("Topic:t", "Pub", "Allow")))
    slave = AuthTable(tmp_path / "slave")
    assert slave.replace(master.to_json()) and not slave.replace(master.to_json())
    assert slave.to_json() == master.to_json() == AuthTable(tmp_path / "slave").to_json()
    with pytest.raises(BadRequestError):
        slave.replace({"users": [{"username": "x"}]})  # no password
    assert slave.to_json() == master.to_json()


def test_each_change_tells_the_listeners_and_counts_in_the_version(tmp_path):
    table, told = AuthTable(tmp_path), []
    table.add_listener(lambda: told.append(table.version))  # the master wakes its slaves' held pulls
    table.create_user(User("alice", "pw"))
    table.put_acl(acl_of("User:alice", ("Topic:t", "Pub", "Allow")))
    with_alice = table.to_json()
    table.delete_user("alice")
    with pytest.raises(BadRequestError):
        table.delete_user("alice")  # changes nothing: tells nobody
    assert told == [1, 2, 3]
    slave = AuthTable(tmp_path / "slave")
    slave.add_listener(lambda: told.append(-1))
    assert slave.replace(with_alice) and told == [1, 2, 3]  # a slave's copy is nobody's news
