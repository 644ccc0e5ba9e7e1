"""TensorFlow's own parameter-server training, strategy ps_async: tf.distribute.ParameterServerStrategy with
a ClusterCoordinator and a custom loop (Keras 3's model.fit does not run under this strategy, keras#18624).

Roles (cluster.parameter_server_roles): rank 0 is the chief, TensorFlow's coordinator; ranks 1..servers
are parameter servers; the rest are workers. Servers and workers are tf.distribute.Servers that only
serve. The coordinator builds the model under the strategy's scope, which puts every variable (whole
variables, round-robin) and the optimizer's state on the servers, and queues one ``tf.function`` step
per worker step with ``coordinator.schedule``. A free worker takes the next queued step: it reads the
variables from the servers, computes the gradient of a batch of its own data shard and applies it on
the servers, waiting for no other worker. That is Downpour SGD (Dean et al. 2012), as torch_ddp's
ps_async, with two differences: TensorFlow has no staleness bound (``max_staleness`` must be -1), and
the servers are processes of their own, not ranks that also train.

Measurement as everywhere: global samples over the measured window. The coordinator's window runs
from the warm-up's end (``coordinator.join``) to the last step's end (a join again), so it holds every
worker's measured steps; the steps are counted per worker, from which step ran where
(``experimental_get_current_worker_index``) and the worker's own clock (``tf.timestamp``) at its start
and end. Only the coordinator sees all this, so after training it writes the run's account to the run's
folder (cluster.publish_report) and every other rank writes its own records from it: a worker its steps,
window, losses, staleness and bytes; a server its ``server`` record. Evaluations (digits) run on the
coordinator beside the training, which does not wait for them, after a worker's n-th step in the queue.

Staleness of an update: the updates other workers applied between this step's first read and its own
update, from a counter on the servers read before the step's forward pass and incremented after its
update (assign_add returns the new count atomically). Bytes are counted, not measured on the wire: a
step reads each variable once and sends one gradient for each (TensorFlow gives no per-server byte
counters), so a server takes in and sends out its variables' bytes once per update.
"""

from __future__ import annotations

import os
import time
from typing import Any

import keras
import numpy as np
import tensorflow as tf

from frameworks.shared.keras import digits, runtime, training
from frameworks.tf_mwms import cluster
from harness.contract.axes import Compile, Device, MemoryFormat, Precision
from harness.contract.equivalence import recipe
from harness.contract.events import EventWriter
from harness.contract.spec import RunSpec

RENDEZVOUS_TIMEOUT_S = 300.0


def problem(spec: RunSpec, world: int) -> str | None:
    """Why this run cannot go ahead here (every rank finds the same, before the cluster forms), or None."""
    options = dict(spec.strategy_options)
    servers = int(options["servers"])
    if world < servers + 2:
        return (f"TensorFlow's parameter-server cluster needs a coordinator, {servers} server(s) and a worker: "
                f"at least {servers + 2} processes, not {world}")
    if int(options.get("max_staleness", -1)) != -1:
        return "TensorFlow's ParameterServerStrategy has no staleness bound: max_staleness must be -1"
    if "TF_CONFIG" in os.environ:
        return "TF_CONFIG is set (a TFJob's workers only): the parameter-server roles come from the run's ranks"
    asked = [f"{name} {value.value}" for name, value, plain in
             (("precision", spec.precision, Precision.FP32), ("compile", spec.compile, Compile.OFF),
              ("memory_format", spec.memory_format, MemoryFormat.CONTIGUOUS)) if value != plain]
    if asked:
        return f"strategy ps_async trains in fp32, uncompiled, contiguous; asked: {', '.join(asked)}"
    return None


def set_threads(workers: int) -> dict[str, int]:
    """Intra-op threads as every TensorFlow worker sets them; inter-op threads at least workers + 1.

    With 2 inter-op threads on 2 cores, TensorFlow's in-process parameter-server cluster deadlocked: the
    coordinator dispatches to every worker at once and a server serves every worker's reads and updates
    at once, each holding an inter-op thread while it waits on the others. workers + 1 leaves one free.
    """
    threads = runtime.configure_threads()
    inter = max(threads["inter_op_threads"], workers + 1)
    tf.config.threading.set_inter_op_parallelism_threads(inter)
    return {**threads, "inter_op_threads": inter}


