"""YAML robot files: reading valid files, and one bad-file fixture per validation rule."""

from __future__ import annotations

import hashlib
import math
from pathlib import Path

import numpy as np
import pytest

from soadyn import load_robot  # the checked loader (singular mass matrices are errors)
from soadyn.model import RobotFileError

ROOT = Path(__file__).resolve().parents[1]
BAD = ROOT / "tests" / "data" / "bad"
ARM = ROOT / "examples" / "test_arm.yaml"

GOOD = """\
name: small
base: {base}
bodies:
  - name: base
    mass: {base_mass}
    com: [0, 0, 0]
    inertia: {{ixx: 1.0, iyy: 1.0, izz: 1.0}}
  - name: link1
    parent: base
    joint: {{name: j1, type: revolute, axis: [0, 0, 2], xyz: [0.5, 0, 0], rpy: [0, 0, 1.5707963267948966]}}
    mass: 2.0
    com: [0.2, 0, 0]
    inertia: {inertia}
  - name: marker
    parent: link1
    joint: {{name: marker_fix, type: fixed, xyz: [0.4, 0, 0]}}
    mass: 0
"""


def write(tmp_path: Path, text: str, name: str = "robot.yaml") -> Path:
    p = tmp_path / name
    p.write_text(text)
    return p


# ---- valid files ------------------------------------------------------------------------------------

def test_scratch_arm_structure() -> None:
    r = load_robot(ARM)
    assert r.body_names == ("base", "l1", "l2", "l3", "l4")
    assert r.joint_names == ["j1", "j2", "j3", "j4"]
    assert r.parent == (-1, 0, 1, 2, 0)
    assert (r.nq, r.nv) == (7 + 4, 6 + 4)
    assert r.base == "free"
    # tool (0.5 kg) is merged into l3 (1.0 kg) by its fixed joint
    assert r.inertias[3].mass == pytest.approx(1.5, abs=1e-15)
    assert r.total_mass == pytest.approx(50 + 3 + 2 + 1 + 1.5 + 0.5, abs=1e-12)
    # axis [0.3, 0.5, 0.8] is normalised
    a = np.array([0.3, 0.5, 0.8])
    np.testing.assert_allclose(r.joints[2].axis, a / math.sqrt(0.98), rtol=0, atol=1e-15)
    # products of inertia are matrix entries (URDF convention)
    assert r.inertias[0].inertia[0, 1] == 0.1 and r.inertias[0].inertia[1, 0] == 0.1
    assert r.inertias[0].inertia[0, 2] == -0.2
    # tcp: 0.05 along x of tool, tool at [0.1, 0, 0] in l3 rotated by yaw 0.4
    body, X = r.frame_of("tcp")
    assert r.body_names[body] == "l3"
    np.testing.assert_allclose(X.p, [0.1 + 0.05 * math.cos(0.4), 0.05 * math.sin(0.4), 0.0], atol=1e-15)


def test_source_hash_and_base_override() -> None:
    r = load_robot(ARM, base="fixed")
    assert r.source_hash == hashlib.sha256(ARM.read_bytes()).hexdigest()
    assert r.base == "fixed" and (r.nq, r.nv) == (4, 4)
    assert load_robot(ARM).nq == 11


def test_inertia_forms_agree_and_fixed_massless_body(tmp_path: Path) -> None:
    ine_map = "{ixx: 0.01, iyy: 0.05, izz: 0.055, ixy: 0.002, ixz: -0.001, iyz: 0.003}"
    ine_mat = "[[0.01, 0.002, -0.001], [0.002, 0.05, 0.003], [-0.001, 0.003, 0.055]]"
    a = load_robot(write(tmp_path, GOOD.format(base="free", base_mass=10, inertia=ine_map), "a.yaml"))
    b = load_robot(write(tmp_path, GOOD.format(base="free", base_mass=10, inertia=ine_mat), "b.yaml"))
    np.testing.assert_array_equal(a.inertias[1].inertia, b.inertias[1].inertia)
    assert a.inertias[1].inertia[1, 2] == 0.003
    # the massless marker merged as a frame, adds nothing
    assert a.total_mass == 12.0 and a.frame_names == ["marker"]
    # placement: rpy yaw pi/2 -> joint x axis along parent y; axis [0, 0, 2] normalised
    np.testing.assert_allclose(a.joints[1].placement.R, [[0, -1, 0], [1, 0, 0], [0, 0, 1]], atol=1e-15)
    np.testing.assert_array_equal(a.joints[1].axis, [0, 0, 1])
    np.testing.assert_array_equal(a.gravity, [0, 0, 0])


