"""One chaos run: start the cluster behind the proxy, run the workload while the schedule's faults come and
go, heal everything, let the consumers drain, then read back what the checkers need and judge.

Phases: *chaos* (``schedule.duration_s``: traffic and faults), *heal* (every fault undone, every process that
should run started again and serving), *settle* (producers stop; consumers ack everything but poison messages
until every message sent OK ended in both groups, or ``settle_s`` passed and the drain stopped making progress,
see ``_settle``), *verdict*.
"""

from __future__ import annotations

import json
import random
import shutil
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from pocketmq.broker.pop.rewrite import DEFAULT_CK_REWRITE_BACKOFF_MS
from pocketmq.client import Admin, ClientConfig
from pocketmq.common.errors import PocketMQError
from pocketmq.common.topic import pop_retry_topic
from pocketmq.runtime.periodic import DEFAULT_JITTER
from pocketmq.testing.chaos import checkers, disk, observe
from pocketmq.testing.chaos.checkers import Finding, MetricSample
from pocketmq.testing.chaos.cluster import REVIVE_INTERVAL_MS, ChaosCluster
from pocketmq.testing.chaos.corruption import corrupt_tail
from pocketmq.testing.chaos.history import History
from pocketmq.testing.chaos.policy import OFFICIAL_GROUP, RETRY_MAX_TIMES, SDK_GROUP, TOPIC, is_poison
from pocketmq.testing.chaos.schedule import BROKERS, SERVERS, Fault, FaultKind, Schedule
from pocketmq.testing.chaos.schedule import GROUPS as BROKER_GROUPS
from pocketmq.testing.chaos.workload import OfficialClientProcess, SdkClients

GROUPS = (SDK_GROUP, OFFICIAL_GROUP)

Action = Callable[[], object]  # a fault's apply or heal (what it returns is not used)


@dataclass(frozen=True)
class ProcessControl:
    """How the schedule acts on one named process (pause and resume are None where there is no process)."""

    kill: Callable[[], None]
    start: Callable[[], None]
    pause: Callable[[], None] | None
    resume: Callable[[], None] | None


SAMPLE_INTERVAL_S = 1.0
REPLICA_CATCH_UP_S = 30.0  # a slave's time to reach its master's end once traffic stopped
SETTLE_STALL_S = 10.0  # past settle_s, the drain goes on while something was delivered, acked or dead-lettered
SETTLE_MAX_FACTOR = 3  # ... but never past this many times settle_s


@dataclass
class RunResult:
    schedule: Schedule
    findings: list[Finding]
    stats: dict[str, object]
    notes: list[str] = field(default_factory=list)
    workdir: Path | None = None
    replay_command: str | None = None  # how to run this schedule again (default: make chaos with its seed)

    @property
    def ok(self) -> bool:
        return not self.findings

    @property
    def replay(self) -> str:
        if self.replay_command:
            return self.replay_command
        return f"make chaos SEED={self.schedule.seed} DURATION={self.schedule.duration_s:g}"

    def report(self) -> str:
        lines = [f"chaos seed {self.schedule.seed}: {'PASS' if self.ok else 'FAIL'}", self.schedule.describe()]
        lines += [f"  note: {n}" for n in self.notes]
        lines.append("  stats: " + ", ".join(f"{k}={v}" for k, v in self.stats.items()))
        lines += [f"  FINDING {f}" for f in self.findings]
        if not self.ok:
            lines.append(f"  logs: {self.workdir}")
            lines.append(f"  replay: {self.replay}")
        return "\n".join(lines)