def main(spec: RunSpec, events: EventWriter) -> None:
    rank, world = int(os.environ.get("RANK", 0)), int(os.environ.get("WORLD_SIZE", 1))
    reason = problem(spec, world)
    if reason:
        events.emit("skip", reason=reason)
        return
    servers = int(dict(spec.strategy_options)["servers"])
    roles = cluster.parameter_server_roles(world, servers)
    threads = set_threads(roles.count("worker"))
    runtime.resolve_device(Device.CPU, 0)  # CPU only: the GPUs, if any, are hidden
    config = cluster.tf_config(events.out_dir, rank, world, single_host=spec.nodes == 1, env=os.environ,
                               timeout_s=min(RENDEZVOUS_TIMEOUT_S, spec.timeout_s), roles=roles)
    events.hello(world, "cpu", runtime.versions(), backend="grpc", role=roles[rank], trains=roles[rank] == "worker",
                 **threads, gpu_model=None, gpu_count=0)
    resolver = tf.distribute.cluster_resolver.SimpleClusterResolver(
        tf.train.ClusterSpec(config["cluster"]), task_type=config["task"]["type"],
        task_id=config["task"]["index"], rpc_layer="grpc")
    if roles[rank] == "chief":
        report = coordinate(spec, events, resolver, servers, roles.count("worker"))
        cluster.publish_report(events.out_dir, report)
        return
    server = tf.distribute.Server(resolver.cluster_spec(), job_name=config["task"]["type"],
                                  task_index=config["task"]["index"], protocol="grpc", start=True)
    report = cluster.wait_report(events.out_dir, spec.timeout_s)  # the server serves until then
    if roles[rank] == "worker":
        emit_worker(spec, events, report, report["workers"][rank - 1 - servers])
    else:
        events.emit("server", **report["servers"][rank - 1])
    events.emit("end", **report["end"])
    del server


def coordinate(spec: RunSpec, events: EventWriter, resolver, servers: int, workers: int) -> dict[str, Any]:
    """Train as the coordinator; returns the report every other rank writes its records from."""
    strategy = tf.distribute.ParameterServerStrategy(resolver)
    coordinator = tf.distribute.coordinator.ClusterCoordinator(strategy)
    data = digits.load()
    options = dict(spec.workload_options)
    with strategy.scope():  # variables and optimizer state on the servers
        keras.utils.set_random_seed(spec.seed)
        model = digits.build_model(options)
        # Downpour's rule, as torch_ddp's ps_async: one update per worker's batch, the recipe at that batch
        optimization = training.optimization_from_recipe(recipe(spec.workload, spec.batch_per_worker, options))
        optimization.optimizer.build(model.trainable_variables)
        clock = tf.Variable(0, dtype=tf.int64, trainable=False, name="updates_applied")

    def dataset_fn(_context):  # built on each worker, which shards the training images by its index
        index = tf.distribute.coordinator.experimental_get_current_worker_index()
        return digits.shard(data, index, workers, spec.batch_per_worker, spec.seed)

    @tf.function
    def per_worker_dataset():
        return strategy.distribute_datasets_from_function(dataset_fn)

    iterator = iter(coordinator.create_per_worker_dataset(per_worker_dataset))
    step = build_step(strategy, model, optimization, clock)
    results: list[Any] = []
    evaluations = int(options.get("eval_every", 0))

    def phase(first: int, last: int) -> None:
        """Queue steps first..last of every worker (1-based), evaluate after each worker's n-th, wait."""
        for _ in range((last - first + 1) * workers):
            results.append(coordinator.schedule(step, args=(iterator,)))
        for done in range(first, last + 1):
            if evaluations and done % evaluations == 0:
                results[done * workers - 1].fetch()  # the queue's (done x workers)-th step has ended
                accuracy, loss = digits.evaluate(model, data)
                events.emit("eval", step=done, accuracy=accuracy, loss=loss)
        coordinator.join()

    phase(1, spec.warmup_steps)
    window_start, wall_start = time.perf_counter(), time.time()
    phase(spec.warmup_steps + 1, spec.warmup_steps + spec.measured_steps)
    window = {"seconds": time.perf_counter() - window_start, "samples": 0, "steps": 0,
              "start_time": wall_start, "end_time": time.time()}
    outputs = [{k: v.item() for k, v in r.fetch().items()} for r in results]
    warmup, measured = outputs[:spec.warmup_steps * workers], outputs[spec.warmup_steps * workers:]
    events.emit("window", **window)
    events.emit("losses", values=[o["loss"] for o in measured])  # every update of the window, in queue order
    end = {"weights_checksum": training.weights_checksum(model), "parameters": training.parameter_count(model),
           "layout": None}
    events.emit("end", **end, final_accuracy=digits.evaluate(model, data)[0])
    dense = runtime.dense_bytes(model.trainable_variables)
    return {"end": end, "dense_bytes": dense,
            "workers": [worker_account(warmup, measured, w) for w in range(workers)],
            "servers": [server_account(model, s, len(measured), spec.measured_steps) for s in range(servers)]}


