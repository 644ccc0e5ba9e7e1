"""The result row's sections, in the order their columns stand in files.

Adding a section: declare it here (or in a module of this package) and add it to SECTIONS; then record the
new column list's fingerprint as a new schema version in versions.toml (tests/unit/results/test_row_sections.py
says which).
"""

from __future__ import annotations

from harness.results.row.section import Section, col

IDENTITY = Section("identity", "what ran: ids, the scenario's dimensions, the run's set-up and its status",
                 "harness.running.runner:_row", (
    col("schema_version", "Int64", "", "the row's schema version (harness/results/row/versions.toml)"),
    col("sweep_id", "string", "", "the sweep the run belongs to"),
    col("run_id", "string", "", "<sweep_id>/<run index>: the run's folder under runs/"),
    col("config_id", "string", "", "hash of the configuration's dimensions (repeats of one configuration share it)"),
    col("scenario", "string", "", "the scenario's name"),
    col("framework", "string", "", "the framework plug-in that ran (torch_ddp, horovod_torch, tf_mwms, ...)"),
    col("workload", "string", "", "the workload trained"),
    col("size", "string", "", "the workload's size preset"),
    col("nodes", "Int64", "", "hosts the run asked for"),
    col("procs_per_node", "Int64", "", "worker processes per host"),
    col("world_size", "Int64", "", "worker processes in all: nodes x procs_per_node"),
    col("batch_per_worker", "Int64", "", "samples one worker takes per step"),
    col("global_batch", "Int64", "", "samples per step, all workers: world_size x batch_per_worker"),
    col("strategy", "string", "", "the distribution strategy (harness.experiment.strategies)"),
    col("strategy_options", "string", "", 
        "JSON object: the strategy's resolved options (harness.experiment.strategies)"),
    col("storage", "string", "", "where the data came from: synthetic, or a storage backend"),
    col("launcher", "string", "", "the launcher that started the ranks"),
    col("network", "string", "", "link cap between hosts: unlimited | e.g. 1gbit"),
    col("precision", "string", "", "fp32 | tf32 | amp_fp16 | amp_bf16"),
    col("memory_format", "string", "", "contiguous | channels_last"),
    col("compile", "string", "", "off | on"),
    col("layout", "string", "", 
        "layout the convolutions ran in, as the worker read it back: NCHW | NHWC (empty: none)"),
    col("hosts", "string", "", "JSON list: the hosts the ranks ran on, as they reported"),
    col("image", "string", "", "the container image the ranks ran in (ROSETTA_IMAGE), if any"),
    col("image_id", "string", "", "its ID (sha256:...) where the launcher knew it (podman)"),
    col("image_digest", "string", "", "its registry digest, likewise (empty for an image never pushed or pulled)"),
    col("device_requested", "string", "", "the device the scenario asked for: auto | cpu | cuda | emulated"),
    col("device", "string", "", "the device the ranks ran on, as they reported"),
    col("repeat", "Int64", "", "which repeat of its configuration (0 first)"),
    col("warmup_steps", "Int64", "", "steps before the measured window"),
    col("measured_steps", "Int64", "", "steps in the measured window"),
    col("status", "string", "", "ok | failed | timeout | diverged | skipped | interrupted"),
    col("reason", "string", "", "why, when status is not ok (one line)"),
))

MEASUREMENT = Section("measurement", "throughput, step times and the telemetry of the measured window",
                 "harness.running.collect:measurement_fields", (
    col("throughput", "Float64", "samples/s", "samples/s over the measured window, slowest rank's wall time"),
    col("sample_unit", "string", "", "images | sequences"),
    col("samples_measured", "Int64", "", "global samples in the measured window, counted on every rank"),
    col("window_s", "Float64", "s", "slowest rank's measured wall time (s)"),
    col("step_time_p50_s", "Float64", "s", "median of step_times_s (s)"),
    col("step_time_p90_s", "Float64", "s", "90th percentile of step_times_s (s)"),
    col("step_times_s", "string", "s", "JSON list: per measured step, the slowest rank's time (s)"),
    col("cpu_util_pct", "Float64", "%", "mean CPU use of a rank's process tree in the window (% of one core)"),
    col("rss_max_mb", "Float64", "MiB", "largest resident memory of a rank's process tree (MiB)"),
    col("gpu_util_pct", "Float64", "%", "mean GPU utilization (%), empty without a GPU"),
    col("gpu_mem_max_mb", "Float64", "MiB", "largest GPU memory used (MiB)"),
    col("gpu_power_w", "Float64", "W", "mean GPU power draw (W)"),
    col("gpu_sm_clock_mhz", "Float64", "MHz", "mean SM clock (MHz)"),
    col("telemetry_samples", "Int64", "", "samples in the window, all ranks together"),
))