def test_massless_fixed_base_allowed_only_when_fixed(tmp_path: Path) -> None:
    p = write(tmp_path, GOOD.format(base="fixed", base_mass=0, inertia="{ixx: 0.01, iyy: 0.05, izz: 0.05}")
              .replace("    inertia: {ixx: 1.0, iyy: 1.0, izz: 1.0}\n", "", 1))
    r = load_robot(p)
    assert r.base == "fixed" and r.inertias[0].mass == 0
    with pytest.raises(RobotFileError, match=r"bodies\[0\]\.mass: is 0 but 'base' is the base of a "
                                              "free-floating"):
        load_robot(p, base="free")


def test_yaml12_exponent_floats_and_description(tmp_path: Path) -> None:
    text = GOOD.format(base="free", base_mass="1e1", inertia="{ixx: 1e-2, iyy: 5E-2, izz: 5.0e-2}")
    r = load_robot(write(tmp_path, "description: exponent floats\ngravity: [0, 0, -9.81]\n" + text))
    assert r.inertias[0].mass == 10.0 and r.inertias[1].inertia[1, 1] == 0.05
    np.testing.assert_array_equal(r.gravity, [0, 0, -9.81])


def test_unknown_suffix_and_bad_base_argument(tmp_path: Path) -> None:
    p = write(tmp_path, "x", "robot.txt")
    with pytest.raises(RobotFileError, match=r"robot\.txt: unknown file type '\.txt'"):
        load_robot(p)
    with pytest.raises(RobotFileError, match="'floating' is not allowed; use one of: free, fixed"):
        load_robot(ARM, base="floating")


def test_missing_file() -> None:
    with pytest.raises(RobotFileError, match=r"no_such_robot\.yaml: file not found"):
        load_robot(BAD / "no_such_robot.yaml")


# ---- bad files: (fixture, field, phrase of the problem) --------------------------------------------------

CASES = [
    ("unknown_parent", "bodies[2].parent", "unknown parent 'lnk1'"),
    ("cycle", "bodies[1].parent", "parents form a cycle ('link1' -> 'link2' -> 'link1')"),
    ("duplicate_body", "bodies[2].name", "duplicate body name 'link1'"),
    ("duplicate_joint", "bodies[2].joint.name", "duplicate joint name 'j1'"),
    ("duplicate_frame", "frames[1].name", "duplicate frame name 'tip'"),
    ("frame_clashes_body", "frames[0].name", "'link1' is already a body name"),
    ("no_root", "bodies", "no root body"),
    ("several_roots", "bodies[2].parent", "several root bodies"),
    ("mass_negative", "bodies[2].mass", "is negative (-1.0)"),
    ("mass_zero_moving", "bodies[2].mass", "is 0 but 'link2' is a body on a moving joint"),
    ("massless_inertia", "bodies[2].inertia", "non-zero on a body with mass 0"),
    ("inertia_asymmetric", "bodies[2].inertia", "not symmetric"),
    ("inertia_not_pd", "bodies[2].inertia", "not positive definite (eigenvalues -0.0309902"),
    ("inertia_triangle", "bodies[2].inertia", "violates the triangle inequality"),
    ("missing_inertia", "bodies[2].inertia", "missing; a body with mass > 0 needs 'inertia'"),
    ("zero_axis", "bodies[2].joint.axis", "is zero"),
    ("missing_axis", "bodies[2].joint.axis", "missing required key 'axis'"),
    ("wrong_length", "bodies[2].joint.xyz", "expected 3 numbers [x, y, z], got 2"),
    ("unknown_key", "bodies[2].masss", "unknown key 'masss'"),
    ("wrong_type", "bodies[2].mass", "expected a number, got string 'heavy'"),
    ("unknown_joint_type", "bodies[2].joint.type", "'hinge' is not allowed; use one of: revolute, "
                                                   "prismatic, fixed"),
    ("frame_unknown_body", "frames[0].body", "unknown body 'link3'"),
    ("non_finite", "bodies[2].com[1]", "is nan (not finite)"),
    ("yaml_syntax", "line 17, column 71", "YAML syntax error"),
    ("duplicate_key", "line 19, column 5", "duplicate key 'mass' (first at line 18)"),
    ("root_with_joint", "bodies[0].joint", "the root body 'base' must not have a joint"),
    ("no_joint", "bodies[1].joint", "body 'link1' has a parent but no joint"),
    ("empty", "(top level)", "file is empty"),
    # loops: (seed 004 III-D cut joints)
    ("loop_unknown_frame", "loops[0].frame_b", "unknown frame 'tipp'; use a body or frame name (base, link1, "
                                               "link2, tip) or world"),
    ("loop_bad_type", "loops[0].type", "'ball' is not allowed; use one of: weld, revolute, prismatic, "
                                       "spherical"),
    ("loop_missing_axis", "loops[1].axis", "missing required key 'axis' (a revolute cut joint needs"),
    ("loop_duplicate_name", "loops[1].name", "duplicate loop name 'grip' (also loops[0])"),
    ("loop_unknown_key", "loops[0].axes", "unknown key 'axes'"),
    ("loop_axis_on_weld", "loops[0].axis", "a weld cut joint takes no axis"),
    ("loop_zero_axis", "loops[0].axis", "must be a non-zero, finite 3-vector"),
    ("loop_xyz_not_world", "loops[0].xyz", "allowed only with frame_b: world"),
    ("loop_world_first", "loops[0].frame_a", "frame_a must be a frame of the robot"),
    ("loop_same_frames", "loops[0].frame_b", "the same as frame_a"),
    ("loop_not_list", "loops", "expected a list, got a mapping"),
]


