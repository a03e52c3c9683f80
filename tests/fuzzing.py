"""Seeded mutation fuzzing of robot files (YAML and URDF): the harness behind tests/test_fuzz_robotfiles.py.

Every mutant is loaded with :func:`soadyn.load_robot` and classified:

* ``clean``: a :class:`RobotFileError` whose text is one line of bounded length naming the file;
* ``accepted``: the robot loaded and passes the sanity checks (finite, positive-definite, symmetric mass
  matrix at two configurations; unit axes; finite inertias);
* ``crash``: any other exception, or an error message on several lines or unbounded;
* ``hang``: the load took longer than ``HANG_S`` seconds;
* ``silent``: a mutant that must be refused (a non-finite, absurd or YAML-1.1-reinterpreted number, a
  zero or degenerate axis, a negative mass, an alias bomb...) was accepted;
* ``wrong``: a meaning-preserving mutant (comments, reformatted numbers, reordered keys) loaded with a
  different fingerprint, or an accepted robot failed the sanity checks.

``python tests/fuzzing.py [N] [SEED]`` prints the table of the report (N mutants per category and format).
"""

from __future__ import annotations

import math
import random
import re
import sys
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
YAML_SEED = REPO / "examples" / "test_arm.yaml"
HANG_S = 5.0

URDF_SEED = """<?xml version="1.0"?>
<robot name="fuzz_arm">
  <link name="base"><inertial><origin xyz="0 0 0.1" rpy="0 0 0"/><mass value="20"/>
    <inertia ixx="1" ixy="0" ixz="0" iyy="1.2" iyz="0" izz="0.8"/></inertial></link>
  <link name="l1"><inertial><origin xyz="0.1 0 0" rpy="0.1 0.2 0.3"/><mass value="2"/>
    <inertia ixx="0.02" ixy="0.001" ixz="0" iyy="0.03" iyz="0" izz="0.025"/></inertial></link>
  <link name="l2"><inertial><origin xyz="0.2 0 0" rpy="0 0 0"/><mass value="1.5"/>
    <inertia ixx="0.01" ixy="0" ixz="0" iyy="0.02" iyz="0" izz="0.015"/></inertial></link>
  <link name="tool"/>
  <joint name="j1" type="revolute"><parent link="base"/><child link="l1"/>
    <origin xyz="0 0 0.3" rpy="0 0 0"/><axis xyz="0 0 1"/>
    <limit lower="-3" upper="3" effort="10" velocity="1"/></joint>
  <joint name="j2" type="continuous"><parent link="l1"/><child link="l2"/>
    <origin xyz="0.4 0 0" rpy="1.5707963267948966 0 0"/><axis xyz="0 1 0"/></joint>
  <joint name="jt" type="fixed"><parent link="l2"/><child link="tool"/>
    <origin xyz="0.3 0 0" rpy="0 0 0"/></joint>
</robot>
"""

_NUM = re.compile(r"(?<![\w.])-?\d+(?:\.\d+)?(?:[eE][-+]?\d+)?(?![\w.])")


@dataclass
class Mutant:
    category: str
    kind: str
    text: str | bytes
    expect: str  # "any" | "refuse" | "same"


# values that must be refused wherever a number is expected
BAD_NUMBERS = ["1e308", "-1e308", "1e200", "1e-160", ".nan", ".inf", "-.inf", "9" * 400, "010", "0x10",
               "1:30", "1_000", "0o17", "0b11", "1e999", "yes", "~", '"1.5"', "[1, 2]", "{a: 1}",
               "2001-12-14"]
BAD_XML_NUMBERS = ["1e308", "nan", "inf", "-inf", "9" * 400, "1e200", "1e-160", "0x10", "1,5", "", "1 2"]
HOSTILE = ["*/", "/*", "\n", "\"", "'", "\\", "#", "\x00", "\x1b[31m", "\u202e", "\u2028", "\U0001F916",
           "??/", "__attribute__((constructor))", "%s%n", "{{x}}", "\t", "\x7f", "é"]



def _damaged(rng, base: str) -> Mutant:
    """Text damage: the file truncated at a random byte, or one byte replaced."""
    raw = base.encode()
    k = rng.randrange(len(raw))
    if rng.random() < 0.5:
        return Mutant("text", "truncate", raw[:k], "any")
    b = bytearray(raw)
    b[k] = rng.randrange(256)
    return Mutant("text", "byte", bytes(b), "any")

