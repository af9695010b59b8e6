# Copyright: (c) 2026, liqo.fabric developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""A gateway pod's standby runs (controller/gateway_ha.py: the warm standby).

A replica that does not hold its gateway's Lease runs the same playbook with `fabric_gateway_standby: true` (its
tunnel built, unreachable), once its warm-up is due. Its run is cancelled when its pod takes the Lease, so that the
active run does not wait for it. Taking the Lease starts the warm runner's zygote if it was waiting and reconciles
every key by force: the warm standby's tunnel is one run from active.
"""
from __future__ import annotations

import time

from controller.engine.feature import Feature
from controller.workqueue import PRIO_DRIFT

# the reason of a standby's run cancelled because its pod became the active one
SUPERSEDED = "SupersededByActive"


class GatewayStandby(Feature):
    name = "gateway standby"

    def __init__(self, engine, gateway: dict, warmup_delay: float = 0.0):
        self.engine = engine
        self.gateway = gateway
        # a standby warms up (its zygote, its first run) only `warmup_delay` s after its start, unless it takes the
        # Lease first: both replicas of a new gateway start together, and on a node shared with the active pod its
        # warm-up would compete for the CPU with the active pod's first run (the path to Connected)
        self.warmup_at = time.monotonic() + warmup_delay

    def standby_runs(self, cs) -> bool:
        return time.monotonic() >= self.warmup_at

    def run_context(self, cs) -> tuple:
        standby = not cs.acting()
        extra = {"fabric_gateway": dict(self.gateway), "fabric_gateway_standby": standby}
        return extra, ((lambda: SUPERSEDED if cs.acting() else "") if standby else None)

    def leading(self, cs, leading: bool) -> None:
        if not leading:
            return
        self.engine.runner.prestart()   # the zygote of a standby whose warm-up was not due yet
        # the tunnel's run now, not after the informers' wait that follows the takeover
        with cs.lock:
            keys = list(cs.key_entry)
        for k in keys:
            self.engine.consider(cs, k, PRIO_DRIFT, "gateway pod active", force=True)
