"""Precision, memory format and XLA compilation in the TensorFlow frameworks (tf_mwms, horovod_tf), and
Chainer's fp32-only declaration: declared support, skipped rows with their reasons, real runs on CPU.

TensorFlow is imported only in worker and helper processes, never in the test process.
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
import textwrap

import pytest

import frameworks
from harness.contract.axes import Compile, Device, MemoryFormat, Precision, Workload
from harness.experiment import scenario
from harness.running.runner import run_sweep
from tests.helpers import REPO
from tests.helpers.records import rank_events

needs_tf = pytest.mark.skipif(importlib.util.find_spec("tensorflow") is None,
                              reason="tensorflow is not installed (pip install -e '.[tf]')")
TF_FRAMEWORKS = ("tf_mwms", "horovod_tf")


@pytest.mark.parametrize("name", TF_FRAMEWORKS)
def test_tf_declares_every_precision_gpu_only_ones_for_cuda(name):
    info = frameworks.get(name)
    ask = lambda precision, device, workload=Workload.RESNET50, fmt=MemoryFormat.CONTIGUOUS, compile_=Compile.OFF: \
        info.unsupported_numerics(workload, precision, fmt, compile_, device)  # noqa: E731
    for precision in (Precision.AMP_FP16, Precision.TF32):
        assert ask(precision, Device.CPU) == f"precision {precision.value} needs a CUDA GPU (device is cpu)"
        assert ask(precision, Device.AUTO) is None  # may find a GPU: the worker says if it does not
    assert ask(Precision.AMP_BF16, Device.CPU, compile_=Compile.ON) is None
    assert ask(Precision.FP32, Device.CPU, fmt=MemoryFormat.CHANNELS_LAST) is None  # the Keras ResNet is NHWC
    assert ask(Precision.FP32, Device.CPU, workload=Workload.BERT, fmt=MemoryFormat.CHANNELS_LAST) == \
        f"{name} bert has no channels_last memory format"


def test_chainer_has_fp32_only():
    info = frameworks.get("chainer")
    assert info.precisions == (Precision.FP32,) and info.compiles == (Compile.OFF,)
    for precision in (Precision.AMP_BF16, Precision.AMP_FP16, Precision.TF32):
        assert info.unsupported_numerics(Workload.RESNET50, precision, MemoryFormat.CONTIGUOUS, Compile.OFF,
                                         Device.AUTO) == f"chainer has no {precision.value} precision"
    assert info.unsupported_numerics(Workload.RESNET50, Precision.FP32, MemoryFormat.CONTIGUOUS, Compile.ON,
                                     Device.CPU) == "chainer cannot compile the model (compile = on)"


SCENARIO = """
name = "tf-numerics"
[settings]
warmup_steps = 1
measured_steps = 3
repeats = 1
timeout_s = 300
device = "{device}"
[matrix]
framework = {frameworks}
workload = "resnet50"
size = "tiny"
procs_per_node = {procs}
batch_per_worker = 2
precision = {precision}
compile = "{compile}"
"""


def _scenario(write_scenario, device="cpu", frameworks='"tf_mwms"', procs=1, precision='"fp32"', compile_="off"):
    return scenario.load(write_scenario(SCENARIO.format(device=device, frameworks=frameworks, procs=procs,
                                                        precision=precision, compile=compile_)))


def test_gpu_only_precisions_on_a_cpu_are_skipped_rows_with_the_reason(write_scenario, tmp_path):
    rows = run_sweep(_scenario(write_scenario, frameworks='["tf_mwms", "horovod_tf", "chainer"]',
                               precision='["tf32", "amp_fp16"]'), tmp_path / "results")
    assert len(rows) == 6 and {r["status"] for r in rows} == {"skipped"}
    for row in rows:
        if row["framework"] == "chainer":
            assert row["reason"] == f"chainer has no {row['precision']} precision"
        else:
            assert row["reason"] == f"precision {row['precision']} needs a CUDA GPU (device is cpu)"


@needs_tf
def test_device_auto_without_a_gpu_the_worker_skips_amp_fp16(write_scenario, tmp_path):
    """device auto may find a GPU, so the run is launched; the worker finds none and says so (a skip, not a failure)."""
    if importlib.util.find_spec("horovod") is None:
        names = '"tf_mwms"'
    else:
        names = '["tf_mwms", "horovod_tf"]'
    rows = run_sweep(_scenario(write_scenario, device="auto", frameworks=names, precision='"amp_fp16"'),
                     tmp_path / "results")
    assert [r["status"] for r in rows] == ["skipped"] * len(rows), [r["reason"] for r in rows]
    assert all(r["reason"].startswith("rank 0: precision amp_fp16 needs a CUDA GPU; none found") for r in rows), \
        [r["reason"] for r in rows]


@needs_tf
def test_xla_compiled_step_on_two_workers(write_scenario, tmp_path):
    """compile = on: the first step (tracing and XLA compilation) is timed apart before warm-up into
    compile_s; the XLA-compiled ranks still all-reduce to identical weights."""
    (row,) = run_sweep(_scenario(write_scenario, procs=2, compile_="on"), tmp_path / "results")
    assert row["status"] == "ok", row["reason"]
    assert row["compile"] == "on" and row["compile_s"] > 0
    assert row["compile_s"] > 3 * row["step_time_p50_s"]  # compiling dwarfs a step: it was kept out of the window
    assert row["weights_consistent"] is True and row["layout"] == "NHWC"
    for rank in range(2):
        events = rank_events(row, rank)
        kinds = [e["event"] for e in events]
        assert kinds.index("compile") < kinds.index("step")  # before warm-up
        hello = events[kinds.index("hello")]
        assert hello["dtype_policy"] == "float32" and hello["tf32"] is False


PRECISION_STATE = textwrap.dedent("""
    import json
    import tensorflow as tf
    from frameworks.shared.keras import runtime
    from harness.contract.axes import Precision

    states = {}
    for precision in ("tf32", "fp32", "amp_bf16", "tf32", "amp_fp16"):
        facts = runtime.set_precision(Precision(precision))
        states[precision] = [facts["tf32"], tf.config.experimental.tensor_float_32_execution_enabled(),
                             facts["dtype_policy"]]
    print(json.dumps(states))
