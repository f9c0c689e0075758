"""Import cycles over every kvviz module, function-local imports included: a module may import another at its
top or inside a function, and either way the two may not lean on each other, however far round.

An edge is an import the module runs (not one under `if TYPE_CHECKING:`), to the module named and to each
package above it that Python initialises on the way (not the importer's own packages, already under way).
"""
from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def _modules() -> dict[str, Path]:
    out = {}
    for path in sorted((ROOT / "kvviz").rglob("*.py")):
        parts = list(path.relative_to(ROOT).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        out[".".join(parts)] = path
    return out


def _type_checking(node: ast.AST) -> bool:
    test = getattr(node, "test", None)
    return isinstance(node, ast.If) and (
        (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING")
        or (isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"))


def _imports(tree: ast.AST):
    """Every import statement that runs, at the top or in a function (not under `if TYPE_CHECKING:`)."""
    stack = [tree]
    while stack:
        node = stack.pop()
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            yield node
        stack.extend(n for n in ast.iter_child_nodes(node) if not _type_checking(n))


def import_graph(modules: dict[str, Path]) -> dict[str, set[str]]:
    graph = {}
    for name, path in modules.items():
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        named = set()
        for node in _imports(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                named |= {a.name for a in node.names}
                continue
            base = node.module or ""
            if node.level:
                up = package.split(".")[:len(package.split(".")) - (node.level - 1)]
                base = ".".join(up + ([node.module] if node.module else []))
            for alias in node.names:
                named.add(f"{base}.{alias.name}" if f"{base}.{alias.name}" in modules else base)
        edges = set()
        for target in named:
            parts = target.split(".")
            for i in range(1, len(parts) + 1):
                above = ".".join(parts[:i])
                own = name == above or name.startswith(above + ".")  # a package the importer is inside
                if above in modules and (above == target or not own):
                    edges.add(above)
        edges.discard(name)
        graph[name] = edges
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan's, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found = []
    for root in graph:
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, targets = work[-1]
            for target in targets:
                if target not in index:
                    index[target] = low[target] = len(index)
                    stack.append(target)
                    on_stack.add(target)
                    work.append((target, iter(sorted(graph[target]))))
                    break
                if target in on_stack:
                    low[node] = min(low[node], index[target])
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


# Imports that still close a circle, each in a module that is to move it: (importer, imported): the move.
# The test holds every other edge to no cycle; an entry whose import has gone is refused (the list only shrinks).
TO_MOVE: dict[tuple[str, str], str] = {}


def _edges_inside(graph, component) -> list[str]:
    members = set(component)
    return [f"{a} -> {b}" for a in component for b in sorted(graph[a] & members)]


def test_the_cycle_finder_finds_a_function_local_circle_and_a_package_init():
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}, "p": {"p.x"}, "p.x": set(), "q": set()}
    assert cycles(graph) == [["a", "b", "c"]]
    modules = _modules()
    built = import_graph(modules)
    # a function-local import counts: measure.bandwidth imports kvviz.native inside a function only
    assert "kvviz.native" in built["kvviz.measure.bandwidth"]
    # importing kvviz.caches.slots initialises kvviz.caches on the way, except from inside kvviz.caches
    assert {"kvviz.caches", "kvviz.caches.slots"} <= built["kvviz.measure.reference"]
    assert "kvviz.caches.slots" in built["kvviz.caches.paged"] and "kvviz.caches" not in built["kvviz.caches.paged"]


def test_no_kvviz_module_is_part_of_an_import_cycle():
    graph = import_graph(_modules())
    gone = [edge for edge in TO_MOVE if edge[1] not in graph[edge[0]]]
    assert not gone, f"no longer imported, strike from TO_MOVE: {gone}"
    for importer, imported in TO_MOVE:
        graph[importer].discard(imported)
    found = cycles(graph)
    assert not found, "import cycles:\n" + "\n".join(
        f"{len(c)} modules: " + "; ".join(_edges_inside(graph, c)) for c in found)
