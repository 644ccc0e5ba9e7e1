"""A test-only framework: PyTorch DDP with a real fault provoked at a chosen rank and step.

Registered in ``frameworks.REGISTRY`` by the tests that need it (see ``register``).
The fault is chosen by the environment variable ``ROSETTA_TEST_FAULT``, which the
harness passes through to every worker: ``KIND:RANK:STEP`` where KIND is one of

  ``raise``     a Python exception
  ``segfault``  the process sends itself SIGSEGV (a real signal, no handler)
  ``sigkill``   the process sends itself SIGKILL (what the kernel's OOM killer sends)
  ``exit0``     the rank leaves early with exit status 0, as a buggy rank-conditional return would
  ``hang``      the rank stops making progress (sleeps forever), so a collective never returns
  ``secret``    a Python exception whose message carries the value of ``ROSETTA_TEST_SECRET``
  ``leak``      the rank prints the value of ``ROSETTA_TEST_SECRET``, then hangs

and STEP is the measured step after which it happens.
"""

from __future__ import annotations

import dataclasses

import frameworks
from frameworks.torch_ddp import INFO as TORCH_DDP

NAME = "faulty_ddp"
INFO = dataclasses.replace(TORCH_DDP, name=NAME, title="PyTorch DDP with a provoked fault",
                           worker_module="tests.helpers.faults.worker")


def register(monkeypatch) -> str:
    """Make the framework known to this process (the workers find it by module name)."""
    monkeypatch.setitem(frameworks.REGISTRY, NAME, __name__)
    return NAME
