"""Cases of the fault matrix kept beside it, one module per area (issue 20: hostile input and kills).

Each module defines ``CASES: list[evals.fault_matrix.Case]`` and uses the matrix's harness
(``Workbench``, ``synthex(...)``, ``Observed``); ``evals.fault_matrix.all_cases()`` appends them, in
module-name order, after the matrix's own cases.
"""
