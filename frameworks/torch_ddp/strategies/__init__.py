"""PyTorch DDP's training strategies, one module each, and the loops of those that need their own.

``wrapping`` builds the model a strategy trains around its DDP communication hooks and model averaging
(allreduce, fp16, bf16, PowerSGD, ``onebit``, ``hierarchical``, local SGD, ``bmuf``) or its sharding
(``fsdp``, ``tensor_parallel``); torch_ddp's training_loop.py trains it. ``pipeline_parallel`` (one stage
per rank, cut by ``stage_split``), ``hybrid`` (data-parallel trunk, model-parallel classifier) and
``async_training`` (``parameter_server`` and ``hogwild``, no DDP) bring their own loops.

These modules import frameworks.shared and each other; none imports torch_ddp's worker or training loop.
FSDP, tensor and pipeline parallelism are imported by the runs that use them
(torch.distributed's model-parallel packages cost a rank's start-up about as much as torch itself).
"""
