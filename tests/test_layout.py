"""The package's layout: imports run one way (no cycles), and seams are public names.

The import graph is read from the source with ``ast``: every import counts, those inside
functions too (an import moved into a function to dodge a cycle is still a cycle), except
those under ``if TYPE_CHECKING:``, which never run. Importing ``memcommit.a.b`` runs
``memcommit.a`` first, so it counts as importing both (unless the importer is inside
``memcommit.a``, which is then running already); the root package ``memcommit`` (which
re-exports everything) is left out, as every module's first import.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent.parent / "python" / "memcommit"


def _modules() -> dict[str, Path]:
    out = {}
    for path in PACKAGE.rglob("*.py"):
        parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
        if parts[-1] == "__init__":
            parts = parts[:-1]
        out[".".join(parts)] = path
    return out


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _imports(tree: ast.AST) -> Iterator[ast.Import | ast.ImportFrom]:
    for node in ast.iter_child_nodes(tree):
        if isinstance(node, ast.If) and _is_type_checking(node.test):
            yield from (n for child in node.orelse for n in _imports_of(child))
            continue
        yield from _imports_of(node)


def _imports_of(node: ast.AST) -> Iterator[ast.Import | ast.ImportFrom]:
    if isinstance(node, (ast.Import, ast.ImportFrom)):
        yield node
    else:
        yield from _imports(node)


def _targets(module: str, is_package: bool, node: ast.Import | ast.ImportFrom) -> set[str]:
    if isinstance(node, ast.Import):
        return {alias.name for alias in node.names}
    base = node.module or ""
    if node.level:
        anchor = module.split(".") if is_package else module.split(".")[:-1]
        anchor = anchor[: len(anchor) - (node.level - 1)]
        base = ".".join(anchor + ([base] if base else []))
    return {base} | {f"{base}.{alias.name}" for alias in node.names}


def import_graph() -> dict[str, set[str]]:
    """Each memcommit module and the memcommit modules its imports run."""
    modules = _modules()
    graph: dict[str, set[str]] = {}
    for name, path in modules.items():
        is_package = path.name == "__init__.py"
        edges: set[str] = set()
        for node in _imports(ast.parse(path.read_text(encoding="utf-8"))):
            for target in _targets(name, is_package, node):
                parts = target.split(".")
                for i in range(2, len(parts) + 1):  # the packages on the way run first
                    prefix = ".".join(parts[:i])
                    # A package this module is in is running already: no edge to it.
                    if prefix in modules and not (name + ".").startswith(prefix + "."):
                        edges.add(prefix)
        graph[name] = edges
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan's algorithm)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    out: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                out.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


def test_no_import_cycle() -> None:
    assert cycles(import_graph()) == []


def _private(name: str) -> bool:
    return name.startswith("_") and not name.startswith("__")


def _defined_here(tree: ast.AST) -> set[str]:
    """The private names a module defines: functions, classes, attributes set on self."""
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store):
            names.add(node.attr)
        elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            names.add(node.id)
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            names.add(node.target.id)
    return {n for n in names if _private(n)}


def private_reads(module: str, tree: ast.AST) -> list[str]:
    """Private names `module` takes from another module.

    ``from m import _x``, and ``obj._x`` where this module defines no ``_x`` (so the
    attribute is another module's); ``self._x`` and ``cls._x`` are a class's own. Importing
    the binding ``_native`` is fine: it is a module.
    """
    here = _defined_here(tree)
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module != "__future__":
            found += [
                f"line {node.lineno}: from {node.module} import {a.name}"
                for a in node.names
                if _private(a.name) and a.name != "_native"
            ]
        elif isinstance(node, ast.Attribute) and _private(node.attr) and node.attr not in here:
            own = isinstance(node.value, ast.Name) and node.value.id in ("self", "cls")
            if not own:
                found.append(f"line {node.lineno}: .{node.attr}")
    return found


# The modules held to public names so far (the rest still reach into the store's private API
# until the engine interface replaces it).
PUBLIC_ONLY = (
    "memcommit.server",
    "memcommit.remote",
    "memcommit.wire",
    "memcommit.testing.server",
    "memcommit.seals",
    "memcommit.storage",
    "memcommit.tiers",
    "memcommit.lineage",
    "memcommit.summarize",
    "memcommit.cli",
    "memcommit.integrations",
    "memcommit.aio",
)


def test_the_modules_built_on_the_store_read_no_other_modules_private_names() -> None:
    """They meet the store and each other through public names (`store.engine`, ...)."""
    found = {}
    for name, path in sorted(_modules().items()):
        if any(name == m or name.startswith(m + ".") for m in PUBLIC_ONLY):
            reads = private_reads(name, ast.parse(path.read_text(encoding="utf-8")))
            if reads:
                found[name] = reads
    assert found == {}
