"""Performance scripts: each prints ratios and percentiles (``python -m evals.bench.NAME --help``)."""
