"""The package's layers point one way (issue 9): no import cycle, function-local imports included.

The import graph is read from the source with ``ast`` (every ``import`` / ``from ... import`` statement,
wherever it stands), not from ``sys.modules``, so an import hidden inside a function counts too.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest
import tomllib

REPO = Path(__file__).resolve().parents[1]

#: which packages each layer may import (besides itself); the root face and the CLI may import anything
ALLOWED = {
    "soadyn.model": set(),
    "soadyn.reference": {"soadyn.model"},
    "soadyn.structure": {"soadyn.model", "soadyn.reference"},
    "soadyn.symbolic": {"soadyn.model"},
    "soadyn.templates": set(),
    "soadyn.codegen": {"soadyn.model", "soadyn.structure", "soadyn.symbolic", "soadyn.reference",
                       "soadyn.templates", "soadyn._version"},
    "soadyn.runtime": {"soadyn.model", "soadyn.structure", "soadyn.symbolic", "soadyn.reference",
                       "soadyn.codegen", "soadyn._version"},
}


def _package_dirs() -> dict[str, Path]:
    cfg = tomllib.loads((REPO / "pyproject.toml").read_text())
    return {pkg: REPO / d for pkg, d in cfg["tool"]["setuptools"]["package-dir"].items()}


def _modules() -> dict[str, Path]:
    mods: dict[str, Path] = {}
    for pkg, d in _package_dirs().items():
        for p in d.rglob("*.py"):
            rel = p.relative_to(d).with_suffix("")
            parts = [] if rel.parts == ("__init__",) else list(rel.parts)
            if parts and parts[-1] == "__init__":
                parts = parts[:-1]
            name = ".".join([pkg, *parts])
            # a sub-folder that is its own package in package-dir is listed under that name
            if name not in mods:
                mods[name] = p
    return mods


def imports_of(source: str, module: str, is_pkg: bool, known: set[str]) -> set[str]:
    """The modules of ``known`` that ``source`` (the text of ``module``) imports, at any depth of the code."""
    base = module if is_pkg else module.rsplit(".", 1)[0]
    found: set[str] = set()
    for node in ast.walk(ast.parse(source)):
        targets: list[str] = []
        if isinstance(node, ast.Import):
            targets = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                b = base
                for _ in range(node.level - 1):
                    b = b.rsplit(".", 1)[0]
                mod = b + ("." + node.module if node.module else "")
            else:
                mod = node.module or ""
            targets = [mod] + [f"{mod}.{a.name}" for a in node.names]
        for t in targets:
            # the longest known module that t names (``soadyn.x.y.func`` -> ``soadyn.x.y``)
            while t and t not in known:
                t = t.rsplit(".", 1)[0] if "." in t else ""
            if t and t != module:
                found.add(t)
    return found


def import_graph() -> dict[str, set[str]]:
    """module -> the soadyn modules it imports (absolute and relative, function-local ones included)."""
    mods = _modules()
    known = set(mods)
    return {m: imports_of(p.read_text(), m, p.name == "__init__.py", known) for m, p in mods.items()}


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    out: list[list[str]] = []
    counter = 0
    for root in graph:
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on.add(root)
        while work:
            v, it = work[-1]
            w = next(it, None)
            if w is not None:
                if w not in index:
                    index[w] = low[w] = counter
                    counter += 1
                    stack.append(w)
                    on.add(w)
                    work.append((w, iter(sorted(graph[w]))))
                elif w in on:
                    low[v] = min(low[v], index[w])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[v])
            if low[v] == index[v]:
                comp = []
                while True:
                    w = stack.pop()
                    on.discard(w)
                    comp.append(w)
                    if w == v:
                        break
                if len(comp) > 1:
                    out.append(sorted(comp))
    return out


def _layer(mod: str) -> str:
    parts = mod.split(".")
    return ".".join(parts[:2]) if len(parts) > 1 else mod


def test_cycle_detector_finds_a_planted_cycle():
    g = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert _cycles(g) == [["a", "b", "c"]]
    assert _cycles({"a": {"b"}, "b": set()}) == []


def test_reader_sees_function_local_and_relative_imports():
    """An import inside a function body (the kind that hid cycles before) and a relative one both count."""
    known = {"soadyn.model", "soadyn.model.robot", "soadyn.structure", "soadyn.structure.operations"}
    src = "def f():\n    from soadyn.structure.operations import lock_joints\n    return lock_joints\n"
    assert imports_of(src, "soadyn.model.robot", False, known) == {"soadyn.structure.operations"}
    assert imports_of("from . import robot\n", "soadyn.model", True, known) == {"soadyn.model.robot"}
    rel = imports_of("from .robot import Robot\n", "soadyn.model.other", False, known)
    assert rel == {"soadyn.model.robot"}
    assert len(import_graph()) > 40


def test_no_import_cycles():
    cycles = _cycles(import_graph())
    assert not cycles, "import cycles: " + "; ".join(" <-> ".join(c) for c in cycles)


@pytest.mark.parametrize("layer", sorted(ALLOWED))
def test_layer_imports_point_one_way(layer):
    bad = []
    for m, targets in import_graph().items():
        if _layer(m) != layer:
            continue
        for t in sorted(targets):
            lt = _layer(t)
            if lt != layer and lt not in ALLOWED[layer]:
                bad.append(f"{m} -> {t}")
    may = sorted(ALLOWED[layer]) or "nothing of soadyn"
    assert not bad, f"{layer} may import only {may}: " + ", ".join(bad)


def test_algorithms_import_only_the_core_and_the_model():
    bad = [f"{m} -> {t}" for m, ts in import_graph().items() if m.startswith("soadyn.symbolic.algorithms")
           for t in ts if not (t.startswith("soadyn.symbolic") or t.startswith("soadyn.model"))]
    assert not bad, ", ".join(bad)
