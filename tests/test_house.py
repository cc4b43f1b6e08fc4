"""The package's bounds: small modules, no import cycle (lazy imports count), and contracts in its
code, not the record of runs (which lives in docs/ and bench/results/)."""

import ast
from pathlib import Path

PKG = Path(__file__).resolve().parents[1] / "sglang_mux"
MAX_LINES = 700


def _modules() -> dict[str, Path]:
    out = {}
    for p in PKG.rglob("*.py"):
        parts = p.relative_to(PKG.parent).with_suffix("").parts
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        out[name] = p
    return out


def import_graph(modules: dict[str, Path]) -> dict[str, set[str]]:
    """Module -> the package modules it imports anywhere in its text (at import time or lazily,
    type-checking blocks included). An import of a module's own parent package is left out: Python
    runs that package first whatever imports it."""
    graph = {}
    for name, path in modules.items():
        pkg = name if path.name == "__init__.py" else name.rpartition(".")[0]
        edges = set()
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    up = pkg.split(".")[: len(pkg.split(".")) - node.level + 1]
                    base = ".".join(up + ([base] if base else []))
                targets = [f"{base}.{a.name}" for a in node.names] + [base]
            else:
                continue
            for t in targets:
                while t and t not in modules:
                    t = t.rpartition(".")[0]
                if t and t != name and not name.startswith(t + "."):
                    edges.add(t)
                    break
        graph[name] = edges
    return graph


def cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One import cycle of ``graph`` (its modules in order), or None."""
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(n):
        state[n] = 1
        stack.append(n)
        for m in sorted(graph.get(n, ())):
            if state.get(m) == 1:
                return stack[stack.index(m):] + [m]
            if m not in state:
                found = visit(m)
                if found:
                    return found
        stack.pop()
        state[n] = 2
        return None

    for n in sorted(graph):
        if n not in state:
            found = visit(n)
            if found:
                return found
    return None


def test_the_cycle_finder_finds_a_lazy_cycle_and_not_a_parent_package():
    assert cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert cycle({"a": {"b"}, "b": set()}) is None


def test_no_import_cycle_in_the_package():
    found = cycle(import_graph(_modules()))
    assert found is None, "import cycle: " + " -> ".join(found)


def test_no_module_over_the_bound():
    big = {str(p.relative_to(PKG.parent)): n for p in PKG.rglob("*.py")
           if (n := len(p.read_text().splitlines())) > MAX_LINES}
    assert not big, f"modules over {MAX_LINES} lines (split them by concern): {big}"


def test_package_code_names_no_results_folder():
    named = [str(p.relative_to(PKG.parent)) for p in PKG.rglob("*.py") if "bench/results" in p.read_text()]
    assert not named, f"package code names bench/results paths (the record belongs in docs/): {named}"