def _yaml_quote(s: str) -> str:
    import yaml

    text = yaml.safe_dump(s, allow_unicode=True, default_style='"', width=1 << 30)
    return text.strip().removesuffix("...").strip()


def yaml_mutants(rng: random.Random, n: int) -> list[Mutant]:
    base = YAML_SEED.read_text(encoding="utf-8")
    lines = base.splitlines()
    # numbers of values only (not those in a comment line)
    nums = [m for m in _NUM.finditer(base)
            if not base[base.rfind("\n", 0, m.start()) + 1:m.start()].lstrip().startswith("#")]
    out: list[Mutant] = []

    def sub_number(m: re.Match, new: str) -> str:
        return base[:m.start()] + new + base[m.end():]

    for _ in range(n):
        # numbers: an absurd or non-YAML-1.2 value where a number is expected
        m = rng.choice(nums)  # a number inside a name (e.g. j1) is excluded by the pattern
        out.append(Mutant("numbers", "bad-number", sub_number(m, rng.choice(BAD_NUMBERS)), "refuse"))
        # numbers, meaning kept: 1.5 -> 1.5e0, 2 -> 2.0
        new = m.group() + ("e0" if "." in m.group() and "e" not in m.group().lower() else ".0"
                           if "." not in m.group() and "e" not in m.group().lower() else "")
        out.append(Mutant("numbers", "same-number", sub_number(m, new), "same"))
        # structure: drop / duplicate a line, swap two lines, change indentation
        i = rng.randrange(len(lines))
        op = rng.choice(["drop", "dup", "swap", "indent", "dedent"])
        ls = list(lines)
        if op == "drop":
            del ls[i]
        elif op == "dup":
            ls.insert(i, ls[i])
        elif op == "swap":
            j = rng.randrange(len(lines))
            ls[i], ls[j] = ls[j], ls[i]
        elif op == "indent":
            ls[i] = "  " + ls[i]
        else:
            ls[i] = ls[i].lstrip()
        out.append(Mutant("structure", op, "\n".join(ls) + "\n", "any"))
        # text: truncation and byte damage
        out.append(_damaged(rng, base))
        # names: a hostile name for one of the names of the file
        names = re.findall(r"name: (\w+)", base)
        victim = rng.choice(names)
        hostile = "".join(rng.choice(HOSTILE) for _ in range(rng.randrange(1, 6)))
        if rng.random() < 0.1:
            hostile = hostile * 2000
        quoted = _yaml_quote(hostile)
        text = re.sub(rf"(name|parent|body): {victim}\b", lambda mm, q=quoted: f"{mm.group(1)}: {q}", base)
        out.append(Mutant("names", "hostile-name", text, "any"))
        # meaning kept: a comment
        ls = list(lines)
        ls.insert(rng.randrange(len(ls) + 1), "# comment " + rng.choice(["*/", "#", "key: 1", ""]))
        out.append(Mutant("text", "comment", "\n".join(ls) + "\n", "same"))
    # YAML attacks (fixed list, each once)
    bomb = "a: &a [x, x, x, x, x, x, x, x, x]\n" + "".join(
        f"{c}: &{c} [{', '.join(['*' + p] * 9)}]\n" for p, c in zip("abcdefgh", "bcdefghi"))
    attacks = {
        "billion-laughs": bomb,
        "deep-flow": "name: x\nbase: free\nbodies: " + "[" * 2000 + "]" * 2000 + "\n",
        "deep-block": "name: x\nbase: free\nbodies:\n" + "".join(" " * i + "- \n" for i in range(1, 400)),
        "python-tag": "name: !!python/object/apply:os.system [echo hi]\nbase: free\nbodies: []\n",
        "binary-tag": base.replace("name: ", "name: !!binary aGVsbG8= #", 1),
        "int-keys": base.replace("name: ", "1: ", 1),
        "mixed-keys": base + "1: x\n",
        "null-key": base + "~: x\n",
        "list-top": "- 1\n- 2\n",
        "two-docs": base + "---\n" + base,
        "merge-key": base.replace("bodies:", "x: &x {mass: 1}\nbodies:", 1),
        "utf16": base.encode("utf-16"),
        "bom": b"\xef\xbb\xbf" + base.encode(),
        "empty": "",
        "huge-int-mass": re.sub(r"mass: [\d.]+", "mass: " + "9" * 5000, base, count=1),
    }
    expect_refuse = {"billion-laughs", "deep-flow", "deep-block", "python-tag", "binary-tag", "int-keys",
                     "mixed-keys", "null-key", "list-top", "two-docs", "merge-key", "utf16", "empty",
                     "huge-int-mass"}
    for k, t in attacks.items():
        out.append(Mutant("yaml-attacks", k, t, "refuse" if k in expect_refuse else "any"))
    return out


