"""examples/identify_payload.py: the payload's mass to <= 1 % and CoM to <= 1 mm from the momentum regressor
at the noise the script states (modules cached across sessions)."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest
from conftest import EXAMPLES, module_cache_dir


@pytest.fixture(scope="module")
def out(request, tmp_path_factory) -> Path:
    if os.environ.get("SOADYN_TEST_FRESH") or getattr(request.config, "cache", None) is None:
        return tmp_path_factory.mktemp("soadyn_identify")
    return Path(module_cache_dir(request, tmp_path_factory, "soadyn_identify"))


def test_identify_payload_meets_its_claims(out, capsys):
    sys.path.insert(0, str(EXAMPLES))
    try:
        import identify_payload
    finally:
        sys.path.remove(str(EXAMPLES))
    res = identify_payload.main(["--out", str(out)])
    text = capsys.readouterr().out
    assert res["ok"] and res["momentum"]["mass"] <= 0.01 and res["momentum"]["com_mm"] <= 1.0
    assert "noise (1 sigma)" in text and "condition number" in text
    # the identification is not a copy of the truth: the errors are those of noisy data, not zero
    assert res["momentum"]["mass"] > 1e-6 and res["torque"]["com_mm"] > 1e-3
