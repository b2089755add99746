"""The soak's short form (``make soak`` runs it for 30 minutes): its verdict on RSS samples, and a 15 s run
against a real broker that must pass."""

from __future__ import annotations

import pytest

from pocketmq.testing.soak import MIB, growth_verdict, main


def test_a_steady_climb_after_the_warm_up_fails_and_a_plateau_passes():
    plateau = [(t, (60 + min(t, 50) / 5) * MIB) for t in range(0, 300, 10)]  # grows 10 MiB, then flat
    within, growth, slope = growth_verdict(plateau, 60, 16 * MIB)
    assert within and growth == 0 and slope == 0
    climb = [(t, (60 + t / 6) * MIB) for t in range(0, 300, 10)]  # +10 MiB a minute, for good
    within, growth, slope = growth_verdict(climb, 60, 16 * MIB)
    assert not within and growth > 30 * MIB and round(slope / MIB) == 10
    with pytest.raises(ValueError):
        growth_verdict(climb[:7], 60, 16 * MIB)


@pytest.mark.timeout(90)
def test_a_short_soak_passes(tmp_path, capsys):
    assert (
        main(
            [
                "--minutes",
                "0.25",
                "--warmup-minutes",
                "0.1",
                "--sample-s",
                "1.5",
                "--rate",
                "200",
                "--data-dir",
                str(tmp_path),
            ]
        )
        == 0
    )
    out = capsys.readouterr().out
    assert "soak: PASS" in out and "rss_mib" in out