MACHINE_LOAD = Section("machine_load", "what else ran on the machine during the window",
                 "harness.running.collect:measurement_fields", (
    col("other_cpu_share", "Float64", "fraction", 
        "CPU time of processes outside the run / the machine's CPU time, window (busiest machine)"),
    col("load_avg", "Float64", "", "mean 1-minute load average over the window (the run's own threads included)"),
    col("steal_share", "Float64", "fraction", 
        "CPU time the hypervisor gave to other guests / the machine's CPU time (0 on bare metal)"),
    col("cpu_mhz", "Float64", "MHz", "mean current CPU frequency (MHz) where the kernel reports it, slowest machine"),
    col("machine_busy", "boolean", "", 
        "other load beyond harness.contract.machine_load's thresholds (empty: not sampled)"),
    col("busy_note", "string", "", "why machine_busy: the other load, oversubscribed cores, steal"),
))

TRAINING = Section("training", "losses, communication, asynchrony and pipeline figures of the strategy",
                 "harness.running.collect:measurement_fields", (
    col("first_loss", "Float64", "", "the first measured step's training loss, first training rank"),
    col("last_loss", "Float64", "", "the last measured step's training loss, first training rank"),
    col("bytes_per_step", "Float64", "bytes", 
        "bytes one rank hands to collectives per measured step (payload; max over ranks)"),
    col("compression_ratio", "Float64", "ratio", "fp32 gradient allreduce bytes per step / bytes_per_step"),
    col("staleness_mean", "Float64", "updates", 
        "asynchronous strategies: updates applied by others between a read and an update"),
    col("staleness_max", "Int64", "updates", "the most of them, any update in the window"),
    col("staleness_hist", "string", "", "JSON object: staleness -> updates, all ranks, measured window"),
    col("server_bytes_in_per_step", "Float64", "bytes", 
        "parameter servers: payload the busiest server took in per step"),
    col("server_bytes_out_per_step", "Float64", "bytes", "and sent out per step (bytes)"),
    col("plain_throughput", "Float64", "samples/s", 
        "samples/s of the same loop without the DDP wrapper (world size 1, torch_ddp)"),
    col("p2p_bytes_per_step", "Float64", "bytes", 
        "bytes one rank sends point-to-point (pipeline activations) per step (max)"),
    col("stage_idle_fractions", "string", "fraction", 
        "JSON list by pipeline stage: 1 - its compute seconds / window seconds"),
    col("pipeline_bubble_predicted", "Float64", "fraction", "GPipe's idle fraction (p - 1) / (m + p - 1) for this run"),
    col("stage_layers", "string", "", "JSON list by pipeline stage: the names of the layers it holds (the cut)"),
    col("stage_flops_shares", "string", "fraction",
        "JSON list by pipeline stage: its share of the model's forward FLOPs"),
    col("stage_time_shares", "string", "fraction", 
        "JSON list by pipeline stage: its share of the layers' measured time (balance time)"),
))

MEMORY = Section("memory", "peak host and accelerator memory of the ranks", "harness.running.collect:memory_fields", (
    col("peak_rss_mb", "Float64", "MiB", 
        "largest peak resident memory of a rank's worker process (MiB, exact: getrusage)"),
    col("rank_peak_rss_mb", "string", "MiB", "JSON list by rank: each worker process's peak resident memory (MiB)"),
    col("peak_gpu_allocated_mb", "Float64", "MiB", 
        "accelerator memory the framework allocated to tensors at most, largest rank (MiB)"),
    col("rank_peak_gpu_allocated_mb", "string", "MiB", "JSON list by rank (null: a rank that held none)"),
    col("peak_gpu_reserved_mb", "Float64", "MiB", 
        "accelerator memory its caching allocator reserved at most, largest rank (MiB)"),
    col("rank_peak_gpu_reserved_mb", "string", "MiB", "JSON list by rank (null: a rank that held none)"),
))

