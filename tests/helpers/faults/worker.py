"""Worker of the test-only ``faulty_ddp`` framework: the real DDP worker plus one real fault."""

from __future__ import annotations

import os
import signal
import time

from frameworks.torch_ddp import worker as ddp_worker


def _provoke(kind: str) -> None:
    if kind == "raise":
        raise RuntimeError("provoked failure")
    if kind == "segfault":
        os.kill(os.getpid(), signal.SIGSEGV)
    elif kind == "sigkill":
        os.kill(os.getpid(), signal.SIGKILL)
    elif kind == "exit0":
        os._exit(0)
    elif kind == "hang":
        while True:
            time.sleep(1)
    elif kind == "secret":  # as a careless storage library would: print the key, then fail with it
        secret = os.environ["ROSETTA_TEST_SECRET"]
        print(f"connecting with AccountKey={secret}; env ROSETTA_TEST_SECRET={secret}", flush=True)
        raise RuntimeError(f"could not open https://user:{secret}@127.0.0.1/data?sig={secret}")
    elif kind == "leak":  # print the key and go on hanging: the run is still going when the harness is killed
        print(f"connecting with AccountKey={os.environ['ROSETTA_TEST_SECRET']}", flush=True)
        while True:
            time.sleep(1)
    raise ValueError(f"unknown fault kind {kind!r}")


def main(spec, events) -> None:
    kind, rank, step = os.environ["ROSETTA_TEST_FAULT"].split(":")
    emit = events.emit

    def emit_then_fault(event: str, **fields) -> None:
        emit(event, **fields)
        if (events.rank == int(rank) and event == "step" and fields["phase"] == "measure"
                and fields["index"] == int(step)):
            _provoke(kind)

    events.emit = emit_then_fault
    ddp_worker.main(spec, events)
