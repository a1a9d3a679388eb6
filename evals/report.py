"""Eval results on disk (``.synthex/evals/*.json``), comparison tables, PNG charts, markdown report."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

HEADLINE = ("recall_any@1", "recall_any@5", "recall_any@10", "recall_all@5", "recall_all@10", "ndcg_any@10", "mrr")


def save(results: list[dict[str, Any]], eval_dir: Path) -> Path:
    eval_dir.mkdir(parents=True, exist_ok=True)
    stamp = time.strftime("%Y%m%d-%H%M%S")
    path = eval_dir / f"{stamp}-{results[0]['benchmark']}.json"
    path.write_text(json.dumps(results, indent=2), encoding="utf-8")
    return path


def table(results: list[dict[str, Any]], level: str = "turn") -> str:
    head = "| architecture | n | " + " | ".join(HEADLINE) + " |"
    rows = [head, "|" + "---|" * (len(HEADLINE) + 2)]
    for r in results:
        m = r["metrics"][level]
        rows.append(f"| {r['architecture']} | {r['n_questions']} | " + " | ".join(f"{m.get(h, 0):.4f}" for h in HEADLINE) + " |")
    return "\n".join(rows)


def category_table(results: list[dict[str, Any]], metric: str = "recall_any@10") -> str:
    cats = sorted({c for r in results for c in r["by_category"]})
    rows = ["| architecture | " + " | ".join(f"{c} (n={results[0]['by_category'].get(c, {}).get('n', 0)})" for c in cats) + " |",
            "|" + "---|" * (len(cats) + 1)]
    for r in results:
        rows.append(f"| {r['architecture']} | " + " | ".join(f"{r['by_category'].get(c, {}).get(metric, 0):.3f}" for c in cats) + " |")
    return "\n".join(rows)


def chart(results: list[dict[str, Any]], path: Path, level: str = "turn") -> Path:
    """Grouped bars: one group per metric, one bar per architecture; and recall_any@10 per category."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    metrics = ["recall_any@5", "recall_any@10", "recall_all@10", "ndcg_any@10"]
    cats = sorted({c for r in results for c in r["by_category"]})
    fig, axes = plt.subplots(1, 2, figsize=(14, 5))
    width = 0.8 / max(1, len(results))
    for i, r in enumerate(results):
        xs = [j + i * width for j in range(len(metrics))]
        axes[0].bar(xs, [r["metrics"][level].get(m, 0) for m in metrics], width, label=r["architecture"])
        xs = [j + i * width for j in range(len(cats))]
        axes[1].bar(xs, [r["by_category"].get(c, {}).get("recall_any@10", 0) for c in cats], width, label=r["architecture"])
    axes[0].set_xticks([j + width * (len(results) - 1) / 2 for j in range(len(metrics))], metrics)
    axes[1].set_xticks([j + width * (len(results) - 1) / 2 for j in range(len(cats))], cats)
    bench = results[0]["benchmark"]
    axes[0].set_title(f"{bench}: {level}-level retrieval")
    axes[1].set_title(f"{bench}: {level} recall_any@10 by category")
    for ax in axes:
        ax.set_ylim(0, 1)
        ax.grid(axis="y", alpha=0.3)
    axes[0].legend(fontsize=8)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def report(eval_dir: Path) -> str:
    """Markdown of the latest result file per benchmark."""
    latest: dict[str, Path] = {}
    for path in sorted(eval_dir.glob("*.json")):
        latest[path.stem.split("-", 2)[-1]] = path
    if not latest:
        return "No eval results yet: run `synthex eval locomo` first."
    parts = ["# Synthex eval report"]
    for bench, path in sorted(latest.items()):
        results = json.loads(path.read_text())
        parts.append(f"\n## {bench} ({path.name})\n\nTurn level:\n\n{table(results, 'turn')}\n\n"
                     f"Session level:\n\n{table(results, 'session')}\n\nTurn recall_any@10 by category:\n\n"
                     f"{category_table(results)}")
    return "\n".join(parts)