UTILIZATION = Section("utilization", "model FLOPs and FLOPs utilization against the device's peak",
                 "harness.results.utilization:utilization_fields", (
    col("model_flops_per_sample", "Float64", "FLOP", 
        "training FLOPs of one sample: 3 x forward, layer by layer (harness.machines.model_flops)"),
    col("achieved_tflops", "Float64", "TFLOP/s", 
        "model_flops_per_sample x throughput / peak_devices / 1e12: per device"),
    col("peak_tflops", "Float64", "TFLOP/s", "one device's dense peak at the run's precision (TFLOP/s)"),
    col("peak_source", "string", "", "where peak_tflops comes from: the peak table's source, or 'measured: ...' (CPU)"),
    col("peak_devices", "Int64", "", "devices the peak counts: GPUs (one per rank), or nodes (a CPU machine each)"),
    col("mfu", "Float64", "fraction", "model FLOPs utilization: achieved_tflops / peak_tflops (fraction)"),
))

ACCURACY = Section("accuracy", "time to accuracy and the weights' agreement",
                 "harness.running.collect:accuracy_fields", (
    col("strategy_note", "string", "", 
        "what the framework did not do that the run asked for (e.g. Horovod's hierarchy)"),
    col("target_accuracy", "Float64", "fraction", "held-out accuracy (fraction) a time-to-accuracy run aims at"),
    col("steps_to_target", "Int64", "", "training steps (warm-up included) until the first evaluation >= target"),
    col("time_to_target_s", "Float64", "s", "training seconds until then (slowest rank per step, evaluation excluded)"),
    col("final_accuracy", "Float64", "fraction", "held-out accuracy (fraction) of the final model"),
    col("accuracy_curve", "string", "", "JSON list of [step, held-out accuracy, held-out loss], rank 0's model"),
    col("weights_consistent", "boolean", "", "whether every rank ended with the same weights (their checksums agree)"),
))

DATA = Section("data", "the input pipeline and storage as the ranks read it", "harness.running.collect:data_fields", (
    col("data_stall_frac", "Float64", "fraction", 
        "measured window's time spent waiting for the next batch / window time (worst rank)"),
    col("read_mb_s", "Float64", "MB/s", "bytes read from storage in the window, all ranks, MB (1e6) per second"),
    col("loader_throughput", "Float64", "samples/s", "samples/s of the input pipeline alone (no model), all ranks"),
    col("cache_hit_rate", "Float64", "fraction", 
        "cached storage: fraction of object reads served from the local cache"),
    col("objects_verified", "Int64", "", "objects whose sha256 was checked against the manifest, all ranks"),
    col("staging_s", "Float64", "s", "copy-to-local staging before training (s, slowest rank), if staged"),
    col("partitions_loaded", "Int64", "", "BERT: partitions read to their last byte in the window, all ranks"),
    col("partition_load_s_p50", "Float64", "s", 
        "BERT: median seconds one partition took to load (open to last byte, reading only)"),
    col("partition_load_s_max", "Float64", "s", "BERT: the longest of them (s)"),
    col("partition_load_mb_s", "Float64", "MB/s", 
        "BERT: those partitions' bytes / their load seconds, MB (1e6) per second"),
))

EMULATION = Section("emulation", "the emulated accelerators and cluster",
                 "harness.running.emulation_fields:emulation_fields", (
    col("accelerator", "string", "", "device emulated: the accelerator profile each rank stood for (or custom)"),
    col("compute_s", "Float64", "s", "device emulated: profiled compute time per step (s), as slept"),
    col("compute_source", "string", "", "where compute_s came from (harness/machines/accelerators.toml)"),
    col("emulated_step", "string", "", "sleep (the emulation) | spin (a busy loop of the same length: fidelity check)"),
    col("compute_error_frac", "Float64", "fraction", 
        "|mean time a step's compute took - compute_s| / compute_s, worst rank"),
    col("au", "Float64", "fraction", 
        "accelerator utilization: compute_s x steps / window time, slowest rank (MLPerf Storage)"),
    col("au_threshold", "Float64", "fraction", "the AU a result must keep (0.90 for ResNet-50)"),
    col("au_ok", "boolean", "", "au >= au_threshold"),
    col("host_cpu_busy", "Float64", "fraction", "the machine's CPU busy fraction in the window (every process on it)"),
    col("loader_busy", "Float64", "fraction", 
        "a rank's loader processes' CPU seconds / (window x loader workers), worst rank"),
    col("loader_cpu_bound", "boolean", "", 
        "AU under threshold, worst data stall >= a quarter of the shortfall, CPUs or loaders saturated"),
    col("exchange", "string", "", "device emulated: barrier (MLPerf Storage's) | gradients (the emulated cluster's)"),
    col("intra_link", "string", "", "the emulated link between GPUs of a host (harness/machines/interconnects.toml)"),
    col("inter_link", "string", "", "the emulated network card of each host"),
    col("dilation", "Float64", "", "time dilation k: measured seconds were divided by it (throughput x k)"),
    col("step_variation", "string", "", "the measured spread the emulated GPUs' steps drew from; empty: exact steps"),
    col("emulation_late_s", "Float64", "s", 
        "how far behind its profiled schedule the emulated compute ran, worst rank (s, dilated)"),
    col("emulation_saturated", "boolean", "", 
        "this machine's CPU, not the emulated cluster, limited the step (host_cpu_busy or exchange_cpu_busy)"),
    col("exchange_s", "Float64", "s", 
        "an exchange after the backward (tf_mwms, chainer): its mean time a step (s, cluster's)"),
    col("exchange_cpu_busy", "Float64", "fraction", 
        "the machine's CPU busy fraction during those exchanges, worst rank"),
    col("input_workers", "Int64", "", "the emulated host's loader workers per GPU (its stall: data_stall_frac)"),
    col("input_rate", "Float64", "samples/s", "samples/s one of them prepares, as given (undilated)"),
))

