"""Gate the gate: could this series' gate see a step of the size it says it can?

Each series states its minimum detectable effect (MDE: the step down its gate confirms with 80% power from
``MDE_SWEEPS`` sweeps after it, at its own noise and launches and its level's length). The canary plants
exactly that step in a copy of the series, at each of its last ``PLACEMENTS`` places where the gate had a
level to judge against (every launch of the ``MDE_SWEEPS`` sweeps from there multiplied by 1 - the MDE the
gate stated at that place, the copy ending there), and replays the gate on each copy. The planted step is **seen** where a run of those sweeps fails CI for a step
at that place. A series whose gate saw fewer than ``NEEDED`` is **blind**: its noise or its data (busy
sweeps, a level too short) keep its gate from seeing what it states, and the dashboard says so. With a
gate that works, a blind canary is rare (at 80% power, fewer than 2 of 5 happens about once in 150 series).

The copies are made from the pass's own state at each place (no sweep is judged twice before it).
"""

from __future__ import annotations

import copy
import math
from dataclasses import dataclass
from typing import Sequence

from harness.gate import sequential

PLACEMENTS = 5
NEEDED = 2
SEEN, BLIND, NOT_RUN = "seen", "blind", "not run"


@dataclass(frozen=True)
class Canary:
    """What the planted steps showed about one series' gate."""

    planted: float  # the series' MDE now, as a step (negative: slower; each place got the MDE stated there)
    placements: int  # the places it was planted at
    seen: int  # how many of them the gate confirmed within MDE_SWEEPS sweeps
    note: str = ""

    @property
    def state(self) -> str:
        if not self.placements:
            return NOT_RUN
        return SEEN if self.seen >= min(NEEDED, self.placements) else BLIND

    @property
    def blind(self) -> bool:
        return self.state == BLIND


def run(launches: Sequence[Sequence[float]], judged: Sequence[bool], accepted: dict[int, str],
        alpha: float, floor: float, mde: float) -> Canary:
    """The canary of one series (``launches``: per sweep its launches' samples/s, as the gate reads them)."""
    n, k = len(launches), sequential.MDE_SWEEPS
    if not math.isfinite(mde):
        return Canary(math.nan, 0, 0, "not run: too few sweeps to state a minimum detectable effect")
    logs = [[math.log(r) for r in rates if math.isfinite(r) and r > 0] for rates in launches]
    gate, snapshots = sequential.Pass(alpha, floor), {}
    for p in range(n - k + 1):
        if _ready(gate):
            snapshots[p] = copy.deepcopy(gate)
        gate.add(logs[p], judged[p], accepted.get(p), str(p))
    places = sorted(snapshots)[-PLACEMENTS:]
    if not places:
        return Canary(-mde, 0, 0, f"not run: no level of {sequential.MIN_BASE} sweeps to plant a step after "
                                  f"with {k} sweeps to follow")
    seen, busy, sizes = 0, 0, []
    for p in places:
        copy_ = snapshots[p]
        size = copy_.mde()  # what the gate stated then, at that level's length and the noise known then
        sizes.append(size)
        shift = math.log1p(-size)
        for i in range(p, p + k):
            reading = copy_.add([x + shift for x in logs[i]], judged[i], accepted.get(i))
            busy += not judged[i] or not logs[i]
            if reading.fails and reading.step is not None and abs(reading.step - p) <= sequential.RELOCATE:
                seen += 1
                break
    result = Canary(-mde, len(places), seen)
    why = f"; {busy} of its planted sweeps were not judged (busy or nothing measured)" if busy else ""
    low, high = min(sizes), max(sizes)
    size = f"{-high:+.1%}" if high - low < 0.0005 else f"{-low:+.1%} to {-high:+.1%}"
    words = (f"a planted step of {size} (its minimum detectable effect there) was seen at {seen} of "
             f"{len(places)} places{why}")
    return Canary(result.planted, result.placements, seen, ("blind: " if result.blind else "") + words)


def _ready(gate: sequential.Pass) -> bool:
    """The gate has a level of enough sweeps to judge a planted step against, no suspicion open, and states
    an MDE."""
    return (bool(gate.segments) and gate.pending is None and len(gate.segments[-1].members) >= sequential.MIN_BASE
            and math.isfinite(gate.mde()))