""")


def _python(code: str) -> str:
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300,
                          cwd=REPO, env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2"})
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout.strip().splitlines()[-1]


@needs_tf
def test_fp32_turns_tensorfloat32_off():
    """TensorFlow allows TF32 by default (on Ampere and later GPUs): fp32 must switch it off, even after
    a tf32 run set it on; only tf32 leaves it on. Read back from TensorFlow, not from our own flag."""
    states = json.loads(_python(PRECISION_STATE))
    assert states["fp32"] == [False, False, "float32"]
    assert states["tf32"] == [True, True, "float32"]
    assert states["amp_bf16"] == [False, False, "mixed_bfloat16"]
    assert states["amp_fp16"] == [False, False, "mixed_float16"]


LOSS_SCALING = textwrap.dedent("""
    import json
    import numpy as np
    import keras, tensorflow as tf
    from frameworks.shared.keras import runtime, training
    from harness.contract.axes import Precision, Size, Workload
    from harness.contract.equivalence import recipe
    from harness.contract.workloads import WORKLOADS

    cpu = tf.config.list_physical_devices("CPU")[0]
    tf.config.set_logical_device_configuration(cpu, [tf.config.LogicalDeviceConfiguration()] * 2)
    runtime.set_precision(Precision.AMP_FP16)
    workload = Workload.RESNET50
    options = WORKLOADS[workload].options(Size.TINY)
    strategy = tf.distribute.MirroredStrategy(["/cpu:0", "/cpu:1"])
    with strategy.scope():
        keras.utils.set_random_seed(0)
        model = training.build_model(workload, options)
        optimization = training.with_loss_scaling(training.optimization_from_recipe(recipe(workload, 4)),
                                                  Precision.AMP_FP16)
        optimization.optimizer.build(model.trainable_variables)

    step = training.build_train_step(workload, model, optimization,
                                     training.GradientExchange(share=0.5))
    good = [training.synthetic_batch(workload, options, 2, 0, r) for r in range(2)]
    bad = [good[0], {**good[1], "images": good[1]["images"] * np.inf}]  # only replica 1's gradients overflow
    feed = tf.Variable(0)  # which batches this step gets, so that one traced function serves both

    @tf.function
    def run():
        values = strategy.experimental_distribute_values_from_function(
            lambda ctx: tf.nest.map_structure(lambda g, b: tf.where(feed == 1, b, g),
                                              good[ctx.replica_id_in_sync_group], bad[ctx.replica_id_in_sync_group]))
        return strategy.run(step, args=(values,))

    def weights():
        return [np.stack([keras.ops.convert_to_numpy(c) for c in strategy.experimental_local_results(v.value)])
                for v in model.trainable_variables]

    lso = optimization.optimizer
    before, scales = weights(), [float(lso.dynamic_scale.numpy())]
    feed.assign(1)
    run()
    skipped = all(np.array_equal(a, b) for a, b in zip(before, weights()))
    scales.append(float(lso.dynamic_scale.numpy()))
    feed.assign(0)
    for _ in range(4):
        run()
        scales.append(float(lso.dynamic_scale.numpy()))
    after = weights()
    print(json.dumps({"skipped": skipped, "scales": scales, "moved": any(not np.array_equal(a, b)
                      for a, b in zip(before, after)), "replicas_equal": all(np.array_equal(w[0], w[1]) for w in after),
                      "compute_dtype": model.layers[0].compute_dtype}))
