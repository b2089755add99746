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
