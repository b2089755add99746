"""The typed headers of the transaction request codes (``protocol.headers``), in RocketMQ's wire names.

END_TRANSACTION (37): RocketMQ's ``EndTransactionRequestHeader``; ``commitOrRollback`` is 0 (unknown), 8 (commit)
or 12 (rollback), anything else fails as RocketMQ's ``checkFields`` does. RESUME_CHECK_HALF_MESSAGE (323):
``msgId`` is the offset message id of a record of ``TRANS_CHECK_MAX_TIME_TOPIC``. GET_TRANSACTION_STATUS
(PocketMQ's 30500): how many discarded messages to list at most.
"""

from __future__ import annotations

from pocketmq.protocol.headers import RequestHeader, boolean, choice, group_name, int32, int64, text

MAX_ID_CHARS = 128
NAME_MAX_CHARS = 255


class EndTransactionHeader(RequestHeader):
    producer_group: str = group_name("producerGroup")
    tran_state_table_offset: int = int64("tranStateTableOffset", low=0)
    commit_log_offset: int = int64("commitLogOffset", low=0)
    commit_or_rollback: str = choice("commitOrRollback", ("0", "8", "12"))
    from_transaction_check: bool = boolean("fromTransactionCheck")
    msg_id: str = text("msgId", max_chars=MAX_ID_CHARS)
    transaction_id: str | None = text("transactionId", None, max_chars=MAX_ID_CHARS)
    topic: str | None = text("topic", None, max_chars=NAME_MAX_CHARS)
    broker_name: str | None = text("bname", None, max_chars=NAME_MAX_CHARS)


class ResumeHalfHeader(RequestHeader):
    topic: str | None = text("topic", None, max_chars=NAME_MAX_CHARS)
    msg_id: str = text("msgId", max_chars=MAX_ID_CHARS)


class TransactionStatusHeader(RequestHeader):
    max_discarded: int = int32("maxDiscarded", 1000, low=0, high=100_000)
