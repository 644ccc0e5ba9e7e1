"""Where each rank's step went, as a chart (matplotlib, PNG): for every configuration whose rows carry per-rank
data (a run of two or more training ranks: its folder's ``attribution.json``, harness.results.attribution),
one panel of stacked bars, one bar a rank: compute, the wait for slower peers, the exchange itself, the wait
for data and the rest, in milliseconds per measured step (an emulated cluster's undilated by the row's k, as
its other seconds). The rank the others waited for (the row's ``slowest_rank``) is outlined in red and
labelled with its straggler score and the phase to blame. Of a configuration's repeats the one with the
median straggler score is drawn (the panel says which); at most :data:`MAX_PANELS` configurations."""

from __future__ import annotations

import math
from pathlib import Path

import pandas as pd

from harness.contract.axes import Status
from harness.reports.charts import save_figure
from harness.results import attribution

MAX_PANELS = 12  # configurations drawn; the title says how many were left out
# (the per-rank table's column, its label, its colour), bottom to top
SEGMENTS = (("compute_s", "compute (forward + backward)", "tab:blue"),
            ("peer_wait_s", "waiting for slower peers", "tab:orange"),
            ("exchange_s", "exchange (exposed)", "tab:green"),
            ("data_s", "waiting for data", "tab:purple"),
            ("rest_s", "rest (optimizer, host, untimed)", "tab:gray"))
LABEL_KEYS = ("framework", "workload", "size", "strategy", "launcher", "fault_kind")


def _representative(rows: pd.DataFrame) -> pd.Series:
    """The repeat with the median straggler score (the lower of the two middle ones)."""
    scores = pd.to_numeric(rows["straggler_score"], errors="coerce").fillna(math.inf)
    ordered = rows.assign(_score=scores.to_numpy()).sort_values("_score", kind="stable")
    return ordered.iloc[(len(ordered) - 1) // 2]


def _label(row: pd.Series, repeats: int) -> str:
    words = [str(row[k]) for k in LABEL_KEYS if k in row and isinstance(row[k], str) and row[k] not in ("", "-")]
    words.append(f"{row['nodes']}x{row['procs_per_node']}")
    if repeats > 1:
        words.append(f"repeat {row['repeat']} of {repeats} (median score)")
    return " ".join(words)


def per_rank_runs(table: pd.DataFrame) -> list[tuple[str, pd.Series, list[dict]]]:
    """(panel label, the row drawn, its ranks' breakdown) per configuration whose ok rows carry per-rank data
    whose folder still holds it; in the table's order of configurations."""
    if table.empty or "slowest_host" not in table or "run_dir" not in table:
        return []
    ok = table[(table["status"] == Status.OK.value) & table["slowest_host"].notna() & table["run_dir"].notna()]
    keys = [k for k in ("sweep_id", "config_id") if k in ok]
    out = []
    for _, rows in (ok.groupby(keys, sort=False, dropna=False) if keys else [((), ok)]):
        tables = {i: attribution.read_table(Path(r["run_dir"])) for i, r in rows.iterrows()}
        kept = rows.loc[[i for i, ranks in tables.items() if ranks]]
        if kept.empty:
            continue
        row = _representative(kept)
        out.append((_label(row, len(rows)), row, tables[row.name]))
    return out


def _panel(ax, label: str, row: pd.Series, ranks: list[dict]) -> None:
    """One run's stacked bars (ms per step), the slowest rank outlined and labelled."""
    k = float(row["dilation"]) if "dilation" in row and pd.notna(row.get("dilation")) else 1.0
    x = list(range(len(ranks)))
    bottom = [0.0] * len(ranks)
    for column, name, color in SEGMENTS:
        heights = [1e3 * (r.get(column) or 0.0) / k for r in ranks]
        ax.bar(x, heights, bottom=bottom, color=color, label=name, width=0.8)
        bottom = [b + h for b, h in zip(bottom, heights)]
    slowest = int(row["slowest_rank"]) if pd.notna(row.get("slowest_rank")) else None
    at = next((i for i, r in enumerate(ranks) if r["rank"] == slowest), None)
    if at is not None:
        ax.bar([at], [bottom[at]], fill=False, edgecolor="red", linewidth=2.5, width=0.8)
        ax.annotate(f"straggler: {float(row['straggler_score']):.2f}x the median rank, "
                    f"{row['attribution_phase']}", (at, bottom[at]), xytext=(0, 4), textcoords="offset points",
                    ha="center", va="bottom", fontsize=8, color="red")
    untimed = " (compute not timed: inside rest)" if all(r.get("compute_s") is None for r in ranks) else ""
    ax.set_title(f"{label}{untimed}", fontsize=9)
    ax.set_xticks(x, [f"{r['rank']}\n{r.get('host') or ''}" for r in ranks], fontsize=7)
    ax.set_xlabel("rank (host)")
    ax.set_ylabel("ms per measured step" + (f" (undilated: / {k:g})" if k != 1 else ""))
    ax.set_ylim(0, max(bottom, default=0) * 1.15 or 1)
    ax.grid(axis="y", alpha=0.3)


def plot_ranks(table: pd.DataFrame, path: Path) -> Path | None:
    """The per-rank chart of a sweep's rows (one panel per configuration with per-rank data), written to
    ``path``; None where no row carries per-rank data."""
    runs = per_rank_runs(table)
    if not runs:
        return None
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    shown = runs[:MAX_PANELS]
    widest = max(len(ranks) for _, _, ranks in shown)
    fig, axes = plt.subplots(len(shown), 1, figsize=(max(8, 0.45 * widest + 3), 3.6 * len(shown) + 0.8),
                             squeeze=False)
    for ax, (label, row, ranks) in zip(axes[:, 0], shown):
        _panel(ax, label, row, ranks)
    axes[0, 0].legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    more = f"; {len(runs) - len(shown)} more configurations not drawn" if len(runs) > len(shown) else ""
    fig.suptitle("Where each rank's step went (harness.results.attribution; red: the rank the others waited for"
                 f"{more})", fontsize=10)
    return save_figure(fig, path)