CHECKPOINT = Section("checkpoint", "checkpoint save and load", "harness.running.collect:checkpoint_fields", (
    col("checkpoint_mode", "string", "", 
        "single (rank 0 writes one file, every rank reads it) | sharded (one per rank)"),
    col("checkpoint_bytes", "Int64", "bytes", "bytes written by all ranks"),
    col("checkpoint_save_s", "Float64", "s", "save phase: slowest rank's seconds from the starting barrier"),
    col("checkpoint_save_gb_s", "Float64", "GB/s", "checkpoint_bytes / 1e9 / checkpoint_save_s"),
    col("checkpoint_load_s", "Float64", "s", "load phase: slowest rank's seconds (read and deserialize)"),
    col("checkpoint_load_gb_s", "Float64", "GB/s", "bytes read by all ranks / 1e9 / checkpoint_load_s"),
    col("checkpoint_cache_defeat", "string", "", 
        "how the page cache was kept out (fsync+fadvise_dontneed, rank_shift, ...)"),
))

MLPERF_STORAGE = Section("mlperf_storage", "MLPerf Storage's run rules and the page cache",
                 "harness.running.storage_rules:row_fields", (
    col("rules", "string", "", 
        "the run rules it followed: rosetta | mlperf_storage (MLPerf Storage v2.0's, docs/storage.md)"),
    col("dataset_bytes", "Int64", "bytes", "real data: bytes of the objects the run's layout reads, the whole dataset"),
    col("client_memory_gb", "Float64", "GiB", 
        "this machine's memory (GiB, 2^30): what MLPerf Storage's 5x rule counts"),
    col("memory_available_gb", "Float64", "GiB", 
        "memory available when the run started (GiB): what the page cache could hold"),
    col("page_cache_drop", "string", "", 
        "how the page cache was emptied before the run: drop_caches | fadvise_dontneed | none"),
    col("potential_caching", "boolean", "", 
        "whether the run's reads could have come from the page cache (DLIO's flag)"),
    col("potential_caching_why", "string", "", 
        "why or why not: dataset vs available memory, emptied, objects read again"),
    col("au_rules", "Float64", "fraction", 
        "MLPerf Storage's AU: every step from step 1, the first's time and compute left out, mean of ranks"),
    col("throughput_rules", "Float64", "samples/s", 
        "MLPerf Storage's samples/s: every step from step 1 (the first included), summed over ranks"),
    col("checkpoint_save_gb_s_rules", "Float64", "GB/s", 
        "MLPerf Storage's checkpoint write GB/s: the minimum over ranks of their own"),
    col("checkpoint_load_gb_s_rules", "Float64", "GB/s", 
        "and read GB/s (a rank's bytes / its seconds; ranks that moved none left out)"),
    col("mlperf_compliant", "boolean", "", 
        "rules mlperf_storage: the run (its set, on a set's last run) keeps every rule"),
    col("mlperf_violations", "string", "", 
        "JSON list, one '<rule>: <why>' per rule broken (harness/results/mlperf.py)"),
    col("mlperf_replication_spread", "Float64", "fraction", 
        "a set's last run: (max - min) / min of the rules' samples/s after the warm-up run"),
))

