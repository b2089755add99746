"""Users and access policies (RocketMQ's ACL 2.0 model) and their JSON, as RocketMQ's admin requests carry them.

- A **user** has a name, a secret (RocketMQ calls it ``password``: the secret key clients sign with), a type
  (``Super`` users are never refused anything) and a status (a ``disable``d user cannot authenticate).
- A **resource pattern** names what an entry covers: ``*`` (anything), ``Topic:orders`` (one),
  ``Topic:order*`` (a prefix), ``Topic:*`` (every topic); also ``Group:``, ``Cluster:``, ``Namespace:``. Type names
  are case-insensitive. A request touches concrete ``Resource``s (``Topic:orders``).
- An **ACL** is a subject (``User:alice``) and up to two **policies**, ``Custom`` and ``Default``, each a list of
  **entries**: a resource pattern, actions, source IP networks (none = any address) and a decision.

JSON (RocketMQ's ``UserInfo`` and ``AclInfo``)::

    {"username": "alice", "password": "secret", "userType": "Normal", "userStatus": "enable"}
    {"subject": "User:alice", "policies": [{"policyType": "Custom", "entries": [
        {"resource": "Topic:orders", "actions": ["Pub", "Sub"], "sourceIps": ["10.0.0.0/8"], "decision": "Allow"}]}]}
"""

from __future__ import annotations

import enum
import ipaddress
from dataclasses import dataclass, field
from typing import Any

from pocketmq.common.errors import BadRequestError

IpNetwork = ipaddress.IPv4Network | ipaddress.IPv6Network
USER_SUBJECT_PREFIX = "User:"


class AclFormatError(BadRequestError):
    """A user or ACL that does not parse; the message names the field."""


def _enum_by_text(kind: type[enum.Enum], text: Any, what: str) -> Any:
    if isinstance(text, str):
        for member in kind:
            if member.value.lower() == text.strip().lower():
                return member
    choices = ", ".join(member.value for member in kind)
    raise AclFormatError(f"{what} must be one of {choices}, not {text!r}")


class UserType(enum.Enum):
    SUPER = "Super"
    NORMAL = "Normal"


class UserStatus(enum.Enum):
    ENABLE = "enable"
    DISABLE = "disable"


@dataclass(frozen=True, slots=True)
class User:
    username: str
    password: str = field(repr=False)  # the secret key: never in a repr, a log line or a listing
    user_type: UserType = UserType.NORMAL
    status: UserStatus = UserStatus.ENABLE

    @property
    def subject(self) -> str:
        return USER_SUBJECT_PREFIX + self.username

    @property
    def is_super(self) -> bool:
        return self.user_type is UserType.SUPER

    def to_json(self, *, with_password: bool = True) -> dict[str, Any]:
        obj = {"username": self.username, "userType": self.user_type.value, "userStatus": self.status.value}
        if with_password:
            obj["password"] = self.password
        return obj

    @classmethod
    def from_json(cls, obj: Any) -> User:
        if not isinstance(obj, dict):
            raise AclFormatError("a user must be a JSON object")
        username = obj.get("username")
        if not isinstance(username, str) or not username.strip():
            raise AclFormatError("username must not be blank")
        password = obj.get("password")
        if not isinstance(password, str) or not password:
            raise AclFormatError(f"user {username}: password must not be blank")
        return cls(
            username.strip(),
            password,
            _enum_by_text(UserType, obj.get("userType", "Normal"), "userType"),
            _enum_by_text(UserStatus, obj.get("userStatus", "enable"), "userStatus"),
        )


class ResourceType(enum.Enum):
    TOPIC = "Topic"
    GROUP = "Group"
    CLUSTER = "Cluster"
    NAMESPACE = "Namespace"


@dataclass(frozen=True, slots=True)
class Resource:
    """A concrete thing a request touches."""

    type: ResourceType
    name: str

    def __str__(self) -> str:
        return f"{self.type.value}:{self.name}"


class PatternKind(enum.IntEnum):
    """How a pattern matches; a higher value is more specific (``ANY`` < ``TYPE`` < ``PREFIX`` < ``LITERAL``)."""

    ANY = 0  # "*": anything at all
    TYPE = 1  # "Topic:*": every resource of a type
    PREFIX = 2  # "Topic:ord*"
    LITERAL = 3  # "Topic:orders"


@dataclass(frozen=True, slots=True)
class ResourcePattern:
    kind: PatternKind
    type: ResourceType | None = None  # None only for ANY
    name: str = ""  # the literal name or the prefix

    @classmethod
    def parse(cls, text: Any) -> ResourcePattern:
        if not isinstance(text, str) or not text.strip():
            raise AclFormatError("resource must not be blank")
        text = text.strip()
        if text == "*":
            return cls(PatternKind.ANY)
        type_text, sep, name = text.partition(":")
        if not sep or not name:
            raise AclFormatError(f"resource {text!r} must be '*' or Type:name (Topic, Group, Cluster, Namespace)")
        resource_type = _enum_by_text(ResourceType, type_text, "resource type")
        if name == "*":
            return cls(PatternKind.TYPE, resource_type)
        if name.endswith("*"):
            return cls(PatternKind.PREFIX, resource_type, name[:-1])
        return cls(PatternKind.LITERAL, resource_type, name)

    def matches(self, resource: Resource) -> bool:
        if self.kind is PatternKind.ANY:
            return True
        if self.type is not resource.type:
            return False
        if self.kind is PatternKind.TYPE:
            return True
        if self.kind is PatternKind.PREFIX:
            return resource.name.startswith(self.name)
        return resource.name == self.name

    @property
    def specificity(self) -> tuple[int, int]:
        """Order of preference between patterns that match: a literal, then the longer prefix, ..., then ``*``."""
        return (self.kind.value, len(self.name))

    def __str__(self) -> str:
        if self.kind is PatternKind.ANY:
            return "*"
        assert self.type is not None
        suffix = "*" if self.kind in (PatternKind.TYPE, PatternKind.PREFIX) else ""
        return f"{self.type.value}:{self.name}{suffix}"


