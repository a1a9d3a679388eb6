"""A PNG chart of ablation rows from `evals.ablations.conversational`: turn and session level, one bar pair
(recall_any@10, recall_all@10) per variant and level.

It reads the JSON lines the harness prints (one per variant) or the file its ``--json`` writes:

    python -m evals.ablations.conversational ... --json ablation.json > ablation.txt
    python -m evals.ablations.chart ablation.json [more.txt] -o docs/locomo_dev7_ablation.png

Rows without session metrics (older harness output) give the turn panel only.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

METRICS = ("recall_any@10", "recall_all@10")
LEVELS = ("turn", "session")


def read_rows(paths: list[Path]) -> list[dict]:
    """Variant rows from the given files, JSON lines or one JSON list (later files win for a repeated variant)."""
    rows: dict[str, dict] = {}
    for path in paths:
        text = path.read_text(encoding="utf-8")
        if text.lstrip().startswith("["):
            found = json.loads(text)
        else:
            found = [json.loads(line) for line in text.splitlines() if line.startswith("{")]
        for row in found:
            rows[row["variant"]] = row
    return list(rows.values())


def level_values(row: dict, level: str) -> dict[str, float] | None:
    """The row's metrics at that level (turn metrics sit at the top of a row), None if it has none."""
    source = row if level == "turn" else row.get("session")
    if not source or any(m not in source for m in METRICS):
        return None
    return {m: source[m] for m in METRICS}


def chart(rows: list[dict], out: Path, title: str) -> list[str]:
    """Write the chart; returns the levels drawn (a panel per level that every row has)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    levels = [lv for lv in LEVELS if all(level_values(r, lv) for r in rows)]
    if not rows or not levels:
        raise ValueError("no rows with turn or session recall_any@10 / recall_all@10 to chart")
    names = [r["variant"] for r in rows]
    fig, axes = plt.subplots(1, len(levels), figsize=(6 + 4 * len(levels), 0.42 * len(rows) + 1.6),
                             sharey=True, squeeze=False)
    height = 0.38
    for ax, level in zip(axes[0], levels, strict=True):
        values = [level_values(r, level) for r in rows]
        for i, metric in enumerate(METRICS):
            ax.barh([y + i * height for y in range(len(rows))], [v[metric] for v in values], height,
                    label=metric)
        for i, metric in enumerate(METRICS):  # the first row (the recipe as shipped) as a reference line
            ax.axvline(values[0][metric], color=f"C{i}", linewidth=0.7, linestyle="--")
        low = min(v[m] for v in values for m in METRICS)
        ax.set_xlim(max(0.0, low - 0.05), 1.0)
        ax.set_title(f"{level} level", fontsize=9)
        ax.legend(loc="lower right", fontsize=7)
    axes[0][0].set_yticks([y + height / 2 for y in range(len(rows))], names, fontsize=8)
    axes[0][0].invert_yaxis()
    fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    fig.savefig(out, dpi=110)
    plt.close(fig)
    return levels


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("files", nargs="+", type=Path)
    parser.add_argument("-o", "--out", type=Path, required=True)
    parser.add_argument("--title", default="LoCoMo dev7, k = 10: the conversational recipe, each technique on / off")
    args = parser.parse_args()
    rows = read_rows(args.files)
    levels = chart(rows, args.out, args.title)
    print(f"chart {args.out} ({len(rows)} variants; {', '.join(levels)} level)")


if __name__ == "__main__":
    main()
