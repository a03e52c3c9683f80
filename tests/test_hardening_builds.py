"""Builds under attack (issue 10): hostile names, module-name hygiene, runtime argument checks, caches that
cannot lie, builds as transactions (threads and processes).

The robots are tiny (2-3 bodies) and build only a few functions, so each compile takes seconds.
"""

from __future__ import annotations

import io
import json
import os
import random
import re
import subprocess
import sys
import threading
from pathlib import Path

import numpy as np
import pytest
import yaml

from soadyn import load_robot
from soadyn.codegen import build, cache, trig
from soadyn.codegen.pipeline import compile_robot

FUNCS = ["center_of_mass", "jacobian"]


def tiny_yaml(name: str = "tiny", bodies: tuple[str, str, str] = ("base", "l1", "l2"),
              joints: tuple[str, str] = ("j1", "j2"), frames: tuple[str, ...] = (), mass: float = 1.0,
              comment: str = "") -> str:
    doc = {"name": name, "base": "free", "bodies": [
        {"name": bodies[0], "mass": 4.0 * mass, "inertia": [[1, 0, 0], [0, 1, 0], [0, 0, 1]]},
        {"name": bodies[1], "parent": bodies[0], "mass": 2.0 * mass, "com": [0.1, 0, 0],
         "inertia": [[0.1, 0, 0], [0, 0.2, 0], [0, 0, 0.3]],
         "joint": {"name": joints[0], "type": "revolute", "axis": [0, 0, 1], "xyz": [0.3, 0, 0]}},
        {"name": bodies[2], "parent": bodies[1], "mass": 2.0 * mass, "com": [0, 0.1, 0],
         "inertia": [[0.1, 0, 0], [0, 0.2, 0], [0, 0, 0.3]],
         "joint": {"name": joints[1], "type": "revolute", "axis": [0, 1, 0], "xyz": [0.4, 0, 0]}}],
        "frames": [{"name": f, "body": bodies[2], "xyz": [0.1 * (i + 1), 0.05, 0.0]}
                   for i, f in enumerate(frames)]}
    return comment + yaml.safe_dump(doc, allow_unicode=True, width=1 << 30, sort_keys=False)


# ---- hostile names ----------------------------------------------------------------------------------

ATOMS = ["*/", "/*", "\n", "\r", '"', "'", "\\", "#", "\x00", "\x01", "\x1b[31m", "\x7f", "\u202e", "\u2028",
         "\U0001F916", "\U0001D11E", "??/", "é", " ", "//", "#include <stdlib.h>", "#define x",
         "__attribute__((constructor)) static void pwn(void){system(\"touch PWNED\");}",
         "\"); import os; os.system(\"touch PWNED\"); (\"", "'''", '"""', "{{ x }}", "{% x %}", "%s"]
FORBIDDEN_CODE = ("__attribute__", "constructor", "system", "PWNED", "pwn", "stdlib", "static")


def hostile_names(rng: random.Random, n: int) -> list[str]:
    out: list[str] = []
    while len(out) < n:
        s = "".join(rng.choice(ATOMS) for _ in range(rng.randrange(2, 8)))
        if s not in out:
            out.append(s)
    out[-1] = ("*/\n" + "".join(ATOMS)) * 80  # ~10,000 characters
    assert len(out[-1]) > 9000
    return out


def strip_c(text: str) -> tuple[str, list[str]]:
    """(code with comments and string/char literals removed, the comments), lexing like C does."""
    code: list[str] = []
    comments: list[str] = []
    i, n = 0, len(text)
    while i < n:
        if text.startswith("/*", i):
            j = text.find("*/", i + 2)
            assert j >= 0, "unterminated comment"
            comments.append(text[i + 2:j])
            code.append(" ")
            i = j + 2
        elif text.startswith("//", i):
            j = text.find("\n", i)
            comments.append(text[i:j])
            i = j
        elif text[i] in "\"'":
            q = text[i]
            j = i + 1
            while text[j] != q:
                assert text[j] != "\n", "newline in a literal"
                j += 2 if text[j] == "\\" else 1
            code.append('""')
            i = j + 1
        else:
            code.append(text[i])
            i += 1
    return "".join(code), comments


ALLOWED_DIRECTIVE = re.compile(r'^\s*#\s*(include <math\.h>|include ""|ifndef SOADYN_\w+_H|'
                               r"define SOADYN_\w+_H|define \w+N_FRAMES \d+|ifdef __cplusplus|endif.*|"
                               r"include <stddef\.h>)\s*$")


