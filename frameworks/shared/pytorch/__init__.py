"""The PyTorch library of torch_ddp and horovod_torch, which differ only in how gradients cross ranks.

``models`` and ``digits`` (the workloads' models), ``training`` (model, batch, optimizer, loss and step from
the equivalence contract), ``numerics`` (precision, memory format, compilation), ``input_pipeline`` and
``text_pipeline`` (real data through the DataLoader), ``batches`` (where a step's batch comes from),
``ledger`` (what a rank records around its loop), ``runtime`` (device, versions), ``checkpointing`` (the
checkpoint phase), ``emulated_device`` (device emulated) and ``probe`` (the equivalence probe).
Imports torch at module level: worker processes only.
"""
