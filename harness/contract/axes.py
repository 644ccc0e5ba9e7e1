"""Closed sets of values used as scenario axes and result columns; the storage backends and strategies each
declared once here, with the facts the rest of the harness derives from them."""

from dataclasses import dataclass
from enum import Enum
from typing import Any, Mapping

from harness.base.registry import Registry
from harness.contract import strategy_options


# Every workload's name, mapped to the module of its declaration (harness/contract/workloads/<name>.py, whose
# ``DECLARATION`` holds every fact about it): adding a workload is its module, a line here and its model modules.
WORKLOAD_MODULES: dict[str, str] = {
    "resnet50": "harness.contract.workloads.resnet50",
    "bert": "harness.contract.workloads.bert",
    # a Llama-style decoder: RMSNorm, rotary positions, SwiGLU, grouped-query attention, causal LM
    "llama": "harness.contract.workloads.llama",
    "digits": "harness.contract.workloads.digits",  # scikit-learn's handwritten digits: the time-to-accuracy workload
    # the classic scaling tables' models (Horovod's, tf_cnn_benchmarks'), as torchvision and Keras define them
    "inception_v3": "harness.contract.workloads.inception_v3",
    "resnet101": "harness.contract.workloads.resnet101",
    "vgg16": "harness.contract.workloads.vgg16",
}
# The workloads' names as the closed set a scenario's axis and a row take (``Workload.RESNET50 == "resnet50"``),
# made from the lines above: a member per registered workload, none written twice.
Workload = Enum("Workload", [(name.upper(), name) for name in WORKLOAD_MODULES], type=str, module=__name__,
                qualname="Workload")


class Size(str, Enum):
    """Workload variant; the options behind each are data in :mod:`harness.contract.workloads`."""

    TINY = "tiny"
    SMALL = "small"
    FULL = "full"
    LARGE = "large"


class CommAlgorithm(str, Enum):
    """How gradients are exchanged in the scaling model (harness/scaling/model.py)."""

    RING = "ring"  # ring allreduce over every worker
    HIERARCHICAL = "hierarchical"  # ring within each node, ring across nodes, ring within each node
    ONEBIT = "onebit"  # 1-bit SGD: signs (1/32 of the bytes) plus per-bucket scales, exchanged hierarchically
    LOCAL_SGD = "local_sgd"  # full (hierarchical) allreduce every tau steps (model averaging)
    PARAMETER_SERVER = "parameter_server"  # every worker pushes gradients to and pulls the model from S servers


@dataclass(frozen=True)
class ModelledExchange:
    """A strategy's exchange as the scaling model (harness/scaling/) predicts it: the algorithm, the bytes sent
    as a share of an allreduce of the float32 gradients, and the options that change them."""

    algorithm: CommAlgorithm
    share: float = 1.0  # of the float32 gradient bytes an allreduce would send
    # (option, value, share): the share when the run's option has that value (FSDP without resharding)
    share_when: tuple[tuple[str, Any, float], ...] = ()
    steps_option: str = ""  # the option naming the steps between exchanges (local SGD's tau, BMUF's blocks)
    servers_option: str = ""  # the option naming how many parameter servers share the model

    def share_for(self, options: Mapping[str, Any]) -> float:
        """The share of the gradient bytes sent under the run's resolved strategy ``options``."""
        return next((share for key, value, share in self.share_when if options.get(key) == value), self.share)


@dataclass(frozen=True)
class StrategyKind:
    """One training strategy, declared once: the ``Strategy`` member's value, its options' dataclass
    (harness.contract.strategy_options; read by harness.experiment.strategies), its placement facts and its
    exchange for the scaling model (or why that model does not predict it)."""

    value: str  # the scenario's name and the row's ``strategy``
    options: type = strategy_options.NoOptions
    one_host: bool = False  # its processes share one model in one host's memory: one node only
    batch_through_all_ranks: bool = False  # a step's one batch passes through every rank (stages, layer parts)
    exchange: ModelledExchange | None = ModelledExchange(CommAlgorithm.RING)
    unmodelled: str = ""  # with exchange None: why the scaling model predicts nothing for it

    def __post_init__(self) -> None:
        if (self.exchange is None) == (not self.unmodelled):
            raise ValueError(f"strategy {self.value}: an exchange, or the reason it has none, not both")


_SHARED_MEMORY = "its processes share one model in memory: no network exchange"