def _check_c(text: str, module: str) -> None:
    assert text.isascii(), "non-ASCII in generated C"
    # the inline sin/cos of the source are fixed text that no name reaches (tests/test_trig.py)
    text = text.replace(trig.PRELUDE, "")
    assert "\\\n" not in text, "line splice"
    code, comments = strip_c(text)
    for c in comments:
        assert "\n" not in c.strip("\n ") or c.startswith("\n"), "multi-line comment from a name"
    for line in code.splitlines():
        if line.lstrip().startswith("#"):
            assert ALLOWED_DIRECTIVE.match(line), f"unexpected preprocessor line {line[:200]!r}"
    idents = set(re.findall(r"[A-Za-z_]\w*", code))
    for bad in FORBIDDEN_CODE:  # as tokens: a name's letters may survive inside a generated identifier
        assert bad not in idents, f"{bad!r} outside comments and strings"
    rest = set(re.sub(r"[A-Za-z_]\w*|\d+(\.\d*)?([eE][-+]?\d+)?", "", code))
    assert rest <= set(" \n;,=+-*/()[]{}:#<>.&|\""), "unexpected punctuation outside comments"
    allowed = re.compile(rf"^({module}_\w+|{module.upper()}_\w+|SOADYN_\w+|t\d+|[A-Za-z]+\w*_\d+\w*|"
                         r"const|double|int|void|return|switch|case|default|break|for|if|long|extern|soadyn_sincos_n|"
                         r"sin|cos|sqrt|pow|n|i|frame|q|v|a|tau|f_ext|h|qd|J|com|tw|enum|__cplusplus|"
                         r"[A-Za-z_]\w{0,12})$")
    for ident in idents:
        assert allowed.match(ident), ident
        assert len(ident) < 200, ident[:100]


def _urdf_attr(s: str) -> str:
    return (s.replace("&", "&amp;").replace("<", "&lt;").replace('"', "&quot;").replace("\n", "&#10;")
            .replace("\r", "&#13;").replace("\t", "&#9;"))


def tiny_urdf(name: str, links: tuple[str, str, str], joints: tuple[str, str]) -> str:
    b, l1, l2 = (_urdf_attr(x) for x in links)
    j1, j2 = (_urdf_attr(x) for x in joints)
    inert = ('<inertial><mass value="{m}"/><inertia ixx="0.1" ixy="0" ixz="0" iyy="0.2" iyz="0" izz="0.3"/>'
             "</inertial>")
    return f"""<?xml version="1.0"?>
<robot name="{_urdf_attr(name)}">
<link name="{b}">{inert.format(m=4)}</link><link name="{l1}">{inert.format(m=2)}</link>
<link name="{l2}">{inert.format(m=2)}</link>
<joint name="{j1}" type="revolute"><parent link="{b}"/><child link="{l1}"/><origin xyz="0.3 0 0"/>
<axis xyz="0 0 1"/></joint>
<joint name="{j2}" type="revolute"><parent link="{l1}"/><child link="{l2}"/><origin xyz="0.4 0 0"/>
<axis xyz="0 1 0"/></joint>
</robot>
"""


