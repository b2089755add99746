"""Transactional messages: half messages, their endings (END_TRANSACTION) and the check service (docs/transactions.md).

``records`` (the records on disk), ``decision`` (when to check, when to give up, whether an ending may apply),
``state`` (the pending half messages and the check progress) are pure; ``service`` is the async shell,
``writes`` where it writes (the store, or another group's master through the escape bridge), ``channels`` which
producer a check goes to.
"""