@pytest.mark.parametrize(("fixture", "field", "phrase"), CASES, ids=[c[0] for c in CASES])
def test_bad_file(fixture: str, field: str, phrase: str) -> None:
    path = BAD / f"{fixture}.yaml"
    with pytest.raises(RobotFileError) as info:
        load_robot(path)
    err = info.value
    assert isinstance(err, ValueError)
    assert err.file == str(path) and err.field == field
    assert phrase in err.problem, err.problem
    assert str(err) == f"{path}: {field}: {err.problem}"
    assert "\n" not in str(err)


def test_every_bad_fixture_is_covered() -> None:
    yaml_fixtures = {p.stem for p in BAD.glob("*.yaml")}
    assert yaml_fixtures == {c[0] for c in CASES}


def test_fixtures_differ_from_a_valid_file_only_by_their_defect(tmp_path: Path) -> None:
    """The fixture base text is valid: undoing the defect of one fixture makes it load."""
    text = (BAD / "unknown_parent.yaml").read_text().replace("parent: lnk1", "parent: link1")
    r = load_robot(write(tmp_path, text))
    assert r.joint_names == ["j1", "j2"] and r.frame_names == ["tip"]


def test_triangle_tolerance_is_small(tmp_path: Path) -> None:
    """A flat plate (A + B = C exactly) is valid; 0.1 % beyond it is not."""
    base = (BAD / "unknown_parent.yaml").read_text().replace("parent: lnk1", "parent: link1")
    plate = base.replace("{ixx: 0.01, iyy: 0.03, izz: 0.03}", "{ixx: 0.01, iyy: 0.02, izz: 0.03}")
    load_robot(write(tmp_path, plate, "plate.yaml"))
    over = base.replace("{ixx: 0.01, iyy: 0.03, izz: 0.03}", "{ixx: 0.01, iyy: 0.02, izz: 0.03003}")
    with pytest.raises(RobotFileError, match="triangle inequality"):
        load_robot(write(tmp_path, over, "over.yaml"))


def test_documented_example_loads(tmp_path: Path) -> None:
    """The full example of docs/robot-format.md is a valid file with the stated structure."""
    import re

    doc = (ROOT / "docs" / "robot-format.md").read_text()
    text = re.search(r"## Full example\n\n```yaml\n(.*?)```", doc, re.S).group(1)
    r = load_robot(write(tmp_path, text))
    assert r.joint_names == ["shoulder", "elbow"] and r.frame_names == ["gripper", "tcp"]
    assert r.total_mass == pytest.approx(500 + 10 + 6 + 1.2, abs=1e-12)
    body, X = r.frame_of("tcp")
    assert r.body_names[body] == "forearm"
    np.testing.assert_allclose(X.p, [0.9 + 0.12 * math.cos(0.3), 0.12 * math.sin(0.3), 0], atol=1e-15)


# ---- loops: (cut joints, seed 004 III-D; syntax in docs/robot-format.md) -------------------------------

VALID = (BAD / "unknown_parent.yaml").read_text().replace("parent: lnk1", "parent: link1")


def test_loops_section_is_read(tmp_path: Path) -> None:
    """Names default to loop<n> (skipping names given explicitly), axes are normalised, a world
    grapple point gets its pose; the tree and its fingerprint's tree part are unchanged."""
    text = VALID + (
        "loops:\n"
        "  - {frame_a: tip, frame_b: base}\n"
        "  - {name: loop1, frame_a: link1, frame_b: world, type: revolute, axis: [0, 0, 2],\n"
        "     xyz: [1.0, 2.0, 3.0], rpy: [0, 0, 1.5707963267948966]}\n"
        "  - {frame_a: tip, frame_b: link1, type: spherical}\n")
    r = load_robot(write(tmp_path, text))
    tree = load_robot(write(tmp_path, VALID, "tree.yaml"))
    assert r.joint_names == tree.joint_names and r.frame_names == tree.frame_names
    assert [lc.name for lc in r.loops] == ["loop1_2", "loop1", "loop3"]
    a, b, c = r.loops
    assert (a.frame_a, a.frame_b, a.type, a.axis, a.world_placement) == ("tip", "base", "weld", None, None)
    assert b.type == "revolute" and b.frame_b == "world"
    np.testing.assert_array_equal(b.axis, [0, 0, 1])
    np.testing.assert_array_equal(b.world_placement.p, [1, 2, 3])
    np.testing.assert_allclose(b.world_placement.R, [[0, -1, 0], [1, 0, 0], [0, 0, 1]], atol=1e-15)
    assert c.type == "spherical" and c.axis is None
    assert r.fingerprint() != tree.fingerprint()
    empty = load_robot(write(tmp_path, VALID + "loops: []\n", "empty.yaml"))
    assert empty.loops == () and empty.fingerprint() == tree.fingerprint()


