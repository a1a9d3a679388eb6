"""`python -m evals.fault_matrix` runs its cases end to end and reports them as a table (two fast cases
here; the whole matrix is an explicit command, like the benchmarks)."""

from __future__ import annotations

import subprocess
import sys

from conftest import env_without_openai

from evals.fault_matrix import Case, render, run_case


def test_two_bad_input_cases_run_end_to_end_and_the_table_is_written(tmp_path):
    out = tmp_path / "matrix.md"
    proc = subprocess.run([sys.executable, "-m", "evals.fault_matrix", "--only", "bad input: missing", "--out", str(out)],
                          capture_output=True, text=True, env=env_without_openai(), timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert proc.stdout.startswith("| case | expected | observed | held |")
    assert "| bad input: missing mapping |" in proc.stdout and "| bad input: missing file |" in proc.stdout
    assert proc.stdout.rstrip().endswith("2 cases, 2 held")
    assert "[1/2] bad input: missing mapping ... held" in proc.stderr  # one progress line per case
    assert out.read_text() == proc.stdout


def test_a_case_that_crashes_is_reported_as_not_held(tmp_path):
    def broken(wb):
        raise RuntimeError("no store | here")

    case = Case("broken", "never crashes", broken)
    observed, held = run_case(case, type("Bench", (), {"root": tmp_path})())
    assert not held and "crashed: RuntimeError: no store | here" in observed
    table = render([(case, observed, held)])
    assert "no store \\| here" in table and table.rstrip().endswith("1 cases, 0 held")
