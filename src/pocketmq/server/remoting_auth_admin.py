"""RocketMQ's user and ACL admin requests (codes 3001-3010, docs/security.md), so its own tools manage them too.

| code | request | header | body |
|---|---|---|---|
| 3001 / 3002 | AUTH_CREATE_USER / AUTH_UPDATE_USER | username | UserInfo JSON |
| 3003 / 3004 | AUTH_DELETE_USER / AUTH_GET_USER | username | reply of 3004: UserInfo (no password) |
| 3005 | AUTH_LIST_USER | filter?, withSecret? | reply: list of UserInfo (passwords only as below) |
| 3006 / 3007 | AUTH_CREATE_ACL / AUTH_UPDATE_ACL | subject | AclInfo JSON (merged into the subject's ACL) |
| 3008 | AUTH_DELETE_ACL | subject, policyType?, resource? | |
| 3009 / 3010 | AUTH_GET_ACL / AUTH_LIST_ACL | subject / subjectFilter?, resourceFilter? | reply: AclInfo / list |

Who may: access control asks for ``Cluster:<cluster>`` Update (changes) or Get (reads), so in practice a Super
user. Only a Super user makes a Super user (RocketMQ: SYSTEM_ERROR "The super user can only be create by super
user"). A blank username is INVALID_PARAMETER. Changes go to the master; a slave takes its master's users and
ACLs with the rest of the metadata and refuses changes of its own.

A secret is returned only to an authenticated Super user who asks (``withSecret=true``, PocketMQ's): the gRPC
proxy reads the users with their secrets to check its clients' signatures (docs/grpc.md, "Proxy").
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from pocketmq.auth.model import USER_SUBJECT_PREFIX, Acl, AclFormatError, PolicyType, ResourcePattern, User
from pocketmq.auth.signature import ACCESS_KEY_FIELD
from pocketmq.common.errors import BadRequestError, NoPermissionError
from pocketmq.protocol.codes import (
    AUTH_CREATE_ACL,
    AUTH_CREATE_USER,
    AUTH_DELETE_ACL,
    AUTH_DELETE_USER,
    AUTH_GET_ACL,
    AUTH_GET_USER,
    AUTH_LIST_ACL,
    AUTH_LIST_USER,
    AUTH_UPDATE_ACL,
    AUTH_UPDATE_USER,
    ResponseCode,
)
from pocketmq.protocol.command import RemotingCommand
from pocketmq.protocol.remoting_headers import json_body, json_bytes
from pocketmq.protocol.request_headers import (
    AclRequestHeader,
    DeleteAclRequestHeader,
    ListAclsRequestHeader,
    ListUsersRequestHeader,
    UserRequestHeader,
)
from pocketmq.protocol.transport import RemotingConnection, RequestRouter

if TYPE_CHECKING:
    from pocketmq.broker.broker import Broker

SUPER_BY_SUPER_ONLY = "The super user can only be create by super user"


class AuthAdminHandlers:
    def __init__(self, broker: Broker) -> None:
        self._broker = broker

    def register(self, router: RequestRouter) -> None:
        for code, handler in (
            (AUTH_CREATE_USER, self.create_user),
            (AUTH_UPDATE_USER, self.update_user),
            (AUTH_DELETE_USER, self.delete_user),
            (AUTH_GET_USER, self.get_user),
            (AUTH_LIST_USER, self.list_users),
            (AUTH_CREATE_ACL, self.put_acl),
            (AUTH_UPDATE_ACL, self.put_acl),
            (AUTH_DELETE_ACL, self.delete_acl),
            (AUTH_GET_ACL, self.get_acl),
            (AUTH_LIST_ACL, self.list_acls),
        ):
            router.register(code, handler)

    @property
    def _table(self):
        return self._broker.access.table

    def _writable_table(self):
        if self._broker.config.is_slave:
            raise NoPermissionError(f"broker {self._broker.broker_name} is a slave: change users on its master")
        return self._table

    # -- users ------------------------------------------------------------------------------------------------------
    def _user_of(self, request: RemotingCommand) -> User:
        username = _username(request)
        user = User.from_json(_body_naming(request, "user", "username", username))
        if user.username != username:
            raise BadRequestError(f"header username {username!r} and body username {user.username!r} differ")
        return user

    def _super_refusal(self, request: RemotingCommand, user: User) -> RemotingCommand | None:
        """SYSTEM_ERROR when a user who is not Super asks for a Super user (with access control on)."""
        if not user.is_super or not self._broker.access.enabled or self._caller_is_super(request):
            return None
        return request.response(ResponseCode.SYSTEM_ERROR, remark=SUPER_BY_SUPER_ONLY)

    def _caller_is_super(self, request: RemotingCommand) -> bool:
        """Whether the request is signed by a Super user (its signature was checked before it got here)."""
        caller = self._table.user(request.ext_fields.get(ACCESS_KEY_FIELD) or "")
        return caller is not None and caller.is_super

    async def create_user(self, conn: RemotingConnection, request: RemotingCommand) -> RemotingCommand:
        return self._put_user(request, create=True)

    async def update_user(self, conn: RemotingConnection, request: RemotingCommand) -> RemotingCommand:
        # what the body leaves out stays as it is (a new status without the secret, say)
        old = self._table.user(_username(request))
        if old is not None:
            obj = json_body(request.body, "user")
            if isinstance(obj, dict):
                request.body = json_bytes({**old.to_json(), **{k: v for k, v in obj.items() if v}})
        return self._put_user(request, create=False)

    def _put_user(self, request: RemotingCommand, *, create: bool) -> RemotingCommand:
        user = self._user_of(request)
        refusal = self._super_refusal(request, user)
        if refusal is not None:
            return refusal
        table = self._writable_table()
        (table.create_user if create else table.update_user)(user)
        return request.response(ResponseCode.SUCCESS)

    async def delete_user(self, conn: RemotingConnection, request: RemotingCommand) -> RemotingCommand:
        self._writable_table().delete_user(_username(request))
        return request.response(ResponseCode.SUCCESS)

    async def get_user(self, conn: RemotingConnection, request: RemotingCommand) -> RemotingCommand:
        username = _username(request)
        user = self._table.user(username)
        if user is None:
            raise BadRequestError(f"user {username} does not exist")
        return request.response(ResponseCode.SUCCESS, body=json_bytes(user.to_json(with_password=False)))

    async def list_users(self, conn: RemotingConnection, request: RemotingCommand) -> RemotingCommand:
        h = ListUsersRequestHeader.parse(request.ext_fields)
        if h.with_secret and not (self._broker.access.authentication_enabled and self._caller_is_super(request)):
            raise NoPermissionError("only an authenticated Super user may read the users' secrets")
        users = [user.to_json(with_password=h.with_secret) for user in self._table.users(h.name_filter)]
        return request.response(ResponseCode.SUCCESS, body=json_bytes(users))

    # -- ACLs -------------------------------------------------------------------------------------------------------
    async def put_acl(self, conn: RemotingConnection, request: RemotingCommand) -> RemotingCommand:
        subject = _subject(request)
        acl = Acl.from_json(_body_naming(request, "acl", "subject", subject))
        if acl.subject != subject:
            raise BadRequestError(f"header subject {subject!r} and body subject {acl.subject!r} differ")
        if self._table.user(subject[len(USER_SUBJECT_PREFIX) :]) is None:
            raise BadRequestError(f"{subject}: no such user")
        self._writable_table().put_acl(acl)
        return request.response(ResponseCode.SUCCESS)

    async def delete_acl(self, conn: RemotingConnection, request: RemotingCommand) -> RemotingCommand:
        h = DeleteAclRequestHeader.parse(request.ext_fields)
        subject = _subject(request)
        policy_type_text, resource_text = h.policy_type, h.resource
        try:
            policy_type = PolicyType(policy_type_text.strip().capitalize()) if policy_type_text.strip() else None
            resources = [ResourcePattern.parse(r) for r in resource_text.split(",") if r.strip()]
        except (ValueError, AclFormatError) as exc:
            raise BadRequestError(str(exc)) from None
        self._writable_table().delete_acl(subject, policy_type, resources)
        return request.response(ResponseCode.SUCCESS)

    async def get_acl(self, conn: RemotingConnection, request: RemotingCommand) -> RemotingCommand:
        subject = _subject(request)
        acl = self._table.acl(subject)
        if acl is None:
            raise BadRequestError(f"no ACL for {subject}")
        return request.response(ResponseCode.SUCCESS, body=json_bytes(acl.to_json()))

    async def list_acls(self, conn: RemotingConnection, request: RemotingCommand) -> RemotingCommand:
        h = ListAclsRequestHeader.parse(request.ext_fields)
        acls = self._table.acls(h.subject_filter, h.resource_filter)
        return request.response(ResponseCode.SUCCESS, body=json_bytes([acl.to_json() for acl in acls]))


def _body_naming(request: RemotingCommand, what: str, key: str, name: str):
    """The JSON body, with ``key`` set to the header's ``name`` when the body leaves it out."""
    obj = json_body(request.body, what)
    return {**obj, key: name} if isinstance(obj, dict) and not obj.get(key) else obj


def _username(request: RemotingCommand) -> str:
    username = UserRequestHeader.parse(request.ext_fields).username
    if not username.strip():
        raise BadRequestError("username must not be blank")
    return username.strip()


def _subject(request: RemotingCommand) -> str:
    subject = AclRequestHeader.parse(request.ext_fields).subject.strip()
    if not subject.startswith(USER_SUBJECT_PREFIX) or subject == USER_SUBJECT_PREFIX:
        raise BadRequestError(f"subject must be User:<name>, not {subject!r}")
    return subject
