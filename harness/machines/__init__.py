"""The machine and workload model: what an accelerator, a link and a step cost, with no framework in it.

``accelerators`` and ``accelerators.toml`` (profiled accelerators: their step times, their measured spread),
``emulation`` (an emulated accelerator's measured window, the same in every framework), ``emulated_cluster``
(the emulated GPU cluster: its links, time dilation and validity), ``interconnects`` and ``interconnects.toml``
(the link presets and single-GPU baselines: the emulated cluster's links and the scaling model's), ``peaks``
and ``peaks.toml`` (accelerators' dense peak FLOP/s) and ``model_flops`` (a workload's FLOPs from its options).

Imports ``harness.base`` and ``harness.contract``; frameworks' workers may import it (an emulated rank's clock).
"""
