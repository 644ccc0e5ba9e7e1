"""An emulated accelerator's rank after its hello, the same in every framework (device emulated; no
deep-learning import here).

A framework's emulated worker starts its communication library, says hello and builds its input
pipeline; :func:`run` does the rest with what it is handed: the measured window
(harness.machines.emulation.run_window: a real batch, the profiled sleep and the framework's barrier per
step), the checkpoint phase (harness.storage.checkpoint.phase, rank 0's folder token broadcast through
the framework), the end record (no model: nothing to checksum) and a last barrier. torch_ddp and
horovod_torch come here through frameworks/shared/pytorch/emulated_device.py (the DataLoader), tf_mwms
and horovod_tf through frameworks/shared/keras/emulated_device.py (tf.data), chainer from its own
frameworks/chainer/emulated_device.py (its iterator). Not to be confused with harness/machines/emulation.py
(the profiles and the measured window this calls), nor with harness/reports/emulation.py (its report).
"""

from __future__ import annotations

from typing import Any, Callable

from harness.contract.events import EventWriter
from harness.contract.spec import RunSpec
from harness.machines import emulation
from harness.storage import checkpoint

NO_MODEL = "none: emulated accelerator, no model"


def run(spec: RunSpec, events: EventWriter, rank: int, world: int, next_batch: Callable[[], Any], meter: Any,
        loader_processes: int, barrier: Callable[[], None], broadcast: Callable[[str], str],
        close: Callable[[], None] | None = None) -> None:
    """The window, the checkpoint phase and the end record of one emulated rank.

    ``meter``: the pipeline's stall meter (None for synthetic data); ``loader_processes``: the rank's
    loader child processes, for ``loader_busy`` (0 where the loader runs as threads in the rank);
    ``broadcast``: rank 0's token (a string) on every rank; ``close``: stops the loader after the window,
    before the checkpoint phase, so that no prefetching competes with the checkpoint's reads and writes.
    """
    emulation.run_window(spec, events, next_batch, barrier, meter, loader_processes)
    if close is not None:
        close()
    checkpoint.phase(spec, events, rank, world, barrier, broadcast)
    events.emit("end", weights_checksum=NO_MODEL, parameters=0)
    barrier()  # no rank leaves while another still needs it in a collective
