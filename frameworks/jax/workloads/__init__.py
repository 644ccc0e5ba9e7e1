"""The workloads in Flax, one builder module each (named by the workload's declaration, harness/contract/workloads/:
resnet50, bert, llama), each defining what the jax family calls (harness.contract.workloads.declaration.FAMILIES):

- ``build_model(options)``: the ``flax.linen`` module;
- ``init_variables(model, options, seed)``: its variables as NumPy arrays, ``{"params": ..., other collections}``
  (the shapes traced, nothing compiled), drawn as the PyTorch model's initializers draw them;
- ``to_jax(batch)``: the contract's fixed batch (NumPy) in the model's layout (NHWC images, int32 integers);
- ``forward(model, variables, batch)``: the outputs in inference mode (what the equivalence probe traces);
- ``loss_of(model, params, state, batch, rng)``: the training loss and the updated ``state`` (the collections other
  than ``params``: ResNet's BatchNorm statistics, none for the transformers); ``rng`` the step's dropout key.

init.py holds what the transformers share (their normal(0, 0.02) initialization, the cross-entropy).
"""