@pytest.mark.parametrize("fmt", ["yaml", "urdf"])
def test_hostile_names_are_data(tmp_path, fmt, monkeypatch):
    rng = random.Random(20261126 + (fmt == "urdf"))
    names = hostile_names(rng, 8)
    if fmt == "urdf":  # XML cannot carry NUL and most control characters: the rest arrive through &#..;
        names = [re.sub(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]", "?", s) for s in names]
        path = tmp_path / "evil.urdf"
        path.write_text(tiny_urdf(names[0], (names[1], names[2], names[7]), (names[3], names[4])),
                        encoding="utf-8")
        frames: list[str] = []
    else:
        path = tmp_path / "evil.yaml"
        frames = [names[5], names[6], names[7][:3000] + "frame"]
        text = tiny_yaml(names[0], (names[1], names[2], names[7]), (names[3], names[4]), tuple(frames))
        path.write_text(text, encoding="utf-8")
    robot = load_robot(path)
    assert robot.name == names[0] and names[7] in robot.body_names
    monkeypatch.chdir(tmp_path)
    m = compile_robot(path, tmp_path / "out", functions=FUNCS, progress=False)
    assert not (tmp_path / "PWNED").exists()
    mdir = Path(m.__file__).parent
    module = mdir.name
    assert module.isidentifier() and len(module) <= 64 and mdir.parent == tmp_path / "out"
    for f in (mdir / f"{module}.c", mdir / f"{module}.h"):
        _check_c(f.read_text(encoding="utf-8"), module)
    init = (mdir / "__init__.py").read_text(encoding="utf-8")
    assert init.isascii()
    import ast

    tree = ast.parse(init)
    for node in ast.walk(tree):  # no code from a name: calls only of our helpers and numpy
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
            assert node.func.id in {"_call", "_arg", "_flag", "_quat", "_unknown_frame", "ValueError", "bool",
                                    "len", "repr", "str", "type", "enumerate", "isinstance", "tuple",
                                    "single", "batch", "_empty", "_fb", "_outputs", "_params", "_pool",
                                    "ThreadPoolExecutor", "getattr", "int", "list", "max", "min", "range",
                                    "zip", "_fastcalls", "get", "run", "_parts", "_threads", "_submit",
                                    "_fine", "_index", "float", "any", "first_parameter_problem", "hasattr",
                                    "_share", "_isfinite", "_new_outputs", "_prod", "sum", "map"} \
                or re.fullmatch(r"_fx_[a-z_]+", node.func.id), node.func.id
    assert m.name == names[0]
    assert list(m.body_names) == list(robot.body_names) and list(m.frame_names) == list(robot.frame_names)
    q = robot.neutral()
    q[robot.base_nq:] = [0.3, -0.4]
    Js = {}
    for frame in [*robot.body_names, *robot.frame_names]:
        assert frame in m.frame_ids
        Js[frame] = m.jacobian(q, frame, world_aligned=True)
    for a in Js:
        for b in Js:
            if a != b:
                assert not np.array_equal(Js[a], Js[b]), "two frames gave the same Jacobian"
    from soadyn.reference.dense import jacobian

    for frame, J in Js.items():
        np.testing.assert_allclose(J, jacobian(robot, q, frame, world_aligned=True), rtol=0, atol=1e-12)


# ---- module names -------------------------------------------------------------------------------------

def _compile_named(tmp_path: Path, name: str, sub: str = "out"):
    p = tmp_path / f"r{abs(hash(name)) % 10**8}.yaml"
    p.write_text(tiny_yaml(name), encoding="utf-8")
    return compile_robot(p, tmp_path / sub, functions=["center_of_mass"], progress=False)


def test_module_names_never_shadow(tmp_path, monkeypatch):
    monkeypatch.syspath_prepend(str(tmp_path / "out"))
    before = sys.modules.get("scipy")
    m = _compile_named(tmp_path, "scipy")
    assert sys.modules.get("scipy") is before, "a robot named scipy was registered as sys.modules['scipy']"
    assert m.name == "scipy" and m.__name__ != "scipy"
    m2 = _compile_named(tmp_path, "__init__")
    assert Path(m2.__file__).parent.name == "robot_init__" and "__init__" not in sys.modules
    long = "arm-" + "x" * 300
    m3 = _compile_named(tmp_path, long)
    assert m3.name == long and len(Path(m3.__file__).parent.name) <= 64
    emoji = "\U0001F916arm\U0001F600"
    m4 = _compile_named(tmp_path, emoji)
    assert m4.name == emoji  # not surrogate pairs


# ---- runtime arguments ----------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def tiny_module(tmp_path_factory):
    d = tmp_path_factory.mktemp("tiny")
    p = d / "tiny.yaml"
    p.write_text(tiny_yaml("tiny_runtime"), encoding="utf-8")
    return load_robot(p), compile_robot(p, d / "out", functions=FUNCS + ["mass_matrix"], progress=False)


def test_zero_quaternion_and_boolean_flags_are_refused(tiny_module):
    robot, m = tiny_module
    q = robot.neutral()
    q0 = q.copy()
    q0[3:7] = 0.0
    for fn in (lambda x: m.mass_matrix(x), lambda x: m.center_of_mass(x), lambda x: m.jacobian(x, "l1")):
        with pytest.raises(ValueError, match="quaternion q\\[3:7\\] is zero"):
            fn(q0)
        with pytest.raises(ValueError, match="quaternion"):
            fn(np.stack([q, q0]))
        with pytest.raises(ValueError, match="quaternion"):
            fn(list(q0))
    q2 = q.copy()
    q2[3:7] = [0.0, 0.0, 0.0, 3.0]  # any non-zero norm is fine
    np.testing.assert_allclose(m.mass_matrix(q2), m.mass_matrix(q), rtol=1e-15, atol=0)
    for bad in ("no", "yes", 0, 1, None, "False", [True]):
        with pytest.raises(ValueError, match="world_aligned must be True or False"):
            m.jacobian(q, "l1", world_aligned=bad)
    assert np.array_equal(m.jacobian(q, "l1", world_aligned=np.bool_(True)), m.jacobian(q, "l1", True))


# ---- caches that cannot lie -------------------------------------------------------------------------------

def _stats() -> int:
    return build.STATS["compilations"]


def test_cache_rebuilds_on_any_damage(tmp_path):
    path = tmp_path / "cached.yaml"
    path.write_text(tiny_yaml("cached_robot"), encoding="utf-8")
    out = tmp_path / "out"
    m = compile_robot(path, out, functions=["center_of_mass"], progress=False)
    mdir = Path(m.__file__).parent
    stamp = json.loads((mdir / cache.STAMP).read_text())
    ext = mdir / stamp["extension"]
    com_ref = m.center_of_mass(load_robot(path).neutral())
    n0 = _stats()
    compile_robot(path, out, functions=["center_of_mass"], progress=False)
    assert _stats() == n0, "an intact cache was rebuilt"

    def replace(f: Path, data: bytes) -> None:
        """Damage through a new inode: the extension is mapped by this very process (truncating it in
        place would pull the pages from under the running test; another process is not so lucky)."""
        tmp = f.with_name(f.name + ".new")
        tmp.write_bytes(data)
        os.replace(tmp, f)

    def damage_and_check(what: str, fn) -> None:
        before = _stats()
        fn()
        m2 = compile_robot(path, out, functions=["center_of_mass"], progress=False)
        assert _stats() == before + 1, f"{what}: served from a damaged cache"
        assert cache.verify(mdir), what
        np.testing.assert_array_equal(m2.center_of_mass(load_robot(path).neutral()), com_ref)

    damage_and_check("truncated extension", lambda: replace(ext, ext.read_bytes()[:1000]))
    ext = mdir / json.loads((mdir / cache.STAMP).read_text())["extension"]

    def patch_byte() -> None:
        b = bytearray(ext.read_bytes())
        b[len(b) // 2] ^= 0xFF
        replace(ext, bytes(b))

    damage_and_check("patched extension byte", patch_byte)
    damage_and_check("garbage extension", lambda: replace(mdir / json.loads(
        (mdir / cache.STAMP).read_text())["extension"], b"garbage"))
    damage_and_check("edited C source", lambda: (mdir / "cached_robot.c").write_text("/* edited */"))
    damage_and_check("edited wrapper", lambda: (mdir / "__init__.py").write_text("total_mass = 1.0\n"))
    damage_and_check("missing wrapper", lambda: (mdir / "__init__.py").unlink())
    damage_and_check("garbage stamp", lambda: (mdir / cache.STAMP).write_text("{"))
    # a comment-only change of the robot file: rebuilt, and the module records the new file's sha256
    import hashlib

    before = _stats()
    path.write_text(tiny_yaml("cached_robot", comment="# a comment\n"), encoding="utf-8")
    m3 = compile_robot(path, out, functions=["center_of_mass"], progress=False)
    assert _stats() == before + 1
    assert m3.robot_file_sha256 == hashlib.sha256(path.read_bytes()).hexdigest()
    # stale temporaries of builds that died are removed by the next build
    stale = [out / ".cached_robot.tmp-999999-dead", out / ".cached_robot.old-999999-dead"]
    for s in stale:
        s.mkdir()
        (s / "junk").write_text("x")
    path.write_text(tiny_yaml("cached_robot", mass=2.0), encoding="utf-8")
    compile_robot(path, out, functions=["center_of_mass"], progress=False)
    assert not any(s.exists() for s in stale)
    assert sorted(p.name for p in out.iterdir()) == ["cached_robot"]


def test_module_name_collision_is_an_error(tmp_path):
    a, b = tmp_path / "a.yaml", tmp_path / "b.yaml"
    a.write_text(tiny_yaml("a-b"), encoding="utf-8")
    b.write_text(tiny_yaml("a_b", mass=4.0), encoding="utf-8")
    compile_robot(a, tmp_path / "out", functions=["center_of_mass"], progress=False)
    with pytest.raises(cache.ModuleCollisionError, match="both map to module 'a_b'"):
        compile_robot(b, tmp_path / "out", functions=["center_of_mass"], progress=False)
    # a directory that is not a soadyn module is never replaced
    (tmp_path / "out2" / "a_b").mkdir(parents=True)
    (tmp_path / "out2" / "a_b" / "precious.txt").write_text("keep me")
    with pytest.raises(cache.ModuleCollisionError, match="not a soadyn module"):
        compile_robot(b, tmp_path / "out2", functions=["center_of_mass"], progress=False)
    assert (tmp_path / "out2" / "a_b" / "precious.txt").read_text() == "keep me"


_WORKER = r"""
import json, sys
from soadyn.codegen.pipeline import compile_robot
from soadyn.codegen.cache import ModuleCollisionError
try:
    m = compile_robot(sys.argv[1], sys.argv[2], functions=["center_of_mass"], progress=False)
    print(json.dumps({"ok": m.name, "mass": m.total_mass}))
except ModuleCollisionError as e:
    print(json.dumps({"collision": str(e)}))
"""


def test_concurrent_colliding_compiles_never_return_the_wrong_module(tmp_path):
    """4 processes compile robots 'a-b' (total mass 8) and 'a_b' (16) into one directory at once: each gets
    its own robot or a collision error, never the other robot's module (it used to: mass 2 instead of 8)."""
    a, b = tmp_path / "a.yaml", tmp_path / "b.yaml"
    a.write_text(tiny_yaml("a-b"), encoding="utf-8")
    b.write_text(tiny_yaml("a_b", mass=2.0), encoding="utf-8")
    want = {"a-b": 8.0, "a_b": 16.0}
    env = dict(os.environ, SOADYN_JOBS="1")
    for round_ in range(2):
        out = tmp_path / f"out{round_}"
        procs = [subprocess.Popen([sys.executable, "-c", _WORKER, str(p), str(out)], stdout=subprocess.PIPE,
                                  stderr=subprocess.PIPE, text=True, env=env) for p in (a, b, a, b)]
        results = []
        for p, src in zip(procs, ("a-b", "a_b", "a-b", "a_b")):
            stdout, stderr = p.communicate(timeout=600)
            assert p.returncode == 0, stderr[-3000:]
            results.append((src, json.loads(stdout.strip().splitlines()[-1])))
        winners = {r["ok"] for _, r in results if "ok" in r}
        assert len(winners) == 1, results
        for src, r in results:
            if "ok" in r:
                assert r["ok"] == src and r["mass"] == want[src], results
            else:
                assert src not in winners and "both map to module" in r["collision"]
        assert [p.name for p in out.iterdir()] == ["a_b"]


def test_threads_touch_no_process_state(tmp_path):
    """4 threads compile at once: sys.stdout stays the same object, files get the umask's permissions."""
    paths = []
    for i in range(4):
        p = tmp_path / f"t{i}.yaml"
        p.write_text(tiny_yaml(f"thread_robot_{i}", mass=1.0 + i), encoding="utf-8")
        paths.append(p)
    stdout = sys.stdout
    old = os.umask(0o022)
    os.umask(old)
    errors: list[BaseException] = []
    created: list[Path] = []
    stop = threading.Event()

    def writer() -> None:  # another thread creating files meanwhile
        k = 0
        while not stop.is_set():
            f = tmp_path / f"other{k}.txt"
            f.write_text("x")
            created.append(f)
            k += 1

    def work(p: Path) -> None:
        try:
            m = compile_robot(p, tmp_path / "out", functions=["center_of_mass"], progress=False)
            assert m.name == load_robot(p).name
        except BaseException as e:  # noqa: BLE001
            errors.append(e)

    w = threading.Thread(target=writer)
    w.start()
    ts = [threading.Thread(target=work, args=(p,)) for p in paths]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    stop.set()
    w.join()
    assert not errors, errors
    assert sys.stdout is stdout and not isinstance(sys.stdout, io.StringIO)
    assert created
    for f in created + [q for d in (tmp_path / "out").iterdir() for q in d.iterdir()]:
        assert not f.stat().st_mode & 0o002, f"{f} is world-writable"
