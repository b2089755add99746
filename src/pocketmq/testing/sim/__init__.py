"""Deterministic simulation of a PocketMQ cluster (issue 7): see docs/ha.md, "Deterministic simulation".

``run_seed(seed)`` runs a name server, two broker groups of master + slave, a producer and POP consumers on a
simulated network, disks and clock, all driven by ``random.Random(seed)``, and returns the trace and what the
checkers found. ``python -m pocketmq.testing.sim --seed S`` replays a seed exactly.
"""

from pocketmq.testing.sim.config import Bugs, SimConfig
from pocketmq.testing.sim.scenario import SimResult, replay_command, run_seed

__all__ = ["Bugs", "SimConfig", "SimResult", "replay_command", "run_seed"]
