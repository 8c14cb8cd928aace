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


def _own(value: ast.expr) -> bool:
    """Whether `value` is the object itself: ``self``, ``cls`` or ``super()``."""
    if isinstance(value, ast.Name):
        return value.id in ("self", "cls")
    return (
        isinstance(value, ast.Call)
        and isinstance(value.func, ast.Name)
        and value.func.id == "super"
    )


def _class_names(cls: ast.ClassDef) -> set[str]:
    """The private names class `cls` defines: its methods and attributes, and what it sets
    on ``self``."""
    names: set[str] = set()
    for node in ast.walk(cls):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            names.add(node.name)
        elif (
            isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store) and _own(node.value)
        ):
            names.add(node.attr)
        elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            names.add(node.id)
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            names.add(node.target.id)
    return {n for n in names if _private(n)}


def private_reads(tree: ast.AST) -> list[str]:
    """The private names a module takes from other objects.

    The rule is strict: ``x._name`` where ``x`` is not ``self``, ``cls`` or ``super()`` is a
    read of another object's private attribute, whatever ``x`` is (another object, a module,
    a call's result), and so is ``from m import _x``. Importing the binding ``_native`` is
    fine: it is a module, the package's own.

    One exception, as Python's own habits have it: inside a class, ``other._x`` where the
    class itself defines ``_x`` (a method, a class attribute, or ``self._x = ...``) is the
    class reading its own kind of object, as an ``__eq__`` comparing two instances does.
    """
    found: list[str] = []

    def visit(node: ast.AST, allowed: frozenset[str]) -> None:
        if isinstance(node, ast.ClassDef):
            allowed = allowed | _class_names(node)
        elif isinstance(node, ast.ImportFrom) and node.module != "__future__":
            found.extend(
                f"line {node.lineno}: from {node.module} import {a.name}"
                for a in node.names
                if _private(a.name) and a.name != "_native"
            )
        elif (
            isinstance(node, ast.Attribute)
            and _private(node.attr)
            and not _own(node.value)
            and node.attr not in allowed
        ):
            found.append(f"line {node.lineno}: {ast.unparse(node)}")
        for child in ast.iter_child_nodes(node):
            visit(child, allowed)

    visit(tree, frozenset())
    return found


def test_no_module_reads_another_objects_private_names() -> None:
    """Every module of the package meets other objects through public names only.

    The store's modules meet the store through its public surface and ``store.engine``; an
    object's private attributes are its own class's business (see :func:`private_reads`).
    """
    found = {}
    for name, path in sorted(_modules().items()):
        reads = private_reads(ast.parse(path.read_text(encoding="utf-8")))
        if reads:
            found[name] = reads
    assert found == {}


def test_the_strict_rule_finds_what_it_should() -> None:
    """The check itself: what it flags and the one exception it makes."""
    source = """
from m import _hidden
store._native.get("x")
self._mine
super()._init()
class A:
    def __init__(self):
        self._x = 1
    def __eq__(self, other):
        return self._x == other._x and other._y
"""
    assert private_reads(ast.parse(source)) == [
        "line 2: from m import _hidden",
        "line 3: store._native",
        "line 10: other._y",
    ]
