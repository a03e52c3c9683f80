"""Packaging: every Python package folder is installed by a non-editable ``pip install .``.

pyproject.toml lists the packages explicitly (the folders are mapped onto ``soadyn.*``); a new
subpackage that is not listed works in an editable install and breaks a wheel, so check the list.
"""

from __future__ import annotations

import sys
from pathlib import Path

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

REPO = Path(__file__).resolve().parents[1]


def test_every_package_folder_is_listed():
    cfg = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["setuptools"]
    listed = set(cfg["packages"])
    mapping = cfg["package-dir"]
    found = set()
    for pkg, folder in mapping.items():
        for init in (REPO / folder).rglob("__init__.py"):
            rel = init.parent.relative_to(REPO / folder)
            if "__pycache__" in rel.parts:
                continue
            found.add(".".join([pkg, *rel.parts]) if rel.parts else pkg)
    assert found <= listed, f"add to [tool.setuptools] packages: {sorted(found - listed)}"


def test_templates_and_schema_are_package_data():
    cfg = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["setuptools"]["package-data"]
    assert any(p.endswith(".j2") for p in cfg["soadyn.templates"])
    assert list((REPO / "templates").glob("*.j2"))
    assert "*.json" in cfg["soadyn.model"] and (REPO / "model" / "schema.json").is_file()


#: distribution name -> import name, where they differ
IMPORT_NAME = {"pyyaml": "yaml", "pin": "pinocchio"}
#: declared for a reason other than an import statement
NOT_IMPORTED = {"setuptools": "cffi's API-mode build needs distutils from setuptools on Python >= 3.12"}


def _third_party_imports() -> set[str]:
    """Top-level names of every non-stdlib, non-soadyn import in the installed package folders (module
    level and function local)."""
    import ast

    cfg = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["setuptools"]
    out: set[str] = set()
    for folder in set(cfg["package-dir"].values()):
        for path in (REPO / folder).rglob("*.py"):
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
                if isinstance(node, ast.Import):
                    out.update(a.name.split(".")[0] for a in node.names)
                elif isinstance(node, ast.ImportFrom) and not node.level and node.module:
                    out.add(node.module.split(".")[0])
    return {m for m in out if m not in sys.stdlib_module_names and m not in ("soadyn", "__future__")}


def test_declared_dependencies_are_the_imported_ones():
    """Every runtime dependency is imported by the package (or says why not), and every third-party
    import of the package is declared."""
    import re

    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]

    def names(reqs: list[str]) -> set[str]:
        dists = (re.match(r"[A-Za-z0-9_.-]+", r).group(0).lower() for r in reqs)
        return {IMPORT_NAME.get(n, n) for n in dists if n not in NOT_IMPORTED}

    required = names(project["dependencies"])
    optional = names([r for group in project["optional-dependencies"].values() for r in group])
    used = _third_party_imports()
    assert required - used == set(), "declared but never imported: remove from [project] dependencies"
    assert used - required - optional == set(), "imported but not declared in [project] dependencies"
