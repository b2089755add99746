"""The broker's timer: delay-level and exact-time (RocketMQ 5 timer) messages, persistent across restarts.

- ``delay``: the pure rules: the delay level table, a message's delivery time from its properties
  (``DELAY``, ``TIMER_DELIVER_MS``, ``TIMER_DELAY_SEC``, ``TIMER_DELAY_MS``), the horizon and past checks;
- ``wheel``: the pure in-memory index of pending timers, bucketed by second (16 bytes per timer);
- ``service``: the async shell: diverts delayed sends into the timer topic, tails that topic into the
  wheel, delivers due messages to their real topic with a tombstone, and rebuilds itself at start.

docs/retry.md describes the on-disk layout, the delivery guarantee and the memory bounds.
"""