""")


@needs_tf
def test_float16_loss_scaling_skips_a_step_on_every_replica_or_none():
    """amp_fp16 runs on GPUs only in the harness; its step is checked here on two CPU replicas. Keras's
    LossScaleOptimizer wraps the recipe's optimizer; when only one replica's gradients overflow, both
    replicas skip the step (none waits in an all-reduce the other skipped, no NaN reaches the weights),
    the loss scale halves, and later finite steps train with the replicas equal."""
    found = json.loads(_python(LOSS_SCALING))
    assert found["compute_dtype"] == "float16"
    assert found["skipped"] is True
    assert found["scales"][1] == found["scales"][0] / 2
    assert found["scales"][-1] == found["scales"][-2]  # settled: finite gradients at this scale
    assert found["moved"] is True and found["replicas_equal"] is True


LOSS_SCALED_L2 = textwrap.dedent("""
    import numpy as np
    import keras, tensorflow as tf
    from frameworks.shared.keras import training
    from harness.contract.axes import Precision, Size, Workload
    from harness.contract.equivalence import recipe
    from harness.contract.workloads import WORKLOADS

    workload = Workload.RESNET50
    options = WORKLOADS[workload].options(Size.TINY)
    batch = training.synthetic_batch(workload, options, 2, 0, 0)

    def trained(scaled):
        keras.utils.set_random_seed(0)
        model = training.build_model(workload, options)
        optimizer = training.optimization_from_recipe(recipe(workload, 2)).optimizer
        if scaled:  # float32 compute, so that only the loss scaling differs
            optimizer = keras.optimizers.LossScaleOptimizer(optimizer)
        optimization = training.Optimization(optimizer, l2=0.01)  # 100x the recipe's: an effect to see
        optimization.optimizer.build(model.trainable_variables)
        step = tf.function(training.build_train_step(workload, model, optimization))
        for _ in range(2):
            step(batch)
        return [keras.ops.convert_to_numpy(v.value) for v in model.trainable_variables]

    plain, scaled = trained(False), trained(True)
    print(max(float(np.max(np.abs(a - b))) for a, b in zip(plain, scaled)), flush=True)
""")


@needs_tf
def test_loss_scaling_scales_the_l2_term_with_the_gradient():
    """The recipe's coupled L2 term is added to the scaled gradients, which the LossScaleOptimizer then
    divides by its scale (2**15): the term must be scaled too. In float32 a power-of-two scale is exact,
    so with it the weights match the unscaled step's; unscaled, the weight decay would all but vanish."""
    assert float(_python(LOSS_SCALED_L2)) < 1e-6  # exactly 0.0 here; unscaled L2: 2.6e-5 apart
