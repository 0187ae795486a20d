"""The layering guard: which modules of a package import which, and what breaks the rules.

Every module's imports are read with `ast`: at module level, inside functions, and under
`if TYPE_CHECKING:`. Two kinds of problem are reported:

- An import cycle: modules that import each other, directly or round a loop. Cycles are looked
  for between components (a top-level module, or a subpackage taken as a whole: `permissions`
  importing `tools.base` while `tools.toolbox` imports `permissions` is one), and between the
  modules inside one subpackage.
- An upward import: a module importing from a layer above its own. Layers are listed top
  first; a module may import its own layer and the layers below it. A module that is in no
  layer is a problem too, so a new module has to be placed.

Imports under `TYPE_CHECKING` count for both. They never run, so they cannot break an import,
but they are a dependency all the same: a reader must follow them, and a type-only import is
the usual way a cycle gets hidden instead of removed.
"""

from __future__ import annotations

import ast
from collections.abc import Callable, Sequence
from pathlib import Path

Graph = dict[str, set[str]]
# (layer name, modules relative to the package). A subpackage's name covers all its modules;
# "__init__" is the package's own __init__.py.
Layers = Sequence[tuple[str, Sequence[str]]]


def problems(package_dir: Path, layers: Layers) -> list[str]:
    """Every cycle and every import against the order of `layers`, for a person to read."""
    graph = imports(package_dir)
    return cycles(graph) + upward_imports(graph, package_dir.name, layers)


def imports(package_dir: Path) -> Graph:
    """Each module of the package (dotted name) -> the modules of the package it imports."""
    files = {_module_name(package_dir, path): path for path in sorted(package_dir.rglob("*.py"))}
    return {name: _imports_of(name, path, set(files)) for name, path in files.items()}


def cycles(graph: Graph) -> list[str]:
    """Each cycle, as the imports that make it."""
    found = [_ties(graph, group, _component) for group in _strongly_connected(_collapse(graph))]
    found += [
        _ties(graph, group, str)
        for group in _strongly_connected(graph)
        if len({_component(m) for m in group}) == 1
    ]
    return [f"import cycle: {ties}" for ties in found]


def upward_imports(graph: Graph, root: str, layers: Layers) -> list[str]:
    """Modules in no layer, and each import of a layer above the importer's."""
    found = [
        f"{m} is in no layer: add it to the table" for m in graph if _layer(m, root, layers) is None
    ]
    for module, targets in sorted(graph.items()):
        here = _layer(module, root, layers)
        for target in sorted(targets):
            there = _layer(target, root, layers)
            if here is not None and there is not None and there < here:
                found.append(
                    f"{module} ({layers[here][0]}) imports {target} from a layer above it "
                    f"({layers[there][0]})"
                )
    return found


def room_cycles(graph: Graph) -> list[str]:
    """Each cycle between the rooms of one folder (its subpackages, such as tools/files and
    tools/search), as the imports that make it. A room may use a sibling; two rooms that use
    each other, even through different modules, are one concern, or share a part that belongs
    above them both (in the folder's own modules)."""
    rooms: Graph = {}
    for module, targets in graph.items():
        mine = _room(module)
        if mine is not None:
            rooms.setdefault(mine, set()).update(
                {r for r in map(_room, targets) if r is not None and r != mine}
            )
    groups = [g for g in _strongly_connected(rooms) if len({_component(r) for r in g}) == 1]
    return [f"import cycle between rooms: {_ties(graph, g, _room_or_self)}" for g in groups]


def _room(module: str) -> str | None:
    """The room a module is in (`pkg.folder.room` for `pkg.folder.room.module`), if any."""
    parts = module.split(".")
    return ".".join(parts[:3]) if len(parts) >= 4 else None


def _room_or_self(module: str) -> str:
    return _room(module) or module


def _module_name(package_dir: Path, path: Path) -> str:
    parts = [package_dir.name, *path.relative_to(package_dir).with_suffix("").parts]
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _imports_of(name: str, path: Path, modules: set[str]) -> set[str]:
    found: set[str] = set()
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = _absolute(package, node.module, node.level)
            # `from pkg import sub` imports the module pkg.sub when there is one.
            found.update(
                f"{base}.{alias.name}" if f"{base}.{alias.name}" in modules else base
                for alias in node.names
            )
    return (found & modules) - {name}


def _absolute(package: str, module: str | None, level: int) -> str:
    """The absolute name of `from <level dots><module> import …` written in `package`."""
    if level == 0:
        return module or ""
    parts = package.split(".")
    parts = parts[: len(parts) - (level - 1)]
    return ".".join([*parts, module] if module else parts)


def _component(module: str) -> str:
    """The package itself, a top-level module, or a whole subpackage."""
    return ".".join(module.split(".")[:2])


def _collapse(graph: Graph) -> Graph:
    """The graph between components (imports inside one component left out)."""
    collapsed: Graph = {}
    for module, targets in graph.items():
        mine = _component(module)
        collapsed.setdefault(mine, set()).update({_component(t) for t in targets} - {mine})
    return collapsed


def _strongly_connected(graph: Graph) -> list[set[str]]:
    """The groups of nodes that reach each other (every cycle lies inside one group)."""
    reach = {node: _reachable(graph, node) for node in graph}
    groups = {frozenset(m for m in reach[n] if n in reach[m]) for n in graph if n in reach[n]}
    return sorted((set(g) for g in groups), key=sorted)


def _reachable(graph: Graph, start: str) -> set[str]:
    seen: set[str] = set()
    todo = list(graph.get(start, ()))
    while todo:
        node = todo.pop()
        if node not in seen:
            seen.add(node)
            todo.extend(graph.get(node, ()))
    return seen


def _ties(graph: Graph, group: set[str], node: Callable[[str], str]) -> str:
    """The imports that tie a cycle's `group` together; `node` maps a module to its node."""
    pairs = [
        f"{a} -> {b}"
        for a in sorted(graph)
        for b in sorted(graph[a])
        if node(a) != node(b) and {node(a), node(b)} <= group
    ]
    return ", ".join(pairs)


def _layer(module: str, root: str, layers: Layers) -> int | None:
    """The index of the module's layer (0 is the top), by its longest listed prefix."""
    parts = (module.removeprefix(root).lstrip(".") or "__init__").split(".")
    for end in range(len(parts), 0, -1):
        for index, (_, members) in enumerate(layers):
            if ".".join(parts[:end]) in members:
                return index
    return None
