"""Authentication and authorization decisions (pocketmq.auth.decide), with property tests against the rules of
its module doc."""

from __future__ import annotations

import ipaddress
import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pocketmq.auth.decide import authenticate, authorize, deciding_entry, parse_address
from pocketmq.auth.model import (
    Acl,
    AclFormatError,
    Action,
    Decision,
    Policy,
    PolicyEntry,
    PolicyType,
    Resource,
    ResourcePattern,
    ResourceType,
    User,
    UserStatus,
    UserType,
)
from pocketmq.common.errors import AccessDeniedError

pytestmark = pytest.mark.timeout(60)
ALICE = User("alice", "secret")
ROOT = User("root", "secret", UserType.SUPER)
HERE = ipaddress.ip_address("10.1.2.3")
ORDERS = Resource(ResourceType.TOPIC, "orders")
PUB = frozenset({Action.PUB})


def entry(resource: str, *actions: str, decision: str = "Allow", ips: tuple[str, ...] = ()) -> PolicyEntry:
    return PolicyEntry.from_json(
        {"resource": resource, "actions": list(actions), "decision": decision, "sourceIps": list(ips)}, "test"
    )


def acl(*entries: PolicyEntry, default: tuple[PolicyEntry, ...] = ()) -> Acl:
    policies = [Policy(PolicyType.CUSTOM, entries)]
    if default:
        policies.append(Policy(PolicyType.DEFAULT, default))
    return Acl("User:alice", tuple(policies))


def allowed(user: User, the_acl: Acl | None, resource=ORDERS, actions=PUB, address=HERE) -> bool:
    try:
        authorize(user, the_acl, resource, actions, address)
        return True
    except AccessDeniedError:
        return False


# -- authentication -------------------------------------------------------------------------------------------------
def test_authentication_refusals_in_rocketmq_s_words():
    def refused(*args) -> str:
        with pytest.raises(AccessDeniedError) as denied:
            authenticate(*args)
        return str(denied.value)

    assert refused(None, None, lambda u: True) == "username cannot be null."
    assert refused("bob", None, lambda u: True) == "User:bob is not found."
    disabled = User("bob", "s", status=UserStatus.DISABLE)
    assert refused("bob", disabled, lambda u: True) == "User:bob is disabled."
    assert refused("alice", ALICE, lambda u: False) == "check signature failed."
    assert authenticate("alice", ALICE, lambda u: u.password == "secret") is ALICE


# -- authorization: the rules -------------------------------------------------------------------------------------
def test_a_super_user_needs_no_policy():
    assert allowed(ROOT, None)


def test_no_policy_or_no_matching_entry_is_refused_with_the_reason():
    assert not allowed(ALICE, None)
    with pytest.raises(AccessDeniedError, match="no matched policies"):
        authorize(ALICE, acl(entry("Topic:other", "Pub")), ORDERS, PUB, HERE)


def test_the_most_specific_entry_decides():
    the_acl = acl(entry("Topic:*", "All", decision="Deny"), entry("Topic:orders", "Pub"))
    assert allowed(ALICE, the_acl)
    assert not allowed(ALICE, the_acl, Resource(ResourceType.TOPIC, "payments"))
    prefixes = acl(entry("Topic:ord*", "Pub", decision="Deny"), entry("Topic:orders-eu*", "Pub"))
    assert allowed(ALICE, prefixes, Resource(ResourceType.TOPIC, "orders-eu-1"))
    assert not allowed(ALICE, prefixes, Resource(ResourceType.TOPIC, "orders-us-1"))


def test_deny_wins_a_tie():
    the_acl = acl(entry("Topic:orders", "Pub"), entry("Topic:orders", "Pub", decision="Deny"))
    with pytest.raises(AccessDeniedError, match="the decision is deny"):
        authorize(ALICE, the_acl, ORDERS, PUB, HERE)


def test_actions_any_one_of_the_needed_and_all():
    assert allowed(ALICE, acl(entry("Topic:orders", "Get")), actions=frozenset({Action.SUB, Action.GET}))
    assert not allowed(ALICE, acl(entry("Topic:orders", "Sub")))
    assert allowed(ALICE, acl(entry("Topic:orders", "All")))
    assert allowed(ALICE, acl(entry("Topic:orders", "Sub")), actions=frozenset({Action.ANY}))
    assert not allowed(ALICE, acl(entry("Topic:orders", "NoSuchAction")))  # unknown actions are ignored


def test_source_ips_narrow_an_entry():
    the_acl = acl(entry("Topic:orders", "Pub", ips=("10.0.0.0/8", "192.168.1.7")))
    assert allowed(ALICE, the_acl, address=ipaddress.ip_address("10.200.0.1"))
    assert allowed(ALICE, the_acl, address=ipaddress.ip_address("192.168.1.7"))
    assert not allowed(ALICE, the_acl, address=ipaddress.ip_address("192.168.1.8"))
    assert not allowed(ALICE, the_acl, address=None)


def test_the_default_policy_only_when_the_custom_one_has_no_match():
    the_acl = acl(entry("Topic:orders", "Sub"), default=(entry("*", "All"),))
    assert allowed(ALICE, the_acl)  # custom has nothing for Pub: the default's entry decides
    denied_by_custom = acl(entry("Topic:orders", "Pub", decision="Deny"), default=(entry("Topic:orders", "Pub"),))
    assert not allowed(ALICE, denied_by_custom)


