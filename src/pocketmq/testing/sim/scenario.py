"""One simulated run: a name server, two broker groups of master + slave, a producer and POP consumers on a
simulated network, disks and clock, all driven by one seed.

A run has two parts. In the *chaos* part (``chaos_ms``) a fault injector, drawing from the run's generator,
kills brokers (power loss: their unflushed tail is gone) and restarts them later, cuts the network into two
sides, drops and delays messages, and makes disk reads fail. In the *settle* part every fault is healed,
every broker is up, the producer stops and the consumers ack everything they get, so every message must reach
its end (acked or dead-lettered) before the run stops. The checkers then judge the trace.
"""

from __future__ import annotations

import traceback
from dataclasses import dataclass
from functools import partial

from pocketmq.testing.sim.broker import SimBroker
from pocketmq.testing.sim.checkers import Violation, run_checkers
from pocketmq.testing.sim.clients import SimConsumer, SimProducer
from pocketmq.testing.sim.config import GROUPS, TOPIC, Bugs, SimConfig
from pocketmq.testing.sim.history import History
from pocketmq.testing.sim.kernel import Kernel
from pocketmq.testing.sim.network import LinkFaults, Network
from pocketmq.testing.sim.nodes import NAMESRV_ADDR, SimNameServer, serving_broker_id


def replay_command(seed: int, bugs: Bugs = Bugs(), config: SimConfig = SimConfig()) -> str:
    """The command that runs exactly this run again (the CLI exposes the settings that may differ)."""
    flags = "".join(f" --bug {name}" for name in sorted(bugs.names))
    if config.flush_latency_ms != SimConfig().flush_latency_ms:
        flags += " --flush-latency-ms {},{}".format(*config.flush_latency_ms)
    return f"python -m pocketmq.testing.sim --seed {seed}{flags}"


@dataclass(slots=True)
class SimResult:
    seed: int
    history: History
    violations: list[Violation]
    digest: str
    stats: dict
    replay: str  # the command that replays this run

    @property
    def ok(self) -> bool:
        return not self.violations

    def report(self) -> str:
        lines = [f"seed={self.seed} {'ok' if self.ok else 'FAILED'} trace={self.digest} {self.stats}"]
        lines += [f"  {v}" for v in self.violations[:20]]
        if len(self.violations) > 20:
            lines.append(f"  ... {len(self.violations) - 20} more")
        if not self.ok:
            lines.append(f"  replay: {self.replay}")
        return "\n".join(lines)


