"""The measures of the house (issue 22), held by a test: no import circle in src/sift, no
module over 500 lines, no function over 80.

Every import counts, wherever it stands: at module level, inside a function (a lazy import
still closes a circle the moment it runs) and under ``if TYPE_CHECKING:`` (a circle in the
types is a circle in the design). The graph is built from the source with ``ast``, nothing
is imported, so the test also sees modules whose optional dependencies are missing.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator, Mapping
from pathlib import Path

SRC = Path(__file__).resolve().parent.parent / "src"
PACKAGE = "sift"
MAX_MODULE_LINES = 500
MAX_FUNCTION_LINES = 80


def module_files(src: Path = SRC) -> dict[str, Path]:
    """Dotted module name -> file, for every module under src/sift; a package's
    ``__init__.py`` is the package module itself."""
    modules: dict[str, Path] = {}
    for path in sorted((src / PACKAGE).rglob("*.py")):
        parts = list(path.relative_to(src).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        modules[".".join(parts)] = path
    return modules


def _absolute(module: str, is_package: bool, node: ast.ImportFrom) -> str:
    """The absolute dotted name a ``from ... import`` names, relative forms included."""
    if node.level == 0:
        return node.module or ""
    base = module.split(".")
    if not is_package:
        base.pop()
    if node.level > 1:
        base = base[: len(base) - (node.level - 1)]
    return ".".join([*base, node.module] if node.module else base)


def imports_of(module: str, path: Path, modules: Mapping[str, Path]) -> set[str]:
    """The sift modules ``module`` imports, every import statement in the file counted.

    ``import sift.x.y`` names sift.x.y; ``from sift.x import y`` names sift.x.y when that is a
    module, else sift.x (y is a name defined there)."""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    is_package = path.name == "__init__.py"
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name in modules:
                    found.add(alias.name)
        elif isinstance(node, ast.ImportFrom):
            source = _absolute(module, is_package, node)
            for alias in node.names:
                candidate = f"{source}.{alias.name}"
                if candidate in modules:
                    found.add(candidate)
                elif source in modules:
                    found.add(source)
    found.discard(module)
    return found


def import_graph(src: Path = SRC) -> dict[str, set[str]]:
    """Module -> the sift modules it imports, for the whole of src/sift."""
    modules = module_files(src)
    return {name: imports_of(name, path, modules) for name, path in modules.items()}


def find_cycles(graph: Mapping[str, set[str]]) -> list[list[str]]:
    """One concrete circle per strongly connected component of more than one module, each as
    a path ``[a, b, ..., a]``, sorted so the failure message is stable. Pure: the graph is a
    plain mapping, so the finder is tested on a graph built by hand."""
    components = _strongly_connected(graph)
    cycles = [_cycle_in(sorted(c), graph) for c in components if len(c) > 1]
    return sorted(cycles)


def _strongly_connected(graph: Mapping[str, set[str]]) -> list[set[str]]:
    """Tarjan's algorithm, iterative (no recursion limit on a deep import chain)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    on_stack: set[str] = set()
    stack: list[str] = []
    components: list[set[str]] = []
    counter = 0
    for root in sorted(graph):
        if root in index:
            continue
        work: list[tuple[str, Iterator[str]]] = [(root, iter(sorted(graph.get(root, ()))))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = counter
                    counter += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph.get(child, ())))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[node])
            if low[node] == index[node]:
                component: set[str] = set()
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.add(member)
                    if member == node:
                        break
                components.append(component)
    return components


def _cycle_in(component: list[str], graph: Mapping[str, set[str]]) -> list[str]:
    """The shortest circle through the component's first module (breadth first, staying
    inside the component)."""
    start = component[0]
    members = set(component)
    parents: dict[str, str] = {}
    frontier = [start]
    while frontier:
        following: list[str] = []
        for node in frontier:
            for child in sorted(graph.get(node, ())):
                if child not in members:
                    continue
                if child == start:
                    path = [node]
                    while path[-1] != start:
                        path.append(parents[path[-1]])
                    return [start, *reversed(path[:-1]), start]
                if child not in parents:
                    parents[child] = node
                    following.append(child)
        frontier = following
    raise AssertionError(f"no circle through {start} in its own component")  # pragma: no cover


def _display(path: Path) -> str:
    return str(path.relative_to(SRC.parent))


# -- the finder itself, on graphs built by hand, so the measure cannot pass vacuously --------


