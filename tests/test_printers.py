"""The printer interface (issue 22): one typed program, two printers.

The single-precision C of :mod:`soadyn.codegen.float_c` is printed from the same statements as the double
module's C.  Built with ``-Wdouble-promotion -Werror`` (no double left in it) and called on random states,
it agrees with the double C within single-precision error: the bounds below are ~10x the errors measured
on this robot (``test_arm``, a 4-joint free-floating tree) and ~1e4x below a wrong sign or term.
"""

from __future__ import annotations

import ctypes
import subprocess

import numpy as np
import pytest
from conftest import EXAMPLES, requires_cc

from soadyn.codegen.float_c import float_source
from soadyn.codegen.pipeline import generate, resolve_robot

#: relative error bound of the float C against the double C, max |f - d| / max(1, max |d|), per function
#: (measured, 20 states, seeded: ID 1.5e-7, M 3.8e-8, FD 4.1e-7, FD with f_ext 3.5e-7, Jacobian 2.4e-7)
BOUNDS = {"inverse_dynamics": 2e-6, "mass_matrix": 1e-6, "forward_dynamics": 5e-6, "jacobian_local": 3e-6,
          "forward_dynamics_fext": 5e-6, "generalized_bias": 5e-6}


def _shared(cc, tmp_path, name: str, text: str, flags: list[str], header: tuple[str, str] | None = None):
    src = tmp_path / f"{name}.c"
    src.write_text(text)
    if header is not None:
        (tmp_path / header[0]).write_text(header[1])
    lib = tmp_path / f"lib{name}.so"
    subprocess.run([*cc, "-std=c99", "-O2", "-fPIC", "-shared", "-ffp-contract=off", *flags, str(src), "-o",
                    str(lib), "-lm"], check=True, capture_output=True, text=True)
    return ctypes.CDLL(str(lib))


def _call(lib, f, ins: list[np.ndarray], dtype, frame: int | None = None) -> list[np.ndarray]:
    ptr = ctypes.POINTER(ctypes.c_float if dtype == np.float32 else ctypes.c_double)
    args = [np.ascontiguousarray(x, dtype=dtype) for x in ins]
    outs = [np.full(a.size, np.nan, dtype=dtype) for a in f.outputs]
    cargs = [a.ctypes.data_as(ptr) for a in args] + ([ctypes.c_int(frame)] if frame is not None else [])
    cargs += [o.ctypes.data_as(ptr) for o in outs]
    ret = getattr(lib, f.cname)(*cargs)
    if frame is not None:
        assert ret == 0
    return outs


@pytest.fixture(scope="module")
def builds(cc, tmp_path_factory):
    robot, name = resolve_robot(EXAMPLES / "test_arm.yaml")
    gen = generate(robot, name)
    tmp = tmp_path_factory.mktemp("printers")
    double = _shared(cc, tmp, "double", gen.files[gen.source_name], [],
                     (gen.header_name, gen.files[gen.header_name]))
    text = float_source(robot, name, gen.functions)
    single = _shared(cc, tmp, "single", text, ["-Wall", "-Wextra", "-Wdouble-promotion", "-Werror"])
    return robot, {f.cname[len(name) + 1:]: f for f in gen.functions}, double, single, text


@requires_cc
def test_float_source_is_single_precision(builds):
    _, funcs, _, _, text = builds
    assert "double" not in text.split("*/", 2)[-1]     # no double type or function after the notes
    assert "sinf(" in text and "cosf(" in text
    # the zero-wrench call of a *_fext function is printed in float too (a float f_ext of zeros)
    assert "float f_ext[30] = {0.0f};" in text
    assert len(funcs) >= 25


@requires_cc
@pytest.mark.parametrize("api", sorted(BOUNDS))
def test_float_c_agrees_with_double_c(builds, api, rng):
    robot, funcs, double, single, _ = builds
    f = funcs[api]
    worst = 0.0
    for _ in range(20):
        ins = []
        for a in f.inputs:
            x = rng.uniform(-1.5, 1.5, a.size)
            if a.name == "q" and robot.is_free:
                x[3:7] /= np.linalg.norm(x[3:7])
            ins.append(x)
        frame = 3 if f.is_family else None
        ref = _call(double, f, ins, np.float64, frame)
        got = _call(single, f, [x.astype(np.float32) for x in ins], np.float32, frame)
        for r, g in zip(ref, got):
            assert np.all(np.isfinite(g))
            err = np.max(np.abs(g.astype(np.float64) - r)) / max(1.0, np.max(np.abs(r)))
            worst = max(worst, err)
    print(f"{api}: float vs double relative error {worst:.2e} (bound {BOUNDS[api]:.0e})")
    assert 1e-9 < worst < BOUNDS[api]      # single precision (not double), and within the bound


def test_lanes_printer_broadcasts_constants_and_keeps_constant_calls_scalar():
    """The SIMD-lane printer of the typed statements: a constant (numbers and math calls of numbers) is a
    double broadcast to the vector, a math call of a constant stays scalar, an input element is gathered,
    and sin/cos of one argument are one vector sincos (issue 21 item 12's constant outputs)."""
    from soadyn.codegen import cprogram as cp
    from soadyn.codegen.lanes import vectorise

    E = cp.Expr.of
    body = [cp.load("q_0", "q", 0), cp.value("s", E("soadyn_sin(q_0)")), cp.value("c", E("soadyn_cos(q_0)")),
            cp.value("h", E("1.0/2.0")), cp.value("t", E("sqrt(2.0)*s + sqrt(q_0) + soadyn_sin(2)")),
            cp.store("M", 0, E("sqrt(2.0)")), cp.store("M", 1, E("t*c*h"))]
    out = vectorise(body, {"q": 3}, {"M": 2}, 4, {}, {"M": {1: 0}})
    assert out == [
        "const soadyn_v4d q_0 = SOADYN_LD(q, 0, 3);",
        "soadyn_v4d sc_s0, sc_c0;", "soadyn_vsincos(q_0, &sc_s0, &sc_c0);",
        "const soadyn_v4d s = sc_s0;", "const soadyn_v4d c = sc_c0;",
        "const soadyn_v4d h = (1.0/2.0) - (soadyn_v4d){0};",
        "const soadyn_v4d t = sqrt(2.0)*s + soadyn_vsqrt(q_0) + soadyn_sin(2);",
        "o_M[0] = t*c*h;"]
    assert cp.stored_entries(body, ["M"]) == {"M": [(0, "sqrt(2.0)"), (1, None)]}