PROVENANCE = Section("provenance", "the weights, versions, machine and harness a row came from",
                 "harness.results.provenance:machine", (
    col("weights_checksum", "string", "", "checksum of the final weights (the same on every rank)"),
    col("parameters", "Int64", "", "the model's trainable parameters"),
    col("compile_s", "Float64", "s", "first step with compilation (compile = on), outside the window (s)"),
    col("launch_s", "Float64", "s", "wall time of the whole launch, start-up included (s)"),
    col("framework_version", "string", "", "the framework library's version, as the workers reported"),
    col("versions", "string", "", "JSON object: library -> version, as the workers reported"),
    col("host", "string", "", "the host name of the machine the harness ran on"),
    col("os", "string", "", "its operating system"),
    col("cpu_model", "string", "", "its CPU model"),
    col("cpu_cores", "Int64", "", "its logical CPU cores"),
    col("gpu_model", "string", "", "its GPU model (empty without a GPU)"),
    col("gpu_count", "Int64", "", "its GPUs"),
    col("gpu_driver", "string", "", "the NVIDIA driver version (empty without a GPU)"),
    col("mpi", "string", "", "the MPI mpirun on PATH belongs to, and its path (None without MPI)"),
    col("harness_version", "string", "", "the harness's package version"),
    col("harness_commit", "string", "", "the harness's git commit, where it runs from a checkout"),
    col("timestamp", "string", "", "UTC, ISO 8601, when the run finished"),
    col("spec", "string", "", "JSON: the full expanded run spec"),
    col("run_dir", "string", "", "the run's folder (spec, launch command, logs, events, row.json)"),
))

ATTRIBUTION = Section("attribution", "where a multi-rank run's step went, per rank (docs/measurement.md): the "
                      "straggler and the slowest and median rank's phases; empty for one rank",
                      "harness.running.collect:attribution_fields", (
    col("slowest_rank", "Int64", "", "the rank the others wait for (largest step less its wait for peers)"),
    col("slowest_host", "string", "", "its host, as its hello said"),
    col("straggler_score", "Float64", "ratio", "its own time per step / the median rank's (1.0: no straggler)"),
    col("attribution_phase", "string", "",
        "the phase it exceeds the median rank in most: compute | exchange | data | rest"),
    col("slowest_compute_s", "Float64", "s", "the slowest rank's compute per step"),
    col("slowest_exchange_s", "Float64", "s", "the slowest rank's exchange per step"),
    col("slowest_data_s", "Float64", "s", "the slowest rank's data per step"),
    col("slowest_rest_s", "Float64", "s", "the slowest rank's rest per step"),
    col("median_compute_s", "Float64", "s", "the median rank's compute per step"),
    col("median_exchange_s", "Float64", "s", "the median rank's exchange per step"),
    col("median_data_s", "Float64", "s", "the median rank's data per step"),
    col("median_rest_s", "Float64", "s", "the median rank's rest per step"),
))

FAULT = Section("fault", "the fault planted on the emulated cluster ([faults]: harness/machines/faults.py), the truth "
                "a detector is scored against; empty where none was", "harness.machines.faults:fault_fields", (
    col("fault_kind", "string", "", "slow_gpu | slow_nic | long_link | slow_loader | cpu_hog | intermittent"),
    col("fault_rank", "Int64", "", "the rank it slows (slow_gpu, intermittent; empty for a host's fault)"),
    col("fault_host", "string", "", "the host it is on, as its ranks' hello said (compare slowest_host)"),
    col("fault_severity", "Float64", "", 
        "its size: compute or batch-time factor (x), slow_nic's rate fraction, long_link's added latency (s)"),
    col("fault_every", "Int64", "steps", "intermittent: every n-th step"),
    col("fault_seed", "Int64", "", "the seed its place was drawn from"),
))

ENVIRONMENT = Section("environment", "the Python environment the ranks ran in (harness/base/python_envs.py): the "
                      "harness's own .venv or a framework family's, each from its pins", 
                      "harness.base.python_envs:row_fields", (
    col("environment", "string", "", "the ranks' environment: .venv, or a family's (tools/envs/<name>.txt)"),
    col("environment_lock", "string", "",
        "its lock: the key of its pins (16 hex digits) and its pins name==version (.venv: pyproject.toml's key)"),
))

SECTIONS: tuple[Section, ...] = (IDENTITY, MEASUREMENT, MACHINE_LOAD, TRAINING, MEMORY, UTILIZATION, ACCURACY, DATA,
                                 EMULATION, CHECKPOINT, MLPERF_STORAGE, PROVENANCE,
                                 ATTRIBUTION, FAULT, ENVIRONMENT)
