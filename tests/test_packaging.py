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
    assert "*.json" in cfg["soadyn.symbolic"] and (REPO / "symbolic" / "schema.json").is_file()