def urdf_mutants(rng: random.Random, n: int) -> list[Mutant]:
    base = URDF_SEED
    attrs = list(re.finditer(r'(xyz|rpy|value|ixx|ixy|ixz|iyy|iyz|izz)="([^"]*)"', base))
    out: list[Mutant] = []
    for _ in range(n):
        m = rng.choice(attrs)
        vals = m.group(2).split()
        i = rng.randrange(len(vals))
        bad = rng.choice(BAD_XML_NUMBERS)
        if bad == "1e-160" and m.group(1) != "value":
            # below 1e-30 an <origin> or <inertia> entry is exporter residue, read as 0
            # (docs/robot-format.md); a mass that small is still refused
            bad = "1e200"
        vals2 = list(vals)
        vals2[i] = bad
        text = base[:m.start(2)] + " ".join(vals2) + base[m.end(2):]
        # an empty replacement of a 3-vector entry only changes the count: still an error
        out.append(Mutant("numbers", "bad-number", text, "refuse"))
        same = list(vals)
        same[i] = repr(float(vals[i])) if float(vals[i]) != 0 else "0.0e0"
        out.append(Mutant("numbers", "same-number", base[:m.start(2)] + " ".join(same) + base[m.end(2):],
                          "same"))
        lines = base.splitlines()
        j = rng.randrange(len(lines))
        op = rng.choice(["drop", "dup", "swap"])
        if op == "drop":
            del lines[j]
        elif op == "dup":
            lines.insert(j, lines[j])
        else:
            k = rng.randrange(len(lines))
            lines[j], lines[k] = lines[k], lines[j]
        out.append(Mutant("structure", op, "\n".join(lines), "any"))
        out.append(_damaged(rng, base))
        victim = rng.choice(["base", "l1", "l2", "tool", "j1", "j2", "jt"])
        hostile = "".join(rng.choice(["*/", "/*", "&#10;", "&#13;", "&quot;", "'", "\\", "#", "&lt;",
                                      "\U0001F916", "\u202e", "??/", "__attribute__((constructor))"])
                          for _ in range(rng.randrange(1, 6)))
        text = re.sub(rf'"{victim}"', f'"{victim}{hostile}"', base)
        out.append(Mutant("names", "hostile-name", text, "any"))
        out.append(Mutant("text", "comment", base.replace("<link name=\"l2\">",
                                                          "<!-- */ # --><link name=\"l2\">"), "same"))
    doctype = '<?xml version="1.0"?>\n<!DOCTYPE robot [\n{}\n]>\n'
    lol = doctype.format('<!ENTITY a "lollollollollollollollollollol">' + "".join(
        f'<!ENTITY {c} "{("&" + p + ";") * 10}">' for p, c in zip("abcdefgh", "bcdefghi")))
    attacks = {
        "billion-laughs": lol + '<robot name="&i;"><link name="a"/></robot>',
        "external-entity": doctype.format('<!ENTITY x SYSTEM "file:///etc/passwd">')
        + '<robot name="x"><link name="&x;"/></robot>',
        "entity-inertial": doctype.format(
            '<!ENTITY in "<inertial><mass value=\'1\'/></inertial>">') + base.split("\n", 1)[1].replace(
            '<link name="tool"/>', '<link name="tool">&in;</link>'),
        "entity-nan-mass": doctype.format('<!ENTITY m "nan">') + base.split("\n", 1)[1].replace(
            '<mass value="2"/>', '<mass value="&m;"/>'),
        "deep": '<robot name="x">' + "<a>" * 5000 + "</a>" * 5000 + '<link name="b"/></robot>',
        "not-xml": "name: x\n",
        "empty": "",
        "zero-axis": base.replace('<axis xyz="0 0 1"/>', '<axis xyz="0 0 0"/>'),
        "tiny-axis": base.replace('<axis xyz="0 0 1"/>', '<axis xyz="1e-160 1e-160 0"/>'),
        "huge-axis": base.replace('<axis xyz="0 0 1"/>', '<axis xyz="1e200 0 0"/>'),
        "negative-mass": base.replace('<mass value="2"/>', '<mass value="-2"/>'),
    }
    expect_refuse = {"billion-laughs", "external-entity", "entity-inertial", "entity-nan-mass", "deep",
                     "not-xml", "empty", "zero-axis", "tiny-axis", "huge-axis", "negative-mass"}
    for k, t in attacks.items():
        out.append(Mutant("xml-attacks", k, t, "refuse" if k in expect_refuse else "any"))
    return out