def test_find_cycles_finds_a_circle_in_a_synthetic_graph() -> None:
    graph = {
        "a": {"b"},
        "b": {"c"},
        "c": {"a", "d"},
        "d": set(),
        "e": {"f"},
        "f": {"e"},
        "g": {"a"},
    }
    assert find_cycles(graph) == [["a", "b", "c", "a"], ["e", "f", "e"]]


def test_find_cycles_accepts_a_graph_without_circles() -> None:
    graph = {"a": {"b", "c"}, "b": {"c"}, "c": set(), "d": {"a", "missing"}}
    assert find_cycles(graph) == []


def test_import_graph_sees_every_kind_of_import(tmp_path: Path) -> None:
    """Module level, inside a function, under TYPE_CHECKING, relative, and the two readings of
    ``from package import name`` all make edges; the graph over a tree built here shows it."""
    pkg = tmp_path / PACKAGE
    (pkg / "sub").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "sub" / "__init__.py").write_text("from sift.sub.leaf import VALUE\n")
    (pkg / "sub" / "leaf.py").write_text(
        "from typing import TYPE_CHECKING\n"
        "if TYPE_CHECKING:\n"
        "    from sift.top import Top\n"
        "VALUE = 1\n"
    )
    (pkg / "top.py").write_text(
        "import sift.other\ndef later():\n    from sift.sub import leaf, VALUE\nclass Top: ...\n"
    )
    (pkg / "other.py").write_text("from .sub import VALUE\n")
    graph = import_graph(tmp_path)
    assert graph == {
        "sift": set(),
        "sift.sub": {"sift.sub.leaf"},
        "sift.sub.leaf": {"sift.top"},
        "sift.top": {"sift.other", "sift.sub", "sift.sub.leaf"},
        "sift.other": {"sift.sub"},
    }
    assert find_cycles(graph) == [
        ["sift.other", "sift.sub", "sift.sub.leaf", "sift.top", "sift.other"]
    ]


# -- the measures, over src/sift --------------------------------------------------------------


def test_no_import_circles() -> None:
    graph = import_graph()
    assert len(graph) > 50, "the walk found too few modules to mean anything"
    assert sum(len(edges) for edges in graph.values()) > 100
    cycles = find_cycles(graph)
    assert not cycles, "import circles in src/sift:\n" + "\n".join(
        "  " + " -> ".join(cycle) for cycle in cycles
    )


def rooms_of(graph: Mapping[str, set[str]]) -> dict[str, set[str]]:
    """The graph one floor up: each module folded into its room, ``sift.<first name>`` (a
    package such as ``sift.store`` or a top-level module such as ``sift.errors``). A loop
    between two rooms is a layer crossed upward even when no two modules close a circle."""
    rooms: dict[str, set[str]] = {}
    for module, targets in graph.items():
        room = ".".join(module.split(".")[:2])
        edges = rooms.setdefault(room, set())
        edges.update(".".join(t.split(".")[:2]) for t in targets)
        edges.discard(room)
    return rooms


def test_rooms_of_sees_a_loop_that_no_two_modules_close() -> None:
    graph = {
        "sift.store.rows": {"sift.batch.views"},
        "sift.batch.views": set(),
        "sift.batch.runner": {"sift.store.base"},
        "sift.store.base": set(),
    }
    assert find_cycles(graph) == []
    assert find_cycles(rooms_of(graph)) == [["sift.batch", "sift.store", "sift.batch"]]


def test_rooms_point_down() -> None:
    rooms = rooms_of(import_graph())
    assert {"sift.api", "sift.batch", "sift.store", "sift.dcache", "sift.cli"} <= set(rooms)
    cycles = find_cycles(rooms)
    assert not cycles, "rooms that import each other (a floor imports from above):\n" + (
        "\n".join("  " + " -> ".join(cycle) for cycle in cycles)
    )


def test_no_module_over_500_lines() -> None:
    too_long = []
    for path in module_files().values():
        lines = len(path.read_text(encoding="utf-8").splitlines())
        if lines > MAX_MODULE_LINES:
            too_long.append(f"  {_display(path)}:1: {lines} lines")
    assert not too_long, f"modules over {MAX_MODULE_LINES} lines:\n" + "\n".join(too_long)


def test_no_function_over_80_lines() -> None:
    too_long = []
    for path in module_files().values():
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        for node in ast.walk(tree):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                assert node.end_lineno is not None
                lines = node.end_lineno - node.lineno + 1
                if lines > MAX_FUNCTION_LINES:
                    too_long.append(f"  {_display(path)}:{node.lineno}: {node.name} {lines} lines")
    assert not too_long, f"functions over {MAX_FUNCTION_LINES} lines:\n" + "\n".join(
        sorted(too_long)
    )
