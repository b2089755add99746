"""The consumers' choices are a pure function of seed, id and attempt."""

from __future__ import annotations

from collections import Counter

from pocketmq.testing.chaos.policy import Disposition, disposition, is_poison


def test_choices_repeat_and_settling_acks_all_but_poison():
    ids = [f"s{i}" for i in range(2000)]
    assert [disposition(5, i, 1, False) for i in ids] == [disposition(5, i, 1, False) for i in ids]
    poison = [i for i in ids if is_poison(5, i)]
    assert 20 <= len(poison) <= 120  # about 3 %
    for i in ids:
        expected = Disposition.DROP if i in poison else Disposition.ACK
        assert disposition(5, i, 3, True) is expected
    shares = Counter(disposition(5, i, 1, False) for i in ids if i not in poison)
    assert shares[Disposition.ACK] > shares[Disposition.NACK] > 0 and shares[Disposition.DROP] > 0


def test_act_calls_the_client_and_records_the_outcome():
    from pocketmq.testing.chaos.policy import act

    recorded, calls = [], []

    def record(kind, **fields):
        recorded.append((kind, fields["id"], fields.get("ok"), fields.get("no_answer", False)))

    ids = {
        d: next(i for i in (f"s{n}" for n in range(500)) if disposition(1, i, 1, False) is d and not is_poison(1, i))
        for d in Disposition
    }
    act(
        record,
        "g",
        1,
        ids[Disposition.ACK],
        1,
        False,
        ack=lambda: calls.append("ack"),
        nack=lambda: calls.append("nack"),
        errors=(OSError,),
    )
    act(
        record,
        "g",
        1,
        ids[Disposition.DROP],
        1,
        False,
        ack=lambda: calls.append("ack"),
        nack=lambda: calls.append("nack"),
        errors=(OSError,),
    )

    def failing_nack():
        raise OSError("broker gone")

    act(record, "g", 1, ids[Disposition.NACK], 1, False, ack=lambda: None, nack=failing_nack, errors=(OSError,))
    act(
        record,
        "g",
        1,
        ids[Disposition.NACK],
        1,
        False,
        ack=lambda: None,
        nack=failing_nack,
        errors=(OSError,),
        unanswered=lambda exc: isinstance(exc, OSError),
    )
    assert calls == ["ack"]
    assert recorded == [
        ("ack_sent", ids[Disposition.ACK], None, False),
        ("ack", ids[Disposition.ACK], True, False),
        ("nack_sent", ids[Disposition.NACK], None, False),
        ("nack", ids[Disposition.NACK], False, False),
        ("nack_sent", ids[Disposition.NACK], None, False),
        ("nack", ids[Disposition.NACK], False, True),  # the broker's answer never came: it may have stored it
    ]
