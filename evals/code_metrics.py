"""Code-shape figures for docs/benchmarks.md (issue 19): import cycles, the longest functions, the public
surface of the record store's parts.

    python -m evals.code_metrics [--top 5]

Import cycles are the strongly connected components (more than one module) of the module import graph
that import-linter's grimp builds, imports inside functions and under TYPE_CHECKING included.
"""

from __future__ import annotations

import argparse
import ast
import inspect
from pathlib import Path

PACKAGES = ("synthex", "synthex_resources", "synthex_assets", "evals")


def import_cycles() -> list[list[str]]:
    import grimp

    graph = grimp.build_graph(*PACKAGES, exclude_type_checking_imports=True)  # not executed: no runtime cycle
    modules = sorted(graph.modules)
    edges = {m: sorted(graph.find_modules_directly_imported_by(m) & set(modules)) for m in modules}
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    out: list[list[str]] = []
    counter = 0

    def visit(start: str) -> None:  # Tarjan's algorithm, iterative (the graph is a few hundred modules deep)
        nonlocal counter
        work = [(start, iter(edges[start]))]
        index[start] = low[start] = counter
        counter += 1
        stack.append(start)
        on_stack.add(start)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = counter
                    counter += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(edges[child])))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    out.append(sorted(component))

    for module in modules:
        if module not in index:
            visit(module)
    return sorted(out)


def longest_functions(root: Path, top: int) -> list[tuple[int, str]]:
    found = []
    for package in PACKAGES:
        for path in sorted((root / package).rglob("*.py")):
            tree = ast.parse(path.read_text(encoding="utf-8"))
            for node in ast.walk(tree):
                if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                    lines = (node.end_lineno or node.lineno) - node.lineno + 1
                    found.append((lines, f"{path.relative_to(root)}:{node.lineno} {node.name}"))
    return sorted(found, reverse=True)[:top]


def public_methods(cls: type) -> list[str]:
    return sorted(n for n, v in vars(cls).items() if not n.startswith("_") and (inspect.isfunction(v)
                                                                                or isinstance(v, property)))


def store_surface() -> dict[str, list[str]]:
    from synthex_resources.record_store import RecordStore

    out = {"RecordStore": public_methods(RecordStore)}
    try:
        from synthex_resources.store.hook_cursors import HookCursors
        from synthex_resources.store.llm_cache import LLMCache
        from synthex_resources.store.records import Records
        from synthex_resources.store.runs import RunLog
        from synthex_resources.store.tables import LanceTables
        from synthex_resources.store.vectors import Vectors
    except ImportError:  # before the store was split (issue 19)
        return out
    for cls in (Records, Vectors, RunLog, LLMCache, HookCursors, LanceTables):
        out[cls.__name__] = public_methods(cls)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--top", type=int, default=5)
    args = parser.parse_args()
    root = Path(__file__).resolve().parent.parent
    cycles = import_cycles()
    print(f"import cycles: {len(cycles)}")
    for component in cycles:
        print("  " + " <-> ".join(component))
    print("longest functions (lines):")
    for lines, where in longest_functions(root, args.top):
        print(f"  {lines:4d}  {where}")
    print("public methods of the store's parts:")
    for name, methods in store_surface().items():
        print(f"  {name}: {len(methods)}  ({', '.join(methods)})")


if __name__ == "__main__":
    main()