def build_step(strategy, model: keras.Model, optimization: training.Optimization, clock: tf.Variable):
    """One worker step (a tf.function the coordinator schedules): loss, staleness, where and when it ran."""
    variables = model.trainable_variables
    sources = [v.value for v in variables]
    optimizer, l2 = optimization.optimizer, optimization.l2

    def replica_step(batch) -> dict[str, tf.Tensor]:
        started = tf.timestamp()
        read = clock.read_value()
        with tf.control_dependencies([read]):  # the count before this step reads any variable
            with tf.GradientTape() as tape:
                loss = digits.loss_of(model, batch)
            grads = tape.gradient(loss, sources)
        if l2:  # the recipe's coupled L2, as training.build_train_step adds it
            grads = [g + l2 * s for g, s in zip(grads, sources)]
        optimizer.apply_gradients(zip(grads, variables))
        with tf.control_dependencies([optimizer.iterations.value.read_value()]):  # after the update
            applied = clock.assign_add(1)
        return {"loss": loss, "staleness": applied - 1 - read, "started": started, "finished": tf.timestamp(),
                "worker": tf.cast(tf.distribute.coordinator.experimental_get_current_worker_index(), tf.int64)}

    @tf.function
    def step(iterator) -> dict[str, tf.Tensor]:
        return strategy.run(replica_step, args=(next(iterator),))

    return step


def step_seconds(outputs: list[dict[str, Any]]) -> list[float]:
    """A worker's step times (s) on its own clock, in the order it ran them: from the end of its previous
    step (the first from its own start), so the time it waited for the next queued step counts."""
    times, previous = [], None
    for o in outputs:
        times.append(o["finished"] - (o["started"] if previous is None else previous))
        previous = o["finished"]
    return times


def worker_account(warmup: list[dict[str, Any]], measured: list[dict[str, Any]], worker: int) -> dict[str, Any]:
    mine = [o for o in measured if o["worker"] == worker]
    seconds = step_seconds(mine)
    return {"warmup": step_seconds([o for o in warmup if o["worker"] == worker]), "measure": seconds,
            "losses": [o["loss"] for o in mine], "staleness": [int(o["staleness"]) for o in mine],
            "start_time": mine[0]["started"] if mine else None, "end_time": mine[-1]["finished"] if mine else None}


def server_account(model: keras.Model, server: int, updates: int, measured_steps: int) -> dict[str, float]:
    """Payload a server took in (gradients) and sent out (variables) per measured step, counted."""
    held = [v for v in model.trainable_variables if tf.DeviceSpec.from_string(v.value.device).task == server]
    payload = runtime.dense_bytes(held) * updates / measured_steps
    return {"bytes_in_per_step": payload, "bytes_out_per_step": payload}


def emit_worker(spec: RunSpec, events: EventWriter, report: dict[str, Any], mine: dict[str, Any]) -> None:
    """A worker rank's records, from the coordinator's account of its steps."""
    batch = spec.batch_per_worker
    for index, seconds in enumerate(mine["warmup"]):
        events.emit("step", phase="warmup", index=index, seconds=seconds, samples=batch)
    for index, seconds in enumerate(mine["measure"]):
        events.emit("step", phase="measure", index=index, seconds=seconds, samples=batch)
    steps = len(mine["measure"])
    events.emit("window", seconds=float(np.sum(mine["measure"])), samples=batch * steps, steps=steps,
                start_time=mine["start_time"], end_time=mine["end_time"])
    events.emit("losses", values=mine["losses"])
    events.emit("staleness", values=mine["staleness"])
    dense = report["dense_bytes"]
    events.emit("comm", bytes_per_step=dense, dense_bytes_per_step=dense)  # every step pushes every gradient