def test_loops_from_file_equal_close_loop(tmp_path: Path) -> None:
    """A hand-written loops section gives the same model as structure.close_loop on the tree."""
    from soadyn import structure as st
    from soadyn.model.robot import Placement

    text = VALID + ("loops:\n"
                    "  - {name: hold, frame_a: tip, frame_b: world, type: prismatic, axis: [0.3, 0.5, 0.8],\n"
                    "     xyz: [0.9, 0.1, 0.0], rpy: [0.1, -0.2, 0.3]}\n")
    r = load_robot(write(tmp_path, text))
    tree = load_robot(write(tmp_path, VALID, "tree.yaml"))
    ref = st.close_loop(tree, "tip", "world", "prismatic", axis=[0.3, 0.5, 0.8], name="hold",
                        world_placement=Placement.from_xyz_rpy([0.9, 0.1, 0.0], [0.1, -0.2, 0.3]))
    np.testing.assert_allclose(r.loops[0].axis, np.array([0.3, 0.5, 0.8]) / math.sqrt(0.98), atol=1e-15)
    np.testing.assert_allclose(r.loops[0].axis, ref.loops[0].axis, atol=1e-15)
    np.testing.assert_array_equal(r.loops[0].world_placement.homogeneous(),
                                  ref.loops[0].world_placement.homogeneous())


def test_world_loop_refuses_a_body_named_world(tmp_path: Path) -> None:
    text = VALID.replace("name: tip,", "name: world,") + "loops:\n  - {frame_a: link2, frame_b: world}\n"
    with pytest.raises(RobotFileError) as info:
        load_robot(write(tmp_path, text))
    assert info.value.field == "loops[0].frame_b" and "'world' is ambiguous" in info.value.problem


def test_loops_from_doc_checks_unvalidated_input() -> None:
    """model.robotfile.loops_from_doc is also safe on documents that did not pass the schema."""
    from soadyn.model.robotfile import loops_from_doc

    tree = load_robot(ARM)
    cases = [
        ("nope", "loops", "expected a list"),
        (["tcp"], "loops[0]", "expected a mapping"),
        ([{"frame_a": "tcp", "frame_b": "l4", "spin": 1}], "loops[0].spin", "unknown key 'spin'"),
        ([{"frame_b": "l4"}], "loops[0].frame_a", "missing required key 'frame_a'"),
        ([{"frame_a": "tcp", "frame_b": 3}], "loops[0].frame_b", "expected a body or frame name"),
        ([{"frame_a": "tcp", "frame_b": "l4", "type": "ball"}], "loops[0].type", "'ball' is not allowed"),
        ([{"frame_a": "tcp", "frame_b": "l4", "type": "revolute", "axis": [1, 0]}], "loops[0].axis",
         "non-zero, finite 3-vector"),
        ([{"frame_a": "tcp", "frame_b": "l4", "name": ""}], "loops[0].name", "expected a non-empty name"),
    ]
    for items, field, phrase in cases:
        with pytest.raises(RobotFileError) as info:
            loops_from_doc(items, tree, "f.yaml")
        assert (info.value.file, info.value.field) == ("f.yaml", field), items
        assert phrase in info.value.problem, info.value.problem
    assert loops_from_doc(None, tree) == []


def test_documented_loop_example_loads(tmp_path: Path) -> None:
    """The loop-closure example of docs/robot-format.md loads with the loops it describes."""
    import re

    doc = (ROOT / "docs" / "robot-format.md").read_text()
    text = re.search(r"### Loop closures\n.*?```yaml\n(.*?)```", doc, re.S).group(1)
    r = load_robot(write(tmp_path, text))
    assert r.joint_names == ["j1", "j2"] and r.frame_names == ["hand1", "hand2"]
    grasp, dock = r.loops
    assert (grasp.name, grasp.frame_a, grasp.frame_b, grasp.type, grasp.axis) == ("grasp", "hand2", "hand1",
                                                                                   "weld", None)
    assert (dock.name, dock.frame_b, dock.type) == ("docking", "world", "revolute")
    np.testing.assert_array_equal(dock.axis, [0, 0, 1])
    np.testing.assert_array_equal(dock.world_placement.p, [2, 0, 0])