def sane(robot) -> str | None:
    """Why an accepted robot is not usable (None if it is)."""
    from soadyn.reference.dense import mass_matrix

    for j in robot.joints[1:]:
        if not abs(float(np.linalg.norm(j.axis)) - 1.0) < 1e-12:
            return f"axis of {j.name!r} has norm {np.linalg.norm(j.axis)}"
    for i in robot.inertias:
        if not (math.isfinite(i.mass) and np.all(np.isfinite(i.com)) and np.all(np.isfinite(i.inertia))):
            return "non-finite inertia"
    rng = np.random.default_rng(0)
    for q in (robot.neutral(), robot.random_configuration(rng)):
        M = mass_matrix(robot, q)
        if not np.all(np.isfinite(M)) or not np.allclose(M, M.T, rtol=1e-9, atol=1e-12 * np.abs(M).max()):
            return "mass matrix not finite or not symmetric"
        try:
            np.linalg.cholesky(M)
        except np.linalg.LinAlgError:
            return "mass matrix not positive definite"
    return None


def classify(m: Mutant, path: Path, reference_fp: str) -> str:
    from soadyn.model import RobotFileError
    from soadyn.symbolic.checks import load_robot  # the checked loader users get as soadyn.load_robot

    data = m.text.encode("utf-8", "surrogatepass") if isinstance(m.text, str) else m.text
    path.write_bytes(data)
    t0 = time.perf_counter()
    try:
        robot = load_robot(path, mimic="independent")
    except RobotFileError as e:
        if time.perf_counter() - t0 > HANG_S:
            return "hang"
        text = str(e)
        if "\n" in text or "\r" in text or len(text) > 1500 or not text.startswith(str(path)):
            return "crash"
        return "clean"
    except Exception:  # noqa: BLE001 - any other exception is what the fuzzer looks for
        return "crash"
    if time.perf_counter() - t0 > HANG_S:
        return "hang"
    if m.expect == "refuse":
        return "silent"
    if m.expect == "same" and robot.fingerprint() != reference_fp:
        return "wrong"
    return "accepted" if sane(robot) is None else "wrong"


def run(fmt: str, n: int, seed: int, workdir: Path,
        report: Callable[[Mutant, str], None] | None = None) -> Counter:
    """Counter of (category, outcome) over the mutants of one format."""
    from soadyn import load_robot

    rng = random.Random(seed)
    if fmt == "yaml":
        ref_path = YAML_SEED
        mutants = yaml_mutants(rng, n)
        path = workdir / "fuzz.yaml"
    else:
        ref_path = workdir / "seed.urdf"
        ref_path.write_text(URDF_SEED, encoding="utf-8")
        mutants = urdf_mutants(rng, n)
        path = workdir / "fuzz.urdf"
    ref = load_robot(ref_path).fingerprint()
    counts: Counter = Counter()
    for m in mutants:
        outcome = classify(m, path, ref)
        counts[(m.category, outcome)] += 1
        if report is not None and outcome in ("crash", "hang", "silent", "wrong"):
            report(m, outcome)
    return counts


def table(counts: dict[str, Counter]) -> str:
    cols = ["clean", "accepted", "crash", "hang", "silent", "wrong"]
    lines = [f"{'format':6s} {'category':14s} {'tried':>6s} " + " ".join(f"{c:>8s}" for c in cols)]
    for fmt, c in counts.items():
        cats = sorted({k for k, _ in c})
        for cat in cats:
            row = [c[(cat, o)] for o in cols]
            lines.append(f"{fmt:6s} {cat:14s} {sum(row):6d} " + " ".join(f"{x:8d}" for x in row))
    return "\n".join(lines)


if __name__ == "__main__":  # pragma: no cover - the report's table
    import tempfile

    n = int(sys.argv[1]) if len(sys.argv) > 1 else 60
    seed = int(sys.argv[2]) if len(sys.argv) > 2 else 10
    res = {}
    with tempfile.TemporaryDirectory() as d:
        for fmt in ("yaml", "urdf"):
            t0 = time.perf_counter()
            res[fmt] = run(fmt, n, seed, Path(d), lambda m, o: print(o, m.category, m.kind,
                                                                      repr(m.text)[:300], file=sys.stderr))
            print(f"{fmt}: {time.perf_counter() - t0:.1f} s", file=sys.stderr)
    print(table(res))
