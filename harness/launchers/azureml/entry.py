"""``python -m harness.launchers.azureml.entry MODULE RUN_OUTPUT [DATA]``: one rank of an Azure ML job.

Azure ML starts this in every process of the job (its distribution sets the rank variables: torch's,
Open MPI's or TF_CONFIG). It writes the run's spec, carried in the job as ROSETTA_SPEC, to a file of this
process's own with ``RUN_OUTPUT`` (the job's ``run`` output folder, mounted on every node) as the place
for the rank records, and with ``DATA`` (the mounted ``data`` input) as the dataset's folder where the
run reads Azure Blob (read as a local folder: the mount is Azure ML's way to it); then it becomes the
harness's worker (``python -m harness.contract.worker MODULE SPEC``). Standard library only.
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
from typing import Any

SPEC_VARIABLE = "ROSETTA_SPEC"  # harness.launchers.azureml.SPEC_VARIABLE


def rank_document(doc: dict[str, Any], run_output: str, data: str | None) -> dict[str, Any]:
    """The spec document this rank reads: records into ``run_output``; a blob dataset read at ``data``."""
    run = dict(doc["run"])
    if data:
        run["storage"] = "local"
        run["storage_options"] = {**run.get("storage_options", {}), "url": data}
    return {**doc, "run": run, "out_dir": run_output}


def main(argv: list[str] | None = None) -> None:
    args = list(sys.argv[1:] if argv is None else argv)
    if len(args) not in (2, 3) or SPEC_VARIABLE not in os.environ:
        sys.exit(f"usage: {SPEC_VARIABLE}=... python -m harness.launchers.azureml.entry MODULE RUN_OUTPUT [DATA]")
    module, run_output, data = args[0], args[1], (args[2] if len(args) == 3 else None)
    doc = rank_document(json.loads(os.environ[SPEC_VARIABLE]), run_output, data)
    fd, path = tempfile.mkstemp(prefix="rosetta-spec-", suffix=".json")
    with os.fdopen(fd, "w") as out:
        json.dump(doc, out)
    os.execv(sys.executable, [sys.executable, "-m", "harness.contract.worker", module, path])


if __name__ == "__main__":
    main()
