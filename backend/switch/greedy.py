"""HotSPa's greedy sender choice and the naive baseline."""

from __future__ import annotations

from hotswitch.backend.cluster import Cluster
from hotswitch.backend.switch.needs import SwitchNeeds
from hotswitch.backend.switch.plan import Transfer


def greedy_transfers(needs: SwitchNeeds, cluster: Cluster, itemsize: int) -> list[Transfer]:
    """Receiver owns the slice -> local copy; else the same-node owner that has sent the
    fewest intra-node bytes so far; else the other-node owner that has sent the fewest
    inter-node bytes so far (ties go to the lower rank)."""
    intra = [0] * cluster.world_size
    inter = [0] * cluster.world_size
    node = [cluster.node_of(r) for r in range(cluster.world_size)]
    out = []
    for need in needs.needs:
        receiver = need.receiver
        if receiver in need.owners:
            sender = receiver
        else:
            near = [o for o in need.owners if node[o] == node[receiver]]
            load = intra if near else inter
            sender = min(near or need.owners, key=lambda o: (load[o], o))
            load[sender] += need.box.numel * itemsize
        out.append(Transfer(need.name, need.box, sender, receiver, need.accumulate))
    return out


def naive_transfers(needs: SwitchNeeds) -> list[Transfer]:
    """Local copy if the receiver owns the slice, else its first owner sends it."""
    out = []
    for need in needs.needs:
        sender = need.receiver if need.receiver in need.owners else need.owners[0]
        out.append(Transfer(need.name, need.box, sender, need.receiver, need.accumulate))
    return out
