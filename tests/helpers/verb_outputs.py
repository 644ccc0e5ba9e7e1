"""What every read-only verb prints for one fixed store, the same each time: the record a refactoring is held to.

``python -m tests.helpers.verb_outputs OUT`` writes each verb's standard output and exit status to OUT/<case>.txt;
tests/unit/cli/test_verb_outputs.py compares them with tests/data/verbs/, recorded before the house moved
(commit 6ee4b5a). A verb whose output changes on purpose gets its file written again, in the same commit.
"""

from __future__ import annotations

import contextlib
import io
import os
import random
import re
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]

# case -> argv, with {store}, {base}, {cur} and {out} for the folders below (relative to the working folder, so
# that a longer temporary path does not move a centred title) and {repo} for this checkout
CASES = {
    "list": ["list"],
    "plan-quickstart": ["plan", "{repo}/scenarios/quickstart.toml"],
    "plan-strategies": ["plan", "{repo}/scenarios/strategies.toml"],
    "report": ["report", "--results", "{store}", "--sweep", "s11", "--chart", "{out}/report.png"],
    "history": ["history", "{store}", "--no-chart"],
    "compare": ["compare", "{base}", "{cur}"],
    "reproduce-list": ["reproduce", "--list"],
    "project": ["project"],
    "bad-input": ["history", "{out}/nowhere"],
}


def make_store(root: Path) -> dict[str, Path]:
    """A store of 12 hourly sweeps of two configurations (one slowing 12% from sweep 8), and two tables of one
    sweep each for compare, from a fixed seed."""
    try:
        from tests.helpers.history_rows import sweep_rows
    except ImportError:  # the tests before they were layered
        from tests.history_rows import sweep_rows
    from harness.results import table as results

    rng = random.Random(7)
    rows = [row for i in range(12) for cfg, level in (("fast", 0.05), ("slow", 0.08))
            for row in sweep_rows(i, level * (1.12 if cfg == "slow" and i >= 8 else 1.0), rng, config=cfg,
                                  world_size=1, scenario="verbs")]
    results.append(root / "store", rows)
    results.append(root / "base", [r for r in rows if r["sweep_id"] == "s06"])
    results.append(root / "cur", [r for r in rows if r["sweep_id"] == "s11"])
    return {"store": root / "store", "base": root / "base", "cur": root / "cur"}


def capture(argv: list[str]) -> str:
    """The verb's standard output (and error), then its exit status, as a user's terminal of 200 columns shows."""
    from harness.cli import main as cli

    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            status = cli.main(argv)
        except SystemExit as exc:
            status = exc.code
    return f"{out.getvalue()}{err.getvalue()}\nexit status: {status}\n"


def normalized(text: str, root: Path) -> str:
    """Paths of the temporary folder and of this checkout as placeholders, so two checkouts print alike, and
    the emulated GPUs the free memory holds as ``<N>`` (record holds that memory fixed: see AVAILABLE_BYTES)."""
    text = text.replace(str(root), "<tmp>").replace(str(REPO), "<repo>")
    return re.sub(r"points above \d+ GPUs skipped", "points above <N> GPUs skipped", text)


# the memory `reproduce --list` plans emulated ranks for: the machine's (24 GiB, 20 of them free), not
# what this one has free now, which moves with what else runs and rewraps the table around the count
AVAILABLE_BYTES = 20 * 2**30


@contextlib.contextmanager
def fixed_memory():
    """psutil's available memory held at AVAILABLE_BYTES while the verbs run (the rest of its figures as they are)."""
    import psutil

    real = psutil.virtual_memory
    psutil.virtual_memory = lambda: real()._replace(available=AVAILABLE_BYTES)
    try:
        yield
    finally:
        psutil.virtual_memory = real


def record(root: Path) -> dict[str, str]:
    """Every case's normalized output (case -> text), its stores and charts in the empty folder ``root``."""
    os.environ["COLUMNS"] = "200"
    os.chdir(root)
    (root / "charts").mkdir()
    folders = {k: str(v.relative_to(root)) for k, v in make_store(root).items()} | {"out": "charts", "repo": str(REPO)}
    with fixed_memory():
        return {case: normalized(capture([re.sub(r"\{(\w+)\}", lambda m: folders[m.group(1)], a) for a in argv]),
                                 root) for case, argv in CASES.items()}


if __name__ == "__main__":
    import tempfile

    target = Path(sys.argv[1])
    target.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        for case, text in record(Path(tmp)).items():
            (target / f"{case}.txt").write_text(text)
