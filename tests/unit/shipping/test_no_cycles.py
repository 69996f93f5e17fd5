"""No module of the production packages imports, directly or through others, a module that imports it back:
a cycle makes both modules one unit to read, test and load (imports under TYPE_CHECKING count)."""

from __future__ import annotations

import grimp

PACKAGES = ("exporter", "autoscaler", "plumbing", "fleet")


def cycles(imports: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan's algorithm, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    on_stack: set[str] = set()
    stack: list[str] = []
    found: list[list[str]] = []
    counter = 0
    for root in sorted(imports):
        if root in index:
            continue
        work = [(root, iter(sorted(imports.get(root, ()))))]
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
                    work.append((child, iter(sorted(imports.get(child, ())))))
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
                    found.append(sorted(component))
    return found


def test_the_finder_finds_a_cycle_and_nothing_else() -> None:
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}, "e": set()}
    assert cycles(graph) == [["a", "b", "c"]]
    assert cycles({"a": {"b"}, "b": set()}) == []


def test_no_module_cycle_in_the_production_packages() -> None:
    graph = grimp.build_graph(*PACKAGES)
    modules = {m for m in graph.modules if m.split(".")[0] in PACKAGES}
    imports = {m: {d for d in graph.find_modules_directly_imported_by(m) if d in modules} for m in modules}
    # A package's __init__ re-exporting its own modules is no cycle a reader meets.
    for module, imported in imports.items():
        imported -= {d for d in imported if module.startswith(d + ".") or d.startswith(module + ".")}
    assert cycles(imports) == []
