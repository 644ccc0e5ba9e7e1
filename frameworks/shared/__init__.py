"""Code shared by the framework packages: not a framework, never in the registry.

What more than one framework uses lives here, and only here: ``image_input`` (the framework-free part
of the real-data input: shards, decode and augment, the stall meter), ``mpi_job`` (the checks that a rank
was started as one MPI or Horovod job), ``emulated_rank`` (the part of an emulated accelerator's rank that
is the same in every framework), ``emulated_clock`` (the sleeps, exchange timing and record of an emulated
accelerator with real gradients), ``pytorch/`` (the PyTorch models, data, numerics, ledger and emulated rank
of torch_ddp and horovod_torch) and ``keras/`` (the Keras models, tf.data input, training step and emulated
rank of tf_mwms and horovod_tf).

Who may import what (tests/unit/house/test_architecture.py): a framework package (frameworks/<name>/) imports another
framework's code only through this package; this package imports no framework package, and from the
harness only ``base``, ``contract`` and ``storage``, as workers do. Only worker processes (and the tests
and benchmarks that stand in for them) import it: its modules import their deep-learning framework at
module level, which the harness never does.
"""