class Strategy(str, Enum):
    """How workers combine their work.

    Adding a strategy is a member here (and its options' dataclass in harness/contract/strategy_options.py,
    if it has options); the frameworks that implement it name it in their declaration.
    """

    def __new__(cls, kind: StrategyKind) -> "Strategy":
        member = str.__new__(cls, kind.value)
        member._value_ = kind.value
        member.kind = kind
        return member

    # synchronous data parallelism: average fp32 gradients every step
    ALLREDUCE = StrategyKind("allreduce")
    # 1-bit SGD with error feedback (Seide et al. 2014)
    ONEBIT = StrategyKind("onebit", strategy_options.OnebitOptions, exchange=ModelledExchange(CommAlgorithm.ONEBIT))
    # blockwise model-update filtering / block momentum (Chen and Huo 2016)
    BMUF = StrategyKind("bmuf", strategy_options.BmufOptions,
                        exchange=ModelledExchange(CommAlgorithm.LOCAL_SGD, steps_option="block_steps"))
    # average parameters every tau local steps (SparkNet)
    LOCAL_SGD = StrategyKind("local_sgd", strategy_options.LocalSgdOptions,
                             exchange=ModelledExchange(CommAlgorithm.LOCAL_SGD, steps_option="tau"))
    FP16 = StrategyKind("fp16", exchange=ModelledExchange(CommAlgorithm.RING, 0.5))  # gradients sent as fp16 (PyTorch's hook)
    # gradients sent as bf16 (PyTorch's built-in hook; CUDA and NCCL only)
    BF16 = StrategyKind("bf16", exchange=ModelledExchange(CommAlgorithm.RING, 0.5))
    # low-rank gradient compression (Vogels et al. 2019; PyTorch's hook)
    POWERSGD = StrategyKind("powersgd", strategy_options.PowerSgdOptions, exchange=None,
                            unmodelled="its bytes follow each layer's matrix shape and the rank, which rows do not carry")
    # parameter servers: every step waits for all workers' gradients, averaged
    PS_SYNC = StrategyKind("ps_sync", strategy_options.PsSyncOptions,
                           exchange=ModelledExchange(CommAlgorithm.PARAMETER_SERVER, servers_option="servers"))
    # Downpour SGD (Dean et al. 2012): servers apply each push as it comes
    PS_ASYNC = StrategyKind("ps_async", strategy_options.PsAsyncOptions,  # one push and pull per step
                            exchange=ModelledExchange(CommAlgorithm.PARAMETER_SERVER, servers_option="servers"))
    # lock-free updates of one shared-memory model by processes on one host (Niu et al. 2011)
    HOGWILD = StrategyKind("hogwild", one_host=True, exchange=None, unmodelled=_SHARED_MEMORY)
    # the same shared-memory loop, each update locked
    HOGWILD_LOCKED = StrategyKind("hogwild_locked", one_host=True, exchange=None, unmodelled=_SHARED_MEMORY)
    # allreduce as local reduce-scatter, inter-host allreduce, local allgather
    HIERARCHICAL = StrategyKind("hierarchical", strategy_options.HierarchicalOptions,
                                exchange=ModelledExchange(CommAlgorithm.HIERARCHICAL))
    # sharded data parallelism: parameters, gradients, optimizer state in 1/world shards (FSDP2)
    # resharded after forward: two all-gathers of the parameters and a reduce-scatter of the gradients, each
    # (n-1)/n of the bytes, against an allreduce's 2 (n-1)/n; kept after forward: one all-gather, as allreduce
    FSDP = StrategyKind("fsdp", strategy_options.FsdpOptions, exchange=ModelledExchange(
        CommAlgorithm.RING, 1.5, share_when=(("reshard_after_forward", False, 1.0),)))
    # model cut into one stage per rank, microbatches pipelined (GPipe, 1F1B)
    PIPELINE = StrategyKind("pipeline", strategy_options.PipelineOptions, batch_through_all_ranks=True,
                            exchange=None, unmodelled="its stages send activations, not gradients")
    # layers' weight matrices split across ranks (Megatron-LM style)
    TENSOR_PARALLEL = StrategyKind("tensor_parallel", batch_through_all_ranks=True, exchange=None,
                                   unmodelled="its layers exchange activations, not gradients")
    # data-parallel convolutions, model-parallel classifier (Krizhevsky 2014)
    HYBRID = StrategyKind("hybrid", exchange=None, unmodelled="its classifier exchanges activations, not gradients")
    # a data x model device mesh (Mesh-TensorFlow; JAX's GSPMD): parameters sharded along the model axis
    MESH = StrategyKind("mesh", strategy_options.MeshOptions, exchange=None,
                        unmodelled="its model axis exchanges activations, not gradients")


STRATEGIES: Registry[StrategyKind] = Registry.of_enum("strategy", Strategy, lambda member: member.kind)


