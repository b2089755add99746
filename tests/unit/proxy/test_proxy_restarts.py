"""The proxy supervisor's waits before starting a dead worker again (proxy/restarts.py)."""

from pocketmq.proxy.restarts import FIRST_DELAY_S, MAX_DELAY_S, STABLE_RUN_S, RestartBackoff


def test_a_worker_that_keeps_dying_at_start_waits_longer_each_time_up_to_the_bound():
    backoff = RestartBackoff()
    delays = [backoff.next_delay_s(ran_s=0.1) for _ in range(10)]
    assert delays[:3] == [FIRST_DELAY_S, 2 * FIRST_DELAY_S, 4 * FIRST_DELAY_S]
    assert delays == sorted(delays) and delays[-1] == MAX_DELAY_S


def test_a_worker_that_had_served_a_while_starts_again_at_once_and_the_waits_start_over():
    backoff = RestartBackoff()
    for _ in range(5):
        backoff.next_delay_s(ran_s=1.0)
    assert backoff.next_delay_s(ran_s=STABLE_RUN_S) == 0.0
    assert backoff.next_delay_s(ran_s=1.0) == FIRST_DELAY_S
