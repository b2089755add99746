"""The broker's users and ACLs (access control, docs/security.md), in ``<data dir>/auth.json``.

The file is written (atomically, owner-only: it holds the secrets) *before* a change is visible, so a change that
answered OK survives a crash, and a change whose write failed changes nothing. Slaves take the master's document
whole with the rest of its metadata (``replace``).

Changes follow RocketMQ's admin requests: creating a user that exists is refused; creating or updating an ACL
merges into the subject's ACL (an entry for the same resource in the same policy type is replaced, others are
added); deleting takes the whole ACL, one policy type, or the entries of some resources. A user's ACL goes with
the user when the user is deleted.

File::

    {"users": [UserInfo JSON, ...], "acls": [AclInfo JSON, ...]}   # pocketmq.auth.model
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from pocketmq.auth.model import Acl, Policy, PolicyType, ResourcePattern, User, UserType
from pocketmq.common.errors import BadRequestError
from pocketmq.runtime.files import atomic_write_json, load_json

FILE_NAME = "auth.json"


class AuthTable:
    def __init__(self, data_dir: Path):
        self._path = Path(data_dir) / FILE_NAME
        self._lock = threading.Lock()
        document = load_json(self._path, {"users": [], "acls": []})
        self._users, self._acls = _parse(document)
        self.version = 0  # counts changes (what a slave's metadata sync compares)
        self._listeners: list[Callable[[], None]] = []

    def add_listener(self, listener: Callable[[], None]) -> None:
        """Call ``listener`` after each change made here (not after ``replace``), on the changing thread."""
        self._listeners.append(listener)

    # -- reads ------------------------------------------------------------------------------------------------------
    def user(self, username: str) -> User | None:
        return self._users.get(username)

    def users(self, name_filter: str = "") -> list[User]:
        return sorted((u for u in self._users.values() if name_filter in u.username), key=lambda u: u.username)

    def acl(self, subject: str) -> Acl | None:
        return self._acls.get(subject)

    def acls(self, subject_filter: str = "", resource_filter: str = "") -> list[Acl]:
        return [
            acl
            for subject, acl in sorted(self._acls.items())
            if subject_filter in subject
            and (
                not resource_filter or any(resource_filter in str(e.resource) for p in acl.policies for e in p.entries)
            )
        ]

    def to_json(self) -> dict[str, Any]:
        with self._lock:
            return _document(self._users, self._acls)

    # -- changes ----------------------------------------------------------------------------------------------------
    def create_user(self, user: User) -> None:
        def change(users: dict[str, User], acls: dict[str, Acl]) -> None:
            if user.username in users:
                raise BadRequestError(f"user {user.username} already exists")
            users[user.username] = user

        self._change(change)

    def update_user(self, user: User) -> None:
        def change(users: dict[str, User], acls: dict[str, Acl]) -> None:
            if user.username not in users:
                raise BadRequestError(f"user {user.username} does not exist")
            users[user.username] = user

        self._change(change)

    def delete_user(self, username: str) -> None:
        def change(users: dict[str, User], acls: dict[str, Acl]) -> None:
            if users.pop(username, None) is None:
                raise BadRequestError(f"user {username} does not exist")
            acls.pop(User(username, "-").subject, None)

        self._change(change)

    def ensure_super_user(self, username: str, password: str) -> bool:
        """The bootstrap user (from the config or the environment): created as Super when missing; an existing user
        of that name is left as it is (an operator may have changed its secret since). Returns whether it created."""
        if username in self._users:
            return False
        self.create_user(User(username, password, UserType.SUPER))
        return True

    def put_acl(self, acl: Acl) -> None:
        """Create or update (RocketMQ's AUTH_CREATE_ACL and AUTH_UPDATE_ACL both merge)."""

        def change(users: dict[str, User], acls: dict[str, Acl]) -> None:
            old = acls.get(acl.subject)
            acls[acl.subject] = acl if old is None else _merged(old, acl)

        self._change(change)

    def delete_acl(
        self, subject: str, policy_type: PolicyType | None = None, resources: Iterable[ResourcePattern] = ()
    ) -> None:
        """Delete ``subject``'s ACL, or its policy of ``policy_type``, or (with ``resources``) those entries."""
        doomed = set(resources)

        def change(users: dict[str, User], acls: dict[str, Acl]) -> None:
            old = acls.get(subject)
            if old is None:
                raise BadRequestError(f"no ACL for {subject}")
            policies = []
            for policy in old.policies:
                if policy_type is not None and policy.policy_type is not policy_type:
                    policies.append(policy)
                elif doomed:
                    kept = tuple(e for e in policy.entries if e.resource not in doomed)
                    if kept:
                        policies.append(Policy(policy.policy_type, kept))
            if policies:
                acls[subject] = Acl(subject, tuple(policies))
            else:
                del acls[subject]

        self._change(change)

    def replace(self, document: Any) -> bool:
        """Take a master's document whole (a slave's metadata sync); returns whether anything changed. Raises
        BadRequestError (changing nothing) when it does not parse."""
        users, acls = _parse(document)
        with self._lock:
            if users == self._users and acls == self._acls:
                return False
            atomic_write_json(self._path, _document(users, acls), private=True)
            self._users, self._acls = users, acls
            self.version += 1
            return True

    def _change(self, change: Callable[[dict[str, User], dict[str, Acl]], None]) -> None:
        with self._lock:
            users, acls = dict(self._users), dict(self._acls)
            change(users, acls)
            atomic_write_json(self._path, _document(users, acls), private=True)  # persist first
            self._users, self._acls = users, acls
            self.version += 1
        for listener in self._listeners:
            listener()


def _merged(old: Acl, new: Acl) -> Acl:
    policies = {p.policy_type: list(p.entries) for p in old.policies}
    for policy in new.policies:
        entries = policies.setdefault(policy.policy_type, [])
        for entry in policy.entries:
            entries[:] = [e for e in entries if e.resource != entry.resource]
            entries.append(entry)
    return Acl(old.subject, tuple(Policy(t, tuple(e)) for t, e in policies.items() if e))


def _document(users: dict[str, User], acls: dict[str, Acl]) -> dict[str, Any]:
    return {
        "users": [users[name].to_json() for name in sorted(users)],
        "acls": [acls[subject].to_json() for subject in sorted(acls)],
    }


def _parse(document: Any) -> tuple[dict[str, User], dict[str, Acl]]:
    if not isinstance(document, dict):
        raise BadRequestError(f"{FILE_NAME} must hold a JSON object")
    users = [User.from_json(obj) for obj in document.get("users", [])]
    acls = [Acl.from_json(obj) for obj in document.get("acls", [])]
    return {u.username: u for u in users}, {a.subject: a for a in acls}
