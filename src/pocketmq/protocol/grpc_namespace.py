"""Namespaces of v2 requests: a topic or group of namespace ``ns`` is the broker's ``ns%name``.

That is the name a RocketMQ 4.x/5.x remoting client configured with namespace ``ns`` sends (its
``NamespaceUtil``: ``ns%orders``, ``%RETRY%ns%group``), so the two protocols meet in the same topics and groups,
and two namespaces never share one: ``a%orders`` and ``b%orders`` are different topics to the store.

A v2 client names the namespace on each ``Resource`` (``resource_namespace``: the Python client sets it
everywhere) or once per call in the ``x-mq-namespace`` header (the Node client sets it, and the namespace of
only some resources). ``wrap`` rewrites every ``Resource`` of a request, however deep (a Telemetry command's
publishing topics and subscriptions, a message's topic ...), to the broker's name with no namespace;
``unwrap`` turns the names of that namespace in a response back into (namespace, name), so a client sees its own
names. The servicer sees broker names only.
"""

from __future__ import annotations

from google.protobuf.descriptor import FieldDescriptor
from rocketmq.grpc_protocol import definition_pb2 as pb

NAMESPACE_HEADER = "x-mq-namespace"
SEPARATOR = "%"
_RESOURCE = pb.Resource.DESCRIPTOR.full_name
_MESSAGE = FieldDescriptor.TYPE_MESSAGE
_CONTAINERS_CACHE: dict[str, tuple[tuple[str, bool, bool], ...]] = {}


def namespaced(namespace: str, name: str) -> str:
    """The broker's name of ``name`` in ``namespace`` (``name`` itself without one)."""
    return f"{namespace}{SEPARATOR}{name}" if namespace and name else name


def wrap(message, header_namespace: str) -> str:
    """Rewrite every Resource in ``message`` (in place) to its broker name; returns the namespace the request
    used (its first namespaced resource's, else the header's), which ``unwrap`` of its answers takes."""
    found: list[str] = []

    def rewrite(resource) -> None:
        own = resource.resource_namespace
        if own and not found:
            found.append(own)
        namespace = own or header_namespace
        if namespace:
            resource.name = namespaced(namespace, resource.name)
            resource.resource_namespace = ""

    _visit(message, rewrite)
    return found[0] if found else header_namespace


def unwrap(message, namespace: str):
    """Give the broker names of ``namespace`` in ``message`` (in place) back as (namespace, name); returns it."""
    if not namespace:
        return message
    prefix = namespace + SEPARATOR

    def rewrite(resource) -> None:
        if resource.name.startswith(prefix) and not resource.resource_namespace:
            resource.name = resource.name[len(prefix) :]
            resource.resource_namespace = namespace

    _visit(message, rewrite)
    return message


def _visit(message, visit) -> None:
    """Call ``visit`` on every Resource set in ``message`` (depth first, repeated fields too)."""
    for name, repeated, is_resource in _containers(message.DESCRIPTOR):
        if repeated:
            for item in getattr(message, name):
                visit(item) if is_resource else _visit(item, visit)
        elif message.HasField(name):
            child = getattr(message, name)
            visit(child) if is_resource else _visit(child, visit)


def _containers(descriptor) -> tuple[tuple[str, bool, bool], ...]:
    """(name, repeated, is a Resource) of each field of ``descriptor`` that is, or may hold, a Resource (cached
    per message type: a request walks only the paths that can lead to one)."""
    cached = _CONTAINERS_CACHE.get(descriptor.full_name)
    if cached is None:
        _CONTAINERS_CACHE[descriptor.full_name] = ()  # a recursive type is not entered again while being built
        cached = _CONTAINERS_CACHE[descriptor.full_name] = tuple(
            (f.name, f.is_repeated, f.message_type.full_name == _RESOURCE)
            for f in descriptor.fields
            if f.type == _MESSAGE
            and not f.message_type.GetOptions().map_entry
            and (f.message_type.full_name == _RESOURCE or _containers(f.message_type))
        )
    return cached
