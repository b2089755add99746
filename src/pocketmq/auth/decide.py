"""Who may do what: authentication and authorization of one request, as pure functions.

**Authentication** takes the user a request names and whether its signature matches that user's secret. The
refusals, in RocketMQ's words: no user named ("username cannot be null."), unknown ("User:<u> is not found."),
disabled ("User:<u> is disabled."), bad signature ("check signature failed."). There is no anonymous access.

**Authorization** of a user for one resource and the actions a request needs there (any one of them will do:
QUERY_CONSUMER_OFFSET needs Sub *or* Get on the topic):

1. A ``Super`` user is allowed everything.
2. Take the entries of the user's ``Custom`` policy that cover the resource, grant one of the actions and cover
   the client's address; only if there are none, those of its ``Default`` policy. None at all: refused ("no
   matched policies").
3. Of those, the most specific pattern decides (a literal name, then the longer prefix, then ``Type:*``, then
   ``*``): ``Topic:* Deny`` with ``Topic:orders Allow`` lets the user at ``orders`` and nothing else. Between
   equally specific entries a ``Deny`` wins. RocketMQ orders the same way (its code once let Allow win a tie,
   against its own comment; PocketMQ does what the comment says).
"""

from __future__ import annotations

import ipaddress
from collections.abc import Callable, Iterable

from pocketmq.auth.model import Acl, Action, Decision, PolicyEntry, PolicyType, Resource, User, UserStatus
from pocketmq.common.errors import AccessDeniedError

Address = ipaddress.IPv4Address | ipaddress.IPv6Address


def parse_address(host: str | None) -> Address | None:
    """The client's address from a peer's host text (``127.0.0.1``, ``::1``, ``[::1]``), None when not an IP."""
    if not host:
        return None
    try:
        return ipaddress.ip_address(host.strip("[]"))
    except ValueError:
        return None


def authenticate(username: str | None, user: User | None, signature_matches: Callable[[User], bool]) -> User:
    """The authenticated user; AccessDeniedError with RocketMQ's message otherwise."""
    if not username:
        raise AccessDeniedError("username cannot be null.")
    if user is None:
        raise AccessDeniedError(f"User:{username} is not found.")
    if user.status is UserStatus.DISABLE:
        raise AccessDeniedError(f"User:{username} is disabled.")
    if not signature_matches(user):
        raise AccessDeniedError("check signature failed.")
    return user


def _matching(entries: Iterable[PolicyEntry], resource: Resource, actions: frozenset[Action], address) -> list:
    return [
        entry
        for entry in entries
        if entry.resource.matches(resource) and entry.grants_one_of(actions) and entry.covers_address(address)
    ]


def deciding_entry(
    acl: Acl | None, resource: Resource, actions: frozenset[Action], address: Address | None
) -> PolicyEntry | None:
    """The entry that decides (rules 2 and 3 of the module doc), None when no entry matches."""
    if acl is None:
        return None
    for policy_type in (PolicyType.CUSTOM, PolicyType.DEFAULT):
        policy = acl.policy(policy_type)
        matched = _matching(policy.entries, resource, actions, address) if policy else []
        if matched:
            # most specific first; at equal specificity Deny before Allow
            return max(matched, key=lambda e: (e.resource.specificity, e.decision is Decision.DENY))
    return None


def authorize(
    user: User, acl: Acl | None, resource: Resource, actions: frozenset[Action], address: Address | None
) -> None:
    """Return when ``user`` may do one of ``actions`` on ``resource`` from ``address``; AccessDeniedError else."""
    if user.is_super:
        return
    entry = deciding_entry(acl, resource, actions, address)
    where = f"{user.subject} has no permission to access {resource} from {address or 'unknown address'}"
    if entry is None:
        raise AccessDeniedError(f"{where}, no matched policies.")
    if entry.decision is Decision.DENY:
        raise AccessDeniedError(f"{where}, the decision is deny.")
