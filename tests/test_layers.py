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
    "soadyn.structure": {"soadyn.model", "soadyn.symbolic"},
    "soadyn.symbolic": {"soadyn.model"},
    "soadyn.templates": set(),
    "soadyn.codegen": {"soadyn.model", "soadyn.structure", "soadyn.symbolic", "soadyn.templates",
                       "soadyn._version"},
    "soadyn.runtime": {"soadyn.model", "soadyn.structure", "soadyn.symbolic", "soadyn.codegen",
                       "soadyn._version"},
}

#: The reference path is an oracle (issue 22 item 4): no production module imports soadyn.reference.  The
#: one user is verification, which resolves the registry's dotted names (codegen/functions.py) with
#: importlib in codegen/verify.py; tests and the examples below that show agreement with it may import it.
ORACLE_USERS = {"soadyn.codegen.verify"}
EXAMPLES_SHOWING_AGREEMENT = {"seed004_example1.py"}
#: modules of other branches that still import the reference and switch to soadyn.symbolic.frames when they
#: merge (module -> why); the test fails when an entry is no longer needed, so the list only shrinks
PENDING: dict[str, str] = {}


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
            pending = m in PENDING and lt == "soadyn.reference"
            if lt != layer and lt not in ALLOWED[layer] and not pending:
                bad.append(f"{m} -> {t}")
    may = sorted(ALLOWED[layer]) or "nothing of soadyn"
    assert not bad, f"{layer} may import only {may}: " + ", ".join(bad)


def test_algorithms_import_only_the_core_and_the_model():
    bad = [f"{m} -> {t}" for m, ts in import_graph().items() if m.startswith("soadyn.symbolic.algorithms")
           for t in ts if not (t.startswith("soadyn.symbolic") or t.startswith("soadyn.model"))]
    assert not bad, ", ".join(bad)


def reference_imports(source: str, module: str, is_pkg: bool, known: set[str]) -> list[str]:
    """What ``source`` imports of soadyn.reference: statically (any depth) or by a literal module name given
    to ``importlib.import_module`` / ``__import__``."""
    hits = sorted(x for x in imports_of(source, module, is_pkg, known) if _layer(x) == "soadyn.reference")
    for node in ast.walk(ast.parse(source)):
        if not (isinstance(node, ast.Call) and node.args and isinstance(node.args[0], ast.Constant)):
            continue
        name = node.args[0].value
        func = getattr(node.func, "attr", getattr(node.func, "id", ""))
        literal = isinstance(name, str) and name.startswith("soadyn.reference")
        if func in ("import_module", "__import__") and literal:
            hits.append(name)
    return hits


def _reference_importers() -> dict[str, list[str]]:
    """Production module -> what it imports of soadyn.reference."""
    mods = _modules()
    known = set(mods)
    out = {m: reference_imports(p.read_text(), m, p.name == "__init__.py", known) for m, p in mods.items()
           if _layer(m) != "soadyn.reference"}
    return {m: t for m, t in out.items() if t}


def test_production_code_does_not_import_the_reference_path():
    """Structure operations, runtime, CLI, codegen and the root face never import soadyn.reference (the
    oracle); float kinematics come from the generic core (soadyn.symbolic.frames) or a compiled module."""
    found = _reference_importers()
    bad = [f"{m} -> {', '.join(t)}" for m, t in sorted(found.items())
           if m not in ORACLE_USERS and m not in PENDING]
    assert not bad, ("production code imports the reference path (an oracle for tests and verify only; use "
                     "soadyn.symbolic.frames or a compiled module): " + "; ".join(bad))
    stale = sorted(set(PENDING) - set(found))
    assert not stale, f"remove {stale} from PENDING: they no longer import soadyn.reference"


def test_reference_rule_sees_local_and_dynamic_imports():
    """The rule catches a function-local import and an importlib call with a literal name (it can fail)."""
    known = {"soadyn.runtime.x", "soadyn.reference", "soadyn.reference.dense"}
    src = "def f():\n    from soadyn.reference.dense import frame_pose\n    return frame_pose\n"
    assert reference_imports(src, "soadyn.runtime.x", False, known) == ["soadyn.reference.dense"]
    src = "import importlib\nm = importlib.import_module('soadyn.reference.dense')\n"
    assert reference_imports(src, "soadyn.runtime.x", False, known) == ["soadyn.reference.dense"]
    src = "from soadyn.symbolic.frames import frame_pose\nname = 'soadyn.reference.dense.frame_pose'\n"
    assert reference_imports(src, "soadyn.runtime.x", False, known | {"soadyn.symbolic.frames"}) == []


def test_examples_use_the_reference_only_to_show_agreement():
    """Examples that merely need a frame pose use the core or a compiled module, not the oracle."""
    bad = []
    for p in sorted((REPO / "examples").glob("*.py")):
        for node in ast.walk(ast.parse(p.read_text())):
            names = ([a.name for a in node.names] if isinstance(node, ast.Import)
                     else [node.module or ""] if isinstance(node, ast.ImportFrom) else [])
            uses = any(n.startswith("soadyn.reference") for n in names)
            if uses and p.name not in EXAMPLES_SHOWING_AGREEMENT:
                bad.append(f"{p.name}: {', '.join(names)}")
    assert not bad, "; ".join(bad)
