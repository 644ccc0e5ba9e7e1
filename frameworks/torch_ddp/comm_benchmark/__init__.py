"""The collective microbenchmark's rank side (``rosetta comm``, harness/comm/): ``worker`` times
torch.distributed's collectives (started like a training worker, through harness.contract.worker) and
``available_backends`` prints which backends this environment offers (run in a subprocess, so that the
harness never imports torch). Not a training framework: nothing here is in the registry."""