class _World:
    def __init__(self, seed: int, config: SimConfig, bugs: Bugs):
        self.config = config
        self.kernel = Kernel(seed)
        self.net = Network(self.kernel)
        self.history = History(self.kernel)
        args = (self.kernel, self.net, self.history, config)
        self.namesrv = SimNameServer(*args)
        self.brokers = [SimBroker(group, broker_id, *args, bugs) for group in GROUPS for broker_id in (0, 1)]
        self.producer = SimProducer(*args)
        self.consumers = [SimConsumer(f"consumer-{i}", *args) for i in range(config.consumers)]
        self.settled = False  # faults scheduled during the chaos part do not strike after it

    def start(self) -> None:
        nodes: list[SimBroker | SimProducer | SimConsumer] = [*self.brokers, self.producer, *self.consumers]
        for node in nodes:
            node.start()

    async def inject_faults(self) -> None:
        kernel, rng, config = self.kernel, self.kernel.rng, self.config
        while kernel.elapsed_ms() < config.chaos_ms:
            await kernel.sleep(rng.randint(*config.fault_interval_ms))
            if kernel.elapsed_ms() >= config.chaos_ms:
                return
            fault = rng.choice(("kill", "kill", "outage", "partition", "links", "disk"))
            length_ms = rng.randint(*config.fault_length_ms)
            if fault == "kill":
                up = [b for b in self.brokers if b.up]
                if up:
                    broker = rng.choice(up)
                    self._kill(broker)
                    kernel.after(rng.randint(*config.restart_after_ms), partial(self._restart, broker))
            elif fault == "outage":
                self._group_outage(rng.choice(GROUPS))
            elif fault == "partition":
                nodes = [b.addr for b in self.brokers] + [NAMESRV_ADDR]
                side = set(rng.sample(nodes, rng.randint(1, 2)))
                self.net.partition(side)
                self.history.record("partition", side=tuple(sorted(side)))
                kernel.after(length_ms, self._heal)
            elif fault == "links":
                self.net.faults = LinkFaults(
                    drop_probability=rng.uniform(0.0, 0.25),
                    max_delay_ms=rng.randint(5, 60),
                    spike_probability=rng.uniform(0.0, 0.1),
                )
                self.history.record("link_faults", drop=round(self.net.faults.drop_probability, 3))
                kernel.after(length_ms, self._calm_links)
            else:
                broker = rng.choice(self.brokers)
                broker.disk.read_failure_probability = rng.uniform(0.5, 1.0)
                self.history.record("disk_read_failures", broker=broker.addr)
                kernel.after(
                    length_ms + rng.randint(0, 3_000),  # a failing disk: longer than other faults
                    partial(setattr, broker.disk, "read_failure_probability", 0.0),
                )

    def _group_outage(self, group: str) -> None:
        """The master dies, its slave takes over (once the routes drop the master), then the slave dies too:
        the group is unreachable for a while, and CKs of its messages that another group revives cannot be read."""
        rng, config = self.kernel.rng, self.config
        master, slave = (b for b in self.brokers if b.group == group)
        self.history.record("outage", group=group)
        self._kill(master)
        self.kernel.after(config.broker_expire_ms + rng.randint(5_000, 9_000), lambda: self._kill(slave))
        for broker in (master, slave):
            self.kernel.after(config.broker_expire_ms + rng.randint(9_000, 17_000), partial(self._restart, broker))

    def _kill(self, broker: SimBroker) -> None:
        if broker.up and not self.settled:
            broker.kill()

    def _restart(self, broker: SimBroker) -> None:
        if not broker.up:
            broker.start()

    def _heal(self) -> None:
        if self.settled:
            return
        self.net.heal()
        self.history.record("healed")

    def _calm_links(self) -> None:
        self.net.faults = LinkFaults()

    def settle(self) -> None:
        self.net.heal()
        self._calm_links()
        for broker in self.brokers:
            broker.disk.read_failure_probability = 0.0
            self._restart(broker)
        self.settled = True
        self.producer.sending = False
        for consumer in self.consumers:
            consumer.ack_probability = 1.0
        self.history.record("settle")

    def final_state(self) -> tuple[dict[str, dict], dict[str, str]]:
        logs = {
            b.addr: {(m.topic, m.queue_id, m.queue_offset): m.uniq_key for m in b.disk.records if m.topic == TOPIC}
            for b in self.brokers
        }
        info = self.namesrv.table.cluster_info()
        readers = {}
        for group in GROUPS:
            data = info.broker_addr_table.get(group)
            addrs = dict(data.broker_addrs) if data is not None else {}
            reader_id = serving_broker_id(addrs)  # the master while it is alive (id 0 is the lowest)
            if reader_id is not None:
                readers[group] = addrs[reader_id]
        return logs, readers


def run_seed(seed: int, config: SimConfig = SimConfig(), bugs: Bugs = Bugs()) -> SimResult:
    world = _World(seed, config, bugs)
    try:
        world.start()
        world.kernel.spawn(world.inject_faults())
        world.kernel.run_until(config.chaos_ms)
        world.settle()
        world.kernel.run_until(config.chaos_ms + config.settle_ms)
    except Exception as exc:  # a real core or the model raised: report it with the seed like any other finding
        crash = traceback.extract_tb(exc.__traceback__)[-1]
        violations = [
            Violation(
                "crash",
                f"{type(exc).__name__}: {exc} at {world.kernel.elapsed_ms()} ms "
                f"({crash.filename.rsplit('/', 1)[-1]}:{crash.lineno})",
            )
        ]
    else:
        final_logs, final_readers = world.final_state()
        violations = run_checkers(world.history, final_logs, final_readers, config)
    kinds: dict[str, int] = {}
    for _, kind, _ in world.history.events:
        kinds[kind] = kinds.get(kind, 0) + 1
    stats = {
        "events": world.kernel.events_run,
        "sent_ok": kinds.get("send_ok", 0),
        "delivered": kinds.get("delivered", 0),
        "kills": kinds.get("broker_killed", 0),
        "rewrites": kinds.get("ck_rewritten", 0),
        "remote_reads": kinds.get("remote_read", 0),
        "dead_letters": kinds.get("dead_letter", 0),
    }
    return SimResult(seed, world.history, violations, world.history.digest(), stats, replay_command(seed, bugs, config))