def test_patterns_parse_and_print_back():
    for text in ("*", "Topic:*", "Topic:ord*", "Group:g1", "Cluster:DefaultCluster", "Namespace:ns*"):
        assert str(ResourcePattern.parse(text)) == text
    assert ResourcePattern.parse("topic:orders") == ResourcePattern.parse("Topic:orders")
    for bad in ("", "orders", "Queue:x", "Topic:", None):
        with pytest.raises(AclFormatError):
            ResourcePattern.parse(bad)


def test_acl_and_user_json_round_trip_and_bad_input_is_named():
    the_acl = acl(entry("Topic:orders", "Pub", "Sub", ips=("10.0.0.0/8",)), default=(entry("*", "Get"),))
    assert Acl.from_json(the_acl.to_json()) == the_acl
    assert User.from_json(ROOT.to_json()) == ROOT
    assert "password" not in ROOT.to_json(with_password=False) and "secret" not in repr(ROOT)
    with pytest.raises(AclFormatError, match="sourceIps"):
        Acl.from_json(
            {"subject": "User:a", "policies": [{"entries": [{"resource": "*", "actions": ["Pub"], "sourceIps": "x"}]}]}
        )
    with pytest.raises(AclFormatError, match="10.0.0.300"):
        Acl.from_json(
            {
                "subject": "User:a",
                "policies": [{"entries": [{"resource": "*", "actions": ["Pub"], "sourceIps": ["10.0.0.300"]}]}],
            }
        )
    with pytest.raises(AclFormatError, match="subject"):
        Acl.from_json({"subject": "alice", "policies": []})
    with pytest.raises(AclFormatError, match="userType"):
        User.from_json({"username": "a", "password": "b", "userType": "Root"})


def test_addresses_of_peers():
    assert parse_address("127.0.0.1") == ipaddress.ip_address("127.0.0.1")
    assert parse_address("[::1]") == ipaddress.ip_address("::1")
    assert parse_address("localhost") is None and parse_address(None) is None


# -- authorization: properties ------------------------------------------------------------------------------------
NAMES = ["orders", "orders-eu", "ord", "payments", "p"]
PATTERNS = ["*", "Topic:*", "Group:*"] + [f"Topic:{n}" for n in NAMES] + [f"Topic:{n[:2]}*" for n in NAMES]
ACTIONS = ["Pub", "Sub", "Get", "All"]
entries_st = st.builds(
    lambda resource, actions, decision, narrow: entry(
        resource, *actions, decision=decision, ips=("10.0.0.0/8",) if narrow else ()
    ),
    st.sampled_from(PATTERNS),
    st.lists(st.sampled_from(ACTIONS), min_size=1, max_size=3, unique=True),
    st.sampled_from(["Allow", "Deny"]),
    st.booleans(),
)
requests_st = st.tuples(
    st.sampled_from(NAMES),
    st.sets(st.sampled_from([Action.PUB, Action.SUB, Action.GET]), min_size=1),
    st.sampled_from(["10.9.9.9", "172.16.0.1"]),
)


def reference(entries: list[PolicyEntry], name: str, actions: frozenset[Action], address) -> bool:
    """The rules written the slow way: every matching entry, the highest specificity, any Deny there refuses."""
    resource = Resource(ResourceType.TOPIC, name)
    matched = [
        e
        for e in entries
        if e.resource.matches(resource)
        and (Action.ALL in e.actions or e.actions & actions)
        and (not e.source_ips or any(address in n for n in e.source_ips))
    ]
    if not matched:
        return False
    top = max(e.resource.specificity for e in matched)
    return all(e.decision is Decision.ALLOW for e in matched if e.resource.specificity == top)


@settings(max_examples=200, deadline=None)
@given(st.lists(entries_st, max_size=8), requests_st, st.randoms())
def test_the_decision_is_the_reference_s_and_does_not_depend_on_entry_order(entries, request, rnd):
    name, actions, ip = request
    address = ipaddress.ip_address(ip)
    actions = frozenset(actions)
    expected = reference(entries, name, actions, address)
    shuffled = list(entries)
    rnd.shuffle(shuffled)
    resource = Resource(ResourceType.TOPIC, name)
    assert allowed(ALICE, acl(*entries), resource, actions, address) is expected
    assert allowed(ALICE, acl(*shuffled), resource, actions, address) is expected
    assert allowed(ROOT, acl(*entries), resource, actions, address)


@settings(max_examples=200, deadline=None)
@given(st.lists(entries_st, max_size=6), requests_st)
def test_a_more_specific_deny_always_refuses(entries, request):
    name, actions, ip = request
    resource = Resource(ResourceType.TOPIC, name)
    literal_deny = entry(f"Topic:{name}", "All", decision="Deny")
    position = random.Random(len(entries)).randint(0, len(entries))
    with_deny = [*entries[:position], literal_deny, *entries[position:]]
    assert not allowed(ALICE, acl(*with_deny), resource, frozenset(actions), ipaddress.ip_address(ip))
    assert deciding_entry(acl(*with_deny), resource, frozenset(actions), ipaddress.ip_address(ip)) is not None
