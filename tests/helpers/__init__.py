"""What more than one test file uses: the repository's root (``REPO``), tiny scenario texts (``scenarios``),
rank event records (``records``), runs and launch requests (``launch``), result rows (``rows``) and histories
(``history_rows``), the emulated cluster's scenarios (``emulated_scenarios``), a gloo group of ranks
(``gloo_group``), the Chainer-PyTorch same-weights probe, planted faults (``faults``) and a toy workload
(``toy_workload``, its PyTorch model ``toy_workload_torch``)."""

from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
