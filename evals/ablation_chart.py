"""A PNG chart of ablation rows: the JSON lines `evals.ablate_conversational` prints, one per variant.

    python -m evals.ablate_conversational ... > ablation.txt
    python -m evals.ablation_chart ablation.txt [more.txt] -o docs/locomo_dev7_strategies.png
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

METRICS = ("recall_any@10", "recall_all@10")


def read_rows(paths: list[Path]) -> list[dict]:
    """Variant rows from the JSON lines of the given files (later files win for a repeated variant)."""
    rows: dict[str, dict] = {}
    for path in paths:
        for line in path.read_text(encoding="utf-8").splitlines():
            if line.startswith("{"):
                row = json.loads(line)
                rows[row["variant"]] = row
    return list(rows.values())


def chart(rows: list[dict], out: Path, title: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    names = [r["variant"] for r in rows]
    fig, ax = plt.subplots(figsize=(10, 0.45 * len(rows) + 1.5))
    height = 0.38
    for i, metric in enumerate(METRICS):
        ax.barh([y + i * height for y in range(len(rows))], [r[metric] for r in rows], height, label=metric)
    ax.set_yticks([y + height / 2 for y in range(len(rows))], names, fontsize=8)
    ax.invert_yaxis()
    low = min(r[m] for r in rows for m in METRICS)
    ax.set_xlim(max(0.0, low - 0.05), 1.0)
    ax.axvline(rows[0]["recall_any@10"], color="grey", linewidth=0.6, linestyle="--")
    ax.set_title(title, fontsize=10)
    ax.legend(loc="lower right", fontsize=8)
    fig.tight_layout()
    fig.savefig(out, dpi=110)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("files", nargs="+", type=Path)
    parser.add_argument("-o", "--out", type=Path, required=True)
    parser.add_argument("--title", default="LoCoMo dev7, turn level: search strategies on the conversational recipe")
    args = parser.parse_args()
    rows = read_rows(args.files)
    chart(rows, args.out, args.title)
    print(f"chart {args.out} ({len(rows)} variants)")


if __name__ == "__main__":
    main()