@dataclass(frozen=True)
class StorageKind:
    """One storage backend, declared once: the ``Storage`` member's value, and what the backend registry
    (harness.storage.backends), the scenario's checks and the charts derive from it."""

    value: str  # the scenario's name and the row's ``storage``
    description: str
    label: str = ""  # on charts and tables (default: the value)
    client: str = ""  # "module:function" opening its fsspec file system from its options ("": no data read)
    packages: tuple[tuple[str, str], ...] = ()  # (module, PyPI package) the client needs
    install_hint: str = ""  # what a missing package itself needs, if anything
    packages_for: str = ""  # a url prefix: only such urls need the packages (nfs://; a mounted path reads like local)
    needs: tuple[str, ...] = ("url",)  # the [storage_options.<name>] keys a scenario must give it
    warm: bool = False  # the run reads its share once, untimed, before the window (a warm cache)
    cacheable: bool = False  # the cached backends may front it (their option ``remote``)


_FSSPEC = (("fsspec", "fsspec"),)
_S3FS = (("s3fs", "s3fs"),)


class Storage(str, Enum):
    """Where the input data comes from; locations are ``[storage_options.<name>]`` (harness.storage.backends).

    Adding a backend is a member here (its client in harness/storage/clients.py, its test server in
    testbed/servers.py): the backend registry, the scenario's checks, the charts' order and labels and the
    storage conformance suite (tests/conformance/test_conformance_storage.py) derive from it.
    """

    def __new__(cls, kind: StorageKind) -> "Storage":
        member = str.__new__(cls, kind.value)
        member._value_ = kind.value
        member.kind = kind
        return member

    SYNTHETIC = StorageKind("synthetic", "one random batch in memory: no input pipeline at all", needs=())
    LOCAL = StorageKind("local", "a local (or mounted) folder", client="harness.storage.clients:local_fs",
                        packages=_FSSPEC, cacheable=True)
    NFS = StorageKind("nfs", "NFS: a mounted folder, or nfs://host/export/path through the user-space client libnfs",
                      client="harness.storage.clients:nfs_fs", packages=(("libnfs", "libnfs"),),
                      install_hint="; it builds against the C library: apt-get install libnfs-dev",
                      packages_for="nfs://", cacheable=True)
    S3 = StorageKind("s3", "Amazon S3 or an S3-compatible server (s3fs)", client="harness.storage.clients:s3_fs",
                     packages=_S3FS, cacheable=True)
    BLOB = StorageKind("blob", "Azure Blob Storage (adlfs)", client="harness.storage.clients:blob_fs",
                       packages=(("adlfs", "adlfs"),), cacheable=True)
    # read-through local-disk cache (fsspec filecache) in front of a remote, emptied before the run (cold)
    CACHED = StorageKind("cached", "read-through cache on local disk in front of a remote backend (fsspec filecache)",
                         label="cached (cold)", client="harness.storage.clients:cached_fs", packages=_FSSPEC,
                         needs=("url", "remote", "cache_dir"))
    CACHED_WARM = StorageKind("cached_warm", "the cached backend, filled before the measured window",
                              label="cached (warm)", client="harness.storage.clients:cached_fs", packages=_FSSPEC,
                              needs=("url", "remote", "cache_dir"), warm=True)
    # a shared cache tier: S3 through a JuiceFS gateway (its block cache in front of S3)
    JUICEFS = StorageKind("juicefs", "a shared cache tier: S3 through a JuiceFS gateway (block cache in front of S3)",
                          label="juicefs (cold)", client="harness.storage.clients:s3_fs", packages=_S3FS,
                          needs=("url", "endpoint_url"))
    JUICEFS_WARM = StorageKind("juicefs_warm", "the JuiceFS tier, the rank's objects read through it before the window",
                               label="juicefs (warm)", client="harness.storage.clients:s3_fs", packages=_S3FS,
                               needs=("url", "endpoint_url"), warm=True)
    ALLUXIO = StorageKind("alluxio", "an Alluxio cluster through alluxiofs (not installable here; untested)",
                          client="harness.storage.clients:alluxio_fs", packages=(("alluxiofs", "alluxiofs"),))


    @property
    def fills_cache(self) -> bool:
        """Whether the run reads its share once, untimed, before the window (a warm cache)."""
        return self.kind.warm

    @property
    def label(self) -> str:
        """Its name on charts and tables (the cold and warm variants of a cache told apart)."""
        return self.kind.label or self.value


STORAGE: Registry[StorageKind] = Registry.of_enum("storage", Storage, lambda member: member.kind)


