"""One FSDP step on the emulated cluster (strategy fsdp, device emulated: frameworks/shared/pytorch/emulated_fsdp.py):
a small Llama decoder on 2 hosts over a 1 Gbit/s network card, bf16 gathers and fp32 reduce-scatters through
FSDP2's own hooks and gloo. What the step waits for: the root's gather before the forward and its reduce-scatter
after the backward (the embedding and the LM head: half the model), which nothing can hide; the blocks' gathers
and reduce-scatters hide behind their neighbours' layers. Were the collectives not run, or not held for, the
step would be the profile's compute; were nothing overlapped, it would be their sum on top."""

from pathlib import Path

import pytest

from harness.experiment import scenario
from tests.helpers.emulated_scenarios import scenario_text

COMPUTE_S = 0.5
LINK_BPS = 125e6  # 1gbit


def _expected_bytes() -> tuple[int, int, int]:
    """(bytes a rank hands FSDP a step, the root's, one block's parameters) for 2 ranks: a block gathers its
    bf16 shard twice (again for its backward), the root once, each reduce-scatters its fp32 whole."""
    from frameworks.shared.pytorch.training import build_model
    from harness.contract.axes import Size, Workload
    from harness.contract.workloads import WORKLOADS

    model = build_model(Workload.LLAMA, dict(WORKLOADS[Workload.LLAMA].options(Size.SMALL)))
    blocks = [m for m in model.modules() if type(m).__name__ == "LlamaBlock"]
    block = sum(p.numel() for p in blocks[0].parameters())
    root = sum(p.numel() for p in model.parameters()) - len(blocks) * block
    per_step = len(blocks) * (2 * block * 2 // 2 + block * 4) + (root * 2 // 2 + root * 4)
    return per_step, root, block


def test_one_fsdp_step_gathers_and_reduce_scatters_through_the_shaped_links(two_hosts, write_scenario, tmp_path):
    pytest.importorskip("torch")
    from harness.running.runner import run_sweep

    names = list(two_hosts)[:2]
    text = scenario_text(nodes=2, procs=1, size="small", names=names, addresses=[two_hosts[n] for n in names],
                         emulation=f'dilation = 8\nstep_variation = "none"\ncompute_s = {COMPUTE_S}',
                         extra='strategy = "fsdp"\nprecision = "amp_bf16"')
    text = text.replace('workload = "resnet50"', 'workload = "llama"').replace("batch_per_worker = 64",
                                                                               "batch_per_worker = 2")
    text = text.replace('inter_link = "10GbE"', 'inter_link = "1gbit"')
    [row] = run_sweep(scenario.load(write_scenario(text, "fsdp.toml")), tmp_path / "fsdp")
    assert row["status"] == "ok", row.get("reason")
    assert (row["strategy"], row["world_size"], row["device"]) == ("fsdp", 2, "emulated")
    per_step, root, block = _expected_bytes()
    assert row["bytes_per_step"] == per_step
    # a ring of 2 sends half of what it gathers or reduces: the root's bf16 gather and fp32 reduce-scatter
    exposed = (root * 2 + root * 4) / 2 / LINK_BPS
    every = exposed + 4 * (2 * block * 2 + block * 4) / 2 / LINK_BPS  # and the 4 blocks', none hidden
    step = row["step_time_p50_s"]
    assert COMPUTE_S + 0.8 * exposed <= step <= COMPUTE_S + 1.5 * every, (step, exposed, every)


@pytest.mark.parametrize("ranks", [2])  # 4 read 3.0 and 6.0 as well (docs/scaling.md); 2 tell them apart
def test_the_reduce_scatter_is_a_ring_where_gloos_own_is_an_allreduce(ranks):
    """Counted on a namespace's loopback: a ring reduce-scatter's ranks send (n-1)/n of the input each, (n-1) x
    it in all; gloo's own sends twice that (its allreduce's), which the emulated rank therefore does not use."""
    import os
    import shutil
    import subprocess
    import sys

    pytest.importorskip("torch")
    if os.geteuid() != 0 or shutil.which("ip") is None:
        pytest.skip("needs root and ip (a network namespace of its own, whose loopback only these ranks use)")
    name = f"rosetta-ring-{os.getpid()}"
    subprocess.run(["ip", "netns", "add", name], check=True)
    try:
        subprocess.run(["ip", "-n", name, "link", "set", "lo", "up"], check=True)
        repo = Path(__file__).resolve().parents[2]
        env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(repo), os.environ.get("PYTHONPATH", "")])}
        done = subprocess.run(["ip", "netns", "exec", name, sys.executable, "-m", "tests.helpers.ring_bytes",
                               str(ranks)], capture_output=True, text=True, timeout=240, cwd=repo, env=env)
    finally:
        subprocess.run(["ip", "netns", "del", name], check=False)
    ok, ring, own = done.stdout.split()[-3:]
    assert ok == "True", done.stderr[-2000:]
    assert float(ring) == pytest.approx(ranks - 1, rel=0.02)
    assert float(own) == pytest.approx(2 * (ranks - 1), rel=0.02)
