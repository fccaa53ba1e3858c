"""The import graph of the project's own code, read from the source with ``ast``.

Every import counts, at module level or inside a function (a lazy import still ties two
modules together). ``eager`` edges are the module-level ones only: what importing a module
actually loads.
"""

from __future__ import annotations

import ast
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

PACKAGES = ("schema", "crawlers", "service")


@dataclass
class Graph:
    modules: dict[str, Path]
    edges: dict[str, set[str]] = field(default_factory=dict)
    eager: dict[str, set[str]] = field(default_factory=dict)
    external: dict[str, set[str]] = field(default_factory=dict)
    """Top-level names of the third-party and standard modules each module imports."""


def module_name(root: Path, path: Path) -> str:
    parts = path.relative_to(root).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _imported(node: ast.AST, package: str) -> Iterator[tuple[str, list[str]]]:
    if isinstance(node, ast.Import):
        for alias in node.names:
            yield alias.name, []
    elif isinstance(node, ast.ImportFrom):
        base = node.module or ""
        if node.level:
            parts = package.split(".")[: len(package.split(".")) - node.level + 1]
            base = ".".join([*parts, base] if base else parts)
        yield base, [alias.name for alias in node.names]


def _module_level(tree: ast.Module) -> Iterator[ast.AST]:
    """Statements run on import: the module body, including its if/try blocks, but not
    function bodies nor ``if TYPE_CHECKING:`` blocks."""
    stack: list[ast.stmt] = list(tree.body)
    while stack:
        node = stack.pop()
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            stack.extend(node.orelse)
            continue
        if isinstance(node, ast.If | ast.Try | ast.With):
            for child in ast.iter_child_nodes(node):
                if isinstance(child, ast.stmt):
                    stack.append(child)
                elif isinstance(child, ast.ExceptHandler):
                    stack.extend(child.body)
            continue
        if isinstance(node, ast.ClassDef):
            stack.extend(node.body)
            continue
        yield node


def build(root: Path, packages: Iterable[str] = PACKAGES) -> Graph:
    modules = {
        module_name(root, path): path
        for package in packages
        for path in sorted((root / package).rglob("*.py"))
    }
    graph = Graph(modules)
    for name, path in modules.items():
        tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        eager_nodes = {id(node) for node in _module_level(tree)}
        edges: set[str] = set()
        eager: set[str] = set()
        external: set[str] = set()
        for node in ast.walk(tree):
            for base, names in _imported(node, package):
                targets = [f"{base}.{n}" for n in names if f"{base}.{n}" in modules]
                if not targets and base in modules:
                    targets = [base]
                if not targets and base.split(".")[0] not in packages:
                    external.add(base.split(".")[0])
                edges.update(targets)
                if id(node) in eager_nodes:
                    eager.update(targets)
        edges.discard(name)
        eager.discard(name)
        graph.edges[name] = edges
        graph.eager[name] = eager
        graph.external[name] = external
    return graph


def cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    on_stack: set[str] = set()
    stack: list[str] = []
    found: list[list[str]] = []
    counter = 0
    for start in sorted(edges):
        if start in index:
            continue
        work: list[tuple[str, Iterator[str]]] = [(start, iter(sorted(edges[start])))]
        index[start] = low[start] = counter
        counter += 1
        stack.append(start)
        on_stack.add(start)
        while work:
            node, successors = work[-1]
            for succ in successors:
                if succ not in index:
                    index[succ] = low[succ] = counter
                    counter += 1
                    stack.append(succ)
                    on_stack.add(succ)
                    work.append((succ, iter(sorted(edges.get(succ, ())))))
                    break
                if succ in on_stack:
                    low[node] = min(low[node], index[succ])
            else:
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
                        found.append(sorted(component))
    return found


def reachable(edges: dict[str, set[str]], starts: Iterable[str]) -> set[str]:
    seen: set[str] = set()
    todo = list(starts)
    while todo:
        node = todo.pop()
        if node not in seen:
            seen.add(node)
            todo.extend(edges.get(node, ()))
    return seen