class Precision(str, Enum):
    """Arithmetic of the training step; each framework maps it to its own mechanism."""

    FP32 = "fp32"
    TF32 = "tf32"  # fp32 storage, TensorFloat-32 matmuls and convolutions (NVIDIA Ampere and later)
    AMP_FP16 = "amp_fp16"  # automatic mixed precision in float16, with loss scaling (GPU)
    AMP_BF16 = "amp_bf16"  # automatic mixed precision in bfloat16 (CPU and GPU)

    @property
    def needs_cuda(self) -> bool:
        return self in (Precision.TF32, Precision.AMP_FP16)


class MemoryFormat(str, Enum):
    CONTIGUOUS = "contiguous"
    CHANNELS_LAST = "channels_last"  # NHWC for convolutional models


class Compile(str, Enum):
    OFF = "off"
    ON = "on"  # torch.compile / XLA jit; compilation timed apart from the measured window


class Device(str, Enum):
    AUTO = "auto"
    CPU = "cpu"
    CUDA = "cuda"
    EMULATED = "emulated"  # the real input pipeline; each step a calibrated sleep of a profiled accelerator's
    #                        compute time, then a barrier (MLPerf Storage's method; harness.machines.accelerators)


class Exchange(str, Enum):
    """How an emulated rank stands in for the gradient exchange."""

    BARRIER = "barrier"  # MLPerf Storage's method: the profiled sleep, then a barrier; no model
    GRADIENTS = "gradients"  # the model's parameters, real gradients through the framework's own machinery


class StepVariation(str, Enum):
    """Whether an emulated cluster's steps vary as a real GPU's were measured to (harness/machines/accelerators.toml)."""

    MEASURED = "measured"  # each rank's step: the profile's time x a measured step / their mean, drawn each step
    NONE = "none"  # every step exactly the profile's time


class Reduction(str, Enum):
    """How an emulated cluster is made smaller than one process a GPU holding the whole model
    (``[emulation]``; harness.machines.emulated_cluster, docs/scaling.md "Beyond one rank per GPU")."""

    GPUS_PER_RANK = "gpus_per_rank"  # one process stands for G GPUs of its host, their in-host reduction timed
    GRADIENT_SCALE = "gradient_scale"  # gradients 1/s of their size over links s times slower


def reductions(emulation: Mapping[str, Any]) -> tuple[Reduction, ...]:
    """The reductions a run's ``emulation`` mapping (or ``[emulation]`` options) asks for."""
    get = emulation.get if isinstance(emulation, Mapping) else (lambda k, d: getattr(emulation, k, d))
    return tuple(r for r in Reduction if float(get(r.value, 1) or 1) > 1)


def exchanges_gradients(emulation: Mapping[str, Any]) -> bool:
    """Whether a run's ``emulation`` mapping is an emulated cluster's (else MLPerf Storage's barrier, or none)."""
    return emulation.get("exchange") == Exchange.GRADIENTS



class Rules(str, Enum):
    """Which run rules a scenario's runs follow (``[settings] rules``); docs/storage.md maps each rule."""

    ROSETTA = "rosetta"  # ours: warm-up steps excluded from the window, one seed for every repeat
    # MLPerf Storage v2.0's training and checkpointing run rules (harness/results/mlperf.py): the page cache
    # dropped before each run, steps counted from step 1, a new seed per run, runs grouped one warm-up + 5
    MLPERF_STORAGE = "mlperf_storage"


class CacheDrop(str, Enum):
    """How the page cache was emptied before a run (the row's ``page_cache_drop``; harness.storage.page_cache)."""

    DROP_CACHES = "drop_caches"  # sync; echo 3 > /proc/sys/vm/drop_caches (root): the whole machine's
    FADVISE = "fadvise_dontneed"  # posix_fadvise DONTNEED on each of the dataset's local files (no root needed)
    NONE = "none"  # nothing: pages read before the run may serve it


class Status(str, Enum):
    OK = "ok"
    FAILED = "failed"
    TIMEOUT = "timeout"
    SKIPPED = "skipped"
    INTERRUPTED = "interrupted"
    DIVERGED = "diverged"  # ran, but its loss was not finite or did not decrease: no throughput reported


def values(enum: type[Enum]) -> list[str]:
    """The allowed string values of an enum, for error messages."""
    return [member.value for member in enum]


class Collective(str, Enum):
    """Collectives measured by ``rosetta comm`` (harness/comm/settings.py)."""

    ALLREDUCE = "allreduce"
    BROADCAST = "broadcast"
    ALLGATHER = "allgather"


class Backend(str, Enum):
    """Communication backends ``rosetta comm`` knows; those absent here give ``skipped`` rows."""

    GLOO = "gloo"
    NCCL = "nccl"
    MPI = "mpi"
    HOROVOD = "horovod"


