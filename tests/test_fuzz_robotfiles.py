"""Seeded fuzzing of robot files (issue 10): a few hundred mutants per format, no uncaught exception, no
hang, no silent acceptance, no wrong numbers (see tests/fuzzing.py for the mutations and the outcomes)."""

from __future__ import annotations

import random

import pytest
from fuzzing import run, yaml_mutants

#: mutation rounds per format (6 mutants each, plus the fixed list of attacks)
ROUNDS = 40
BAD = ("crash", "hang", "silent", "wrong")


@pytest.mark.parametrize("fmt", ["yaml", "urdf"])
def test_fuzzed_robot_files(tmp_path, fmt):
    failures: list[str] = []
    counts = run(fmt, ROUNDS, seed=20261126, workdir=tmp_path,
                 report=lambda m, o: failures.append(f"{o}: {m.category}/{m.kind}: {repr(m.text)[:300]}"))
    tried = sum(counts.values())
    assert tried >= 6 * ROUNDS + 10
    assert not failures, "\n".join(failures[:20])
    outcomes = {o for _, o in counts}
    # the mutants reach both sides: the test would notice a reader that refuses or accepts everything
    assert {"clean", "accepted"} <= outcomes, counts


def test_fast_schema_path_agrees_with_the_json_schema(tmp_path):
    """robotfile.conforms (the fast path) never accepts a document the JSON schema refuses."""
    import jsonschema

    from soadyn.model import safe_yaml
    from soadyn.model.robotfile import _check_numbers, conforms, schema

    validator = jsonschema.Draft202012Validator(schema())
    checked = 0
    for m in yaml_mutants(random.Random(7), 40):
        raw = m.text.encode("utf-8", "surrogatepass") if isinstance(m.text, str) else m.text
        try:
            doc = safe_yaml.load(raw)
            _check_numbers(doc, "x")
        except ValueError:
            continue
        if conforms(doc):
            assert validator.is_valid(doc), m.kind
            checked += 1
        else:
            assert not validator.is_valid(doc), (m.kind, repr(m.text)[:200])
    assert checked > 20