class ChaosRun:
    def __init__(self, schedule: Schedule, workdir: Path, *, settle_s: float = 60.0, replay: str | None = None):
        self.schedule = schedule
        self.replay = replay
        self.workdir = workdir
        self.settle_s = settle_s
        self.rng = random.Random(schedule.seed ^ 0x5EED)  # corruption bytes: part of the replay
        self.history = History()
        self.notes: list[str] = []
        self.findings: list[Finding] = []
        self.samples: list[MetricSample] = []
        self.excused: dict[str, set[str]] = {g: set() for g in GROUPS}  # group -> ids whose records it overwrote
        self.acks_destroyed_at: dict[str, float] = {}  # group -> when the harness overwrote one of its ACKs
        self.cks_destroyed_at: dict[str, float] = {}  # group -> when the harness overwrote one of its CKs
        self.settling = threading.Event()
        self._finished = threading.Event()
        self._crashed: set[int] = set()
        prefix = f"127.{40 + schedule.seed % 200}.{random.Random(time.time_ns()).randint(1, 250)}"
        wants_disk = FaultKind.DISK_FULL in schedule.kinds()
        self.cluster = ChaosCluster(workdir, prefix, tmpfs_broker=schedule.disk_broker if wants_disk else None)
        self._official: OfficialClientProcess | None = None  # by _start
        self._sdk: SdkClients | None = None  # by _start

    @property
    def official(self) -> OfficialClientProcess:
        if self._official is None:
            raise RuntimeError("the official client starts with the run")
        return self._official

    @property
    def sdk(self) -> SdkClients:
        if self._sdk is None:
            raise RuntimeError("the SDK clients start with the run")
        return self._sdk

    # ---- the run ---------------------------------------------------------------------------------------------
    def run(self) -> RunResult:
        result = None
        try:
            self._start()
            self._chaos()
            self._heal()
            self._settle()
            result = self._verdict()
            return result
        finally:
            self._finished.set()
            if self._sdk is not None:
                self._sdk.kill()
            if self._official is not None:
                self._official.kill()
            self.cluster.close(keep_tmpfs_copy=result is None or not result.ok)

    def _start(self) -> None:
        try:
            self.cluster.start()
        except PermissionError as exc:
            self.notes.append(f"disk_full faults skipped: {exc}")
            self.cluster.close()
            self.schedule = self.schedule.without(frozenset({FaultKind.DISK_FULL}))
            shutil.rmtree(self.workdir, ignore_errors=True)
            self.cluster = ChaosCluster(self.workdir, self.cluster.proxy_prefix)
            self.cluster.start()
        self._create_resources()
        official = self._official = OfficialClientProcess(
            self.workdir / "official", self.cluster.grpc_endpoints(), self.schedule.seed
        )
        official.start()
        self.cluster.peers.set("official", official.pid)
        sdk = self._sdk = SdkClients(self.cluster.namesrv_addr, self.schedule.seed, self.history, self.settling)
        sdk.start()
        threading.Thread(target=self._sample_loop, name="chaos-sampler", daemon=True).start()

    def _create_resources(self, timeout_s: float = 60.0) -> None:
        deadline = time.monotonic() + timeout_s
        with Admin(ClientConfig(namesrv_addr=self.cluster.namesrv_addr)) as admin:
            while True:
                try:
                    admin.create_topic(TOPIC, queues=2, update=True)  # a retry after a partial create
                    for group in GROUPS:
                        admin.create_group(group, retry_max_times=RETRY_MAX_TIMES)
                    return
                except PocketMQError as exc:
                    if time.monotonic() > deadline:
                        raise AssertionError(f"topic and groups not created within {timeout_s}s: {exc}") from exc
                    time.sleep(0.2)

    def _chaos(self) -> None:
        actions = sorted(
            [(f.at_s, 0, i, f) for i, f in enumerate(self.schedule.faults)]
            + [(f.end_s, 1, i, f) for i, f in enumerate(self.schedule.faults)],
            key=lambda a: (a[0], a[1], a[2]),
        )
        started = time.monotonic()
        for at_s, heal, _, fault in actions:
            wait_s = started + at_s - time.monotonic()
            if wait_s > 0:
                self._finished.wait(wait_s)  # a timeline, not a wait for a condition
            try:
                apply, undo = self._actions(fault)
                (undo if heal else apply)()
            except Exception as exc:  # a process that cannot start again is a finding, the run goes on
                self.findings.append(
                    Finding("fault_action_failed", f"{'heal' if heal else 'apply'} {fault.describe()}: {exc!r}"[:2000])
                )
        remaining_s = started + self.schedule.duration_s - time.monotonic()
        if remaining_s > 0:
            self._finished.wait(remaining_s)

    # ---- faults ------------------------------------------------------------------------------------------------
    def _control(self, name: str) -> ProcessControl:
        if name == "sdk":  # the harness itself: a kill abandons its clients, a start makes new ones
            return ProcessControl(self.sdk.kill, self.sdk.start, None, None)
        if name == "official":

            def start_official() -> None:
                self.official.start()
                self.cluster.peers.set("official", self.official.pid)

            return ProcessControl(self.official.kill, start_official, self.official.pause, self.official.resume)
        c = self.cluster
        return ProcessControl(
            lambda: c.kill(name), lambda: c.restart(name), lambda: c.pause(name), lambda: c.resume(name)
        )

    def _actions(self, fault: Fault) -> tuple[Action, Action]:
        """(apply, heal) of ``fault``; ValueError when this run cannot do it."""
        target, kind = fault.target, fault.kind
        if kind is FaultKind.KILL:
            control = self._control(target)
            return control.kill, control.start
        if kind is FaultKind.PAUSE:
            control = self._control(target)
            if control.pause is None or control.resume is None:
                raise ValueError(f"{target} cannot be paused")
            return control.pause, control.resume
        if kind is FaultKind.PARTITION or kind is FaultKind.DELAY:
            proxy, peer = self.cluster.proxy, fault.peer
            if proxy is None or peer is None:
                raise ValueError(f"{fault.describe()}: needs the proxy and a peer")
            if kind is FaultKind.PARTITION:
                return lambda: proxy.partition(target, peer), lambda: proxy.heal_partition(target, peer)
            return lambda: proxy.delay(target, peer, fault.delay_ms), lambda: proxy.heal_delay(target, peer)
        if kind is FaultKind.DISK_FULL:
            mount = self.cluster.mounted
            if mount is None:
                raise ValueError(f"{fault.describe()}: no tmpfs is mounted")
            return lambda: disk.fill(mount), lambda: disk.clear(mount)
        return lambda: self._corrupt(fault), self._control(target).start

    def _corrupt(self, fault: Fault) -> None:
        target = fault.target
        if fault.clean_stop:
            code = self.cluster.stop(target)
            if code != 0:
                self.findings.append(Finding("unclean_stop", f"{target} exited with {code} on SIGTERM"))
        else:
            self.cluster.kill(target)
        corruption = corrupt_tail(self.cluster.data_dir(target), fault.corrupt_bytes, self.rng)
        self.notes.append(f"corrupted {target}: {corruption.describe()}")
        for record in corruption.hit:
            for group in GROUPS:
                if record.held_message_for(TOPIC, group):
                    self.excused[group].add(record.body)
        for record in corruption.hit:
            if record.acked_group is not None:
                self.acks_destroyed_at[record.acked_group] = time.time()
            if record.checkpoint_group is not None:
                self.cks_destroyed_at[record.checkpoint_group] = time.time()

    def _heal(self, timeout_s: float = 90.0) -> None:
        """Undo whatever is still in effect (a failed restart is tried again) and wait until every server
        answers."""
        if self.cluster.proxy is not None:
            self.cluster.proxy.heal_all()
        if self.cluster.mounted is not None:
            disk.clear(self.cluster.mounted)
        for name in SERVERS:
            server = self.cluster.servers[name]
            self.cluster.resume(name)
            if server.pid is None:
                try:
                    self.cluster.restart(name)
                except Exception as exc:
                    self.findings.append(Finding("restart_failed", f"{name} at the final heal: {exc!r}"[:2000]))
        self.official.resume()
        if self.official.pid is None:
            self.official.start()
            self.cluster.peers.set("official", self.official.pid)
        deadline = time.monotonic() + timeout_s
        alive = [name for name in SERVERS if self.cluster.servers[name].pid is not None]  # a failed restart is final
        while any(self.cluster.serving(name) for name in alive):
            if time.monotonic() > deadline:
                return  # the not_serving checker names them
            time.sleep(0.5)

    # ---- settle and verdict --------------------------------------------------------------------------------------
    def _all_events(self) -> list[dict]:
        merged = History()
        merged.events = self.history.snapshot()
        merged.extend_from_jsonl(self.official.events_path)
        return merged.events

    def _unended(self, events: list[dict], dead: list[checkers.DeadLetter]) -> int:
        """How many messages sent OK or delivered have not ended yet, over both groups, as the checkers count an
        end (an ack stored without a slave's confirmation, or without an answer, does not bring its message back:
        no use waiting)."""
        all_sent_ok = {e["id"] for e in events if e["e"] == "send" and e["ok"]}
        unended = 0
        for group in GROUPS:
            sent_ok = all_sent_ok - self.excused[group]
            delivered = {e["id"] for e in events if e["e"] == "deliver" and e["group"] == group}
            unended += len((sent_ok | delivered) - checkers.ended(events, dead, group))
        return unended

    def _settle(self) -> None:
        """Until every message ended; past ``settle_s``, only while the drain still makes progress (a delivery,
        ack or dead letter within the last ``SETTLE_STALL_S``), and never past ``SETTLE_MAX_FACTOR`` times
        ``settle_s``. A loaded machine drains slowly: a consumer that comes back to a restarted broker late (the
        official client refreshes its routes every 30 s) finds a backlog there, and a poison message needs three
        deliveries behind it; cutting that off reported messages still on their way as never ended."""
        self.settling.set()
        self.official.settle()
        started = time.monotonic()
        deadline, last_change, seen = started + self.settle_s, started, None
        while True:
            try:
                dead = observe.dead_letters(self.cluster.namesrv_addr, GROUPS)
            except PocketMQError:
                dead = []
            events = self._all_events()
            if not self._unended(events, dead):
                return
            now = time.monotonic()
            progress = (len(events), len(dead))
            if progress != seen:
                seen, last_change = progress, now
            stalled = now - last_change > SETTLE_STALL_S
            if now > deadline and (stalled or now - started > SETTLE_MAX_FACTOR * self.settle_s):
                return
            time.sleep(2.0)

    def _sample_loop(self) -> None:
        while not self._finished.wait(SAMPLE_INTERVAL_S):
            for name in BROKERS:
                server = self.cluster.servers[name]
                pid, addr = server.pid, self.cluster.metrics_addr(name)
                if (
                    server.should_run
                    and server.proc.proc is not None
                    and server.proc.proc.poll() is not None
                    and server.proc.proc.pid not in self._crashed
                ):
                    self._crashed.add(server.proc.proc.pid)
                    self.findings.append(
                        Finding(
                            "crash",
                            f"{name} exited with {server.proc.proc.returncode} "
                            f"without being stopped; log tail:\n{server.proc.log_tail(15)}",
                        )
                    )
                if pid is not None and addr and not server.paused:
                    sample = observe.metric_sample(name, pid, addr)
                    if sample is not None:
                        self.samples.append(sample)

    def _slaves_behind(self, timeout_s: float = REPLICA_CATCH_UP_S) -> dict[str, str]:
        """The slaves whose log does not reach, within ``timeout_s``, where their master's ended when asked, with
        why (their replication errors); a broker that does not answer is the not_serving checker's."""
        behind: dict[str, str] = {}
        for master, slave in BROKER_GROUPS.values():
            target = self.cluster.commit_log_end(master)
            if target is None:
                continue
            deadline = time.monotonic() + timeout_s
            while (end := self.cluster.commit_log_end(slave)) is None or end < target:
                if time.monotonic() > deadline:
                    errors = [
                        line
                        for line in self.cluster.servers[slave].proc.log_tail(400).splitlines()
                        if "event=ha_replica_diverged" in line or "event=ha_replication_failed" in line
                    ]
                    last = errors[-1][:500] if errors else "no replication error logged"
                    behind[slave] = f"at {end} of {master}'s {target} after {timeout_s:.0f} s; last error: {last}"
                    break
                time.sleep(0.5)
        return behind

    def _verdict(self) -> RunResult:
        health = {name: self.cluster.serving(name) for name in SERVERS}
        health["official"] = self.official.serving()
        self.sdk.kill()
        self.official.stop()
        behind = self._slaves_behind()
        events = self._all_events()
        with open(self.workdir / "events.jsonl", "w") as out:  # for a post-mortem of a failing seed
            out.writelines(json.dumps(e) + "\n" for e in events)
        try:
            dead = observe.dead_letters(self.cluster.namesrv_addr, GROUPS)
        except PocketMQError as exc:
            dead = []
            self.findings.append(Finding("dlq_unreadable", repr(exc)))
        try:
            stored = observe.stored_messages(
                self.cluster.namesrv_addr, [TOPIC, *(pop_retry_topic(group, TOPIC) for group in GROUPS)]
            )
        except PocketMQError as exc:
            stored = []  # no message counts as stored twice: every duplicate after an ack is a finding
            self.findings.append(Finding("stored_unreadable", repr(exc)))
        stored_twice = checkers.stored_more_than_once(stored, TOPIC, GROUPS)
        findings = list(self.findings)
        findings += checkers.lost(events, dead, GROUPS, self.excused, self.cks_destroyed_at)
        findings += checkers.pop_unended(events, dead, GROUPS, self.excused, self.cks_destroyed_at)
        findings += checkers.dead_letters_without_reason(dead)
        dup_findings, dup_counts = checkers.duplicates_after_ack(events, self.acks_destroyed_at, stored_twice)
        findings += dup_findings
        findings += checkers.loops(
            self.samples, REVIVE_INTERVAL_MS, len(DEFAULT_CK_REWRITE_BACKOFF_MS), jitter=DEFAULT_JITTER
        )
        findings += checkers.not_serving(health)
        findings += checkers.not_replicating(behind)
        findings += checkers.corrupt_records_served(events)
        sends = [e for e in events if e["e"] == "send"]
        sent_ok = {e["id"] for e in sends if e["ok"]}
        stats = {
            "sent_ok": len(sent_ok),
            "send_failures": len(sends) - len(sent_ok),
            "deliveries": sum(e["e"] == "deliver" for e in events),
            "acks_ok": sum(e["e"] == "ack" and e["ok"] for e in events),
            "nacks_ok": sum(e["e"] == "nack" and e["ok"] for e in events),
            "client_errors": sum(e["e"] == "error" for e in events),
            "poison": sum(is_poison(self.schedule.seed, i) for i in sent_ok),
            "dead_letters": len(dead),
            "excused_by_corruption": len(set().union(*self.excused.values())),
            "duplicates_after_ack": sum(n for key, n in dup_counts.items() if key not in checkers.EXCUSED_DUPLICATES),
            "duplicates_excused_by_corruption": dup_counts.get("excused", 0),
            "duplicates_of_messages_stored_twice": dup_counts.get("stored_twice", 0),
        }
        return RunResult(self.schedule, findings, stats, self.notes, self.workdir, self.replay)


def run_schedule(schedule: Schedule, workdir: Path, *, settle_s: float = 60.0, replay: str | None = None) -> RunResult:
    """Run ``schedule``; ``replay`` is the command a failure report gives (for a schedule not made by
    ``generate``, e.g. a test's)."""
    workdir.mkdir(parents=True, exist_ok=True)
    result = ChaosRun(schedule, workdir, settle_s=settle_s, replay=replay).run()
    (workdir / "report.txt").write_text(result.report() + "\n")  # also for a run whose test is marked xfail
    return result