class Action(enum.Enum):
    ALL = "All"  # in an entry: every action
    ANY = "Any"  # in a request: whatever action an entry grants
    PUB = "Pub"
    SUB = "Sub"
    CREATE = "Create"
    UPDATE = "Update"
    DELETE = "Delete"
    GET = "Get"
    LIST = "List"


class Decision(enum.Enum):
    ALLOW = "Allow"
    DENY = "Deny"


class PolicyType(enum.Enum):
    CUSTOM = "Custom"
    DEFAULT = "Default"


def _actions(values: Any, where: str) -> frozenset[Action]:
    """An entry's actions; unknown names are ignored, as RocketMQ does (a newer tool's action is not an error)."""
    if not isinstance(values, list) or not values:
        raise AclFormatError(f"{where}: actions must be a non-empty list")
    known = {member.value.lower(): member for member in Action}
    return frozenset(known[v.strip().lower()] for v in values if isinstance(v, str) and v.strip().lower() in known)


def _networks(values: Any, where: str) -> tuple[IpNetwork, ...]:
    if values is None:
        return ()
    if not isinstance(values, list):
        raise AclFormatError(f"{where}: sourceIps must be a list of addresses or CIDR ranges")
    try:
        return tuple(ipaddress.ip_network(str(v).strip(), strict=False) for v in values if str(v).strip())
    except ValueError as exc:
        raise AclFormatError(f"{where}: {exc}") from None


@dataclass(frozen=True, slots=True)
class PolicyEntry:
    resource: ResourcePattern
    actions: frozenset[Action]
    decision: Decision
    source_ips: tuple[IpNetwork, ...] = ()

    def grants_one_of(self, requested: frozenset[Action]) -> bool:
        if not self.actions:
            return False
        if Action.ANY in requested or Action.ALL in self.actions:
            return True
        return bool(self.actions & requested)

    def covers_address(self, address: ipaddress.IPv4Address | ipaddress.IPv6Address | None) -> bool:
        if not self.source_ips:
            return True
        return address is not None and any(address in network for network in self.source_ips)

    def to_json(self) -> dict[str, Any]:
        return {
            "resource": str(self.resource),
            "actions": sorted(action.value for action in self.actions),
            "sourceIps": [str(network) for network in self.source_ips],
            "decision": self.decision.value,
        }

    @classmethod
    def from_json(cls, obj: Any, where: str) -> PolicyEntry:
        if not isinstance(obj, dict):
            raise AclFormatError(f"{where}: an entry must be a JSON object")
        return cls(
            ResourcePattern.parse(obj.get("resource")),
            _actions(obj.get("actions"), where),
            _enum_by_text(Decision, obj.get("decision", "Allow"), f"{where}: decision"),
            _networks(obj.get("sourceIps"), where),
        )


@dataclass(frozen=True, slots=True)
class Policy:
    policy_type: PolicyType
    entries: tuple[PolicyEntry, ...]

    def to_json(self) -> dict[str, Any]:
        return {"policyType": self.policy_type.value, "entries": [entry.to_json() for entry in self.entries]}


@dataclass(frozen=True, slots=True)
class Acl:
    subject: str
    policies: tuple[Policy, ...]

    def policy(self, policy_type: PolicyType) -> Policy | None:
        return next((p for p in self.policies if p.policy_type is policy_type), None)

    def to_json(self) -> dict[str, Any]:
        return {"subject": self.subject, "policies": [policy.to_json() for policy in self.policies]}

    @classmethod
    def from_json(cls, obj: Any) -> Acl:
        if not isinstance(obj, dict):
            raise AclFormatError("an ACL must be a JSON object")
        subject = obj.get("subject")
        if not isinstance(subject, str) or not subject.startswith(USER_SUBJECT_PREFIX) or subject == "User:":
            raise AclFormatError(f"subject must be User:<name>, not {subject!r}")
        policies_json = obj.get("policies")
        if not isinstance(policies_json, list):
            raise AclFormatError(f"{subject}: policies must be a list")
        by_type: dict[PolicyType, list[PolicyEntry]] = {}
        for i, policy in enumerate(policies_json):
            if not isinstance(policy, dict):
                raise AclFormatError(f"{subject}: policy {i} must be a JSON object")
            policy_type = _enum_by_text(PolicyType, policy.get("policyType", "Custom"), f"{subject}: policyType")
            entries = policy.get("entries")
            if not isinstance(entries, list):
                raise AclFormatError(f"{subject}: policy {i}: entries must be a list")
            where = f"{subject} {policy_type.value}"
            by_type.setdefault(policy_type, []).extend(
                PolicyEntry.from_json(entry, f"{where} entry {j}") for j, entry in enumerate(entries)
            )
        return cls(subject, tuple(Policy(t, tuple(entries)) for t, entries in by_type.items()))
