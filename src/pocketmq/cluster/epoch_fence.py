"""Fencing of replication by the controller's epoch: what a broker under ``--controller`` knows of its group.

etcd grants each master tenure its own epoch (``cluster/controller.py``); an epoch exists only once granted, so
a broker may learn of one from etcd or from any broker that names it. ``EpochFence`` holds the newest epoch
this broker knows (``newest_seen``: raised by the failover loop at each read of etcd, and by the epochs that
replication requests and replies carry) and the epoch it serves as master (``master_epoch``, 0 when it is
not a master). Replication is fenced by it in both directions (``election.accepts_replicated``):

- a slave names its newest epoch in every HA_EPOCHS and HA_PULL_COMMIT_LOG (``controllerEpoch``); a master
  whose epoch is older refuses the request, so the slave's log end never counts as an ack there: a deposed
  master never gets a SYNC send acknowledged, and its waiting sends time out;
- a master names its epoch in the replies; a slave refuses records, and a truncation plan, from a master
  older than the newest epoch it knows.

Without a controller there is no fence (``None`` wherever one is taken): replication is as in docs/ha.md.
The last read of the group (``view``) is kept for runtime info (``pocketmq cluster``).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from pocketmq.cluster.election import accepts_replicated
from pocketmq.common.errors import NoPermissionError

EPOCH_FIELD = "controllerEpoch"  # the header field of requests (the slave's newest) and replies (the master's)


class DeposedMasterError(NoPermissionError):
    """Replication with a master of an epoch older than the newest known (NO_PERMISSION on the wire)."""


@dataclass(slots=True)
class GroupSummary:
    """The group as this broker last read it from the controller."""

    epoch: int
    master_id: int | None  # the lease holder's broker id (None: nobody holds it now)
    master_address: str
    in_sync_ids: tuple[int, ...]
    lease_id: int  # the lease the master key is on (0: none)


@dataclass(slots=True)
class EpochFence:
    newest_seen: int = 0
    master_epoch: int = 0  # the epoch this broker serves as master; 0: not a master
    view: GroupSummary | None = field(default=None)

    def saw(self, epoch: int) -> None:
        """An epoch named by etcd or by another broker (epochs only grow)."""
        self.newest_seen = max(self.newest_seen, epoch)

    def deposed(self) -> bool:
        """For a master: a newer epoch than its own exists (it must not confirm any send as replicated)."""
        return self.master_epoch > 0 and not accepts_replicated(self.master_epoch, self.newest_seen)

    def check_slave(self, slave_epoch: int | None) -> None:
        """On a master, a slave's request naming ``slave_epoch``: DeposedMasterError when this master is older."""
        if slave_epoch is not None:
            self.saw(slave_epoch)
        if not accepts_replicated(self.master_epoch, self.newest_seen):
            raise DeposedMasterError(
                f"this broker is master of epoch {self.master_epoch}, and epoch {self.newest_seen} exists: "
                "it was deposed, a slave may not follow it"
            )

    def check_master(self, master_epoch: int) -> None:
        """On a slave, a master's reply naming ``master_epoch`` (0 when it named none): DeposedMasterError when
        it is older than the newest epoch this slave knows."""
        self.saw(master_epoch)
        if not accepts_replicated(master_epoch, self.newest_seen):
            raise DeposedMasterError(
                f"the master's epoch {master_epoch} is older than epoch {self.newest_seen}: "
                "its records are refused (a deposed master)"
            )

    def runtime_info(self) -> dict[str, str]:
        info = {"controllerEpoch": str(self.newest_seen), "controllerMasterEpoch": str(self.master_epoch)}
        if self.view is not None:
            view = self.view
            info["controllerMaster"] = "" if view.master_id is None else f"{view.master_id}@{view.master_address}"
            info["controllerInSync"] = ",".join(str(i) for i in view.in_sync_ids)
            info["controllerLease"] = f"{view.lease_id:x}" if view.lease_id else ""
        return info
