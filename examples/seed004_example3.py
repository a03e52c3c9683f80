"""Seed 004 Example 3: DOF reduction of a 37-DOF four-arm free flyer with reaction wheels to 9 DOF.

The full model (examples/seed004_four_arm_37dof.yaml: 6 base + 4 x 7 arm + 3 wheel DOF) and the model with
28 joints locked (only joints 1-3 of arm 1 move: 6 + 3 = 9 DOF, as in the seed's identification manoeuvre)
are both generated as C (forward dynamics only).  The script checks that the reduced model reproduces the
full one's motion when the locked joints are held (their constraint torques computed from the full model),
then times both generated forward-dynamics functions.  The seed reports about a quarter of the time for
the reduced system.

Run:  python examples/seed004_example3.py [--out DIR] [--calls N]
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from soadyn import load_robot
from soadyn.model.robot import Robot
from soadyn.structure import connectivity_table, format_connectivity, lock_joints, map_state
from soadyn.symbolic.algorithms import bias_forces as bias_numeric
from soadyn.symbolic.algorithms import forward_dynamics as fd_numeric
from soadyn.symbolic.algorithms import mass_matrix as mm_numeric
from soadyn.symbolic.scalar import Numeric

HERE = Path(__file__).resolve().parent
ACTIVE = ["a1_j1", "a1_j2", "a1_j3"]
LOCK_AT = 0.3  # every locked joint held at 0.3 rad


def compile_functions(robot: Robot, out_dir: Path, apis: tuple[str, ...] = ("forward_dynamics",)):
    """Compile only the named public functions (the whole table of a 37-DOF robot is ~100 C functions)."""
    from soadyn.codegen import compile as compile_robot

    return compile_robot(robot, out_dir, functions=list(apis), progress=False)


def held_accelerations(
    full: Robot, q: np.ndarray, v: np.ndarray, tau: np.ndarray, locked: list[str]
) -> np.ndarray:
    """Full-model accelerations with the locked joints held (KKT with their constraint torques)."""
    ctx = Numeric()
    M = mm_numeric(full, ctx, q)
    C = bias_numeric(full, ctx, q, v)
    idx = [6 + full.joint_names.index(n) for n in locked]
    E = np.zeros((len(idx), full.nv))
    E[range(len(idx)), idx] = 1.0
    K = np.block([[M, -E.T], [E, np.zeros((len(idx), len(idx)))]])
    return np.linalg.solve(K, np.concatenate([tau - C, np.zeros(len(idx))]))[: full.nv]


def main(argv: list[str] | None = None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument(
        "--out", type=Path, default=None, help="directory for the generated modules (default: temp)"
    )
    ap.add_argument("--calls", type=int, default=20000, help="forward-dynamics calls per timing")
    args = ap.parse_args(argv)
    out = args.out or Path(tempfile.mkdtemp(prefix="seed004_ex3_"))

    full = load_robot(HERE / "seed004_four_arm_37dof.yaml")
    locked = [n for n in full.joint_names if n not in ACTIVE]
    reduced = lock_joints(full, locked, {n: LOCK_AT for n in locked})
    reduced = reduced.replace(name="seed004_four_arm_reduced9")
    print(f"full model: {full.nv} DOF; reduced: {reduced.nv} DOF ({len(locked)} joints locked)")
    print(format_connectivity(connectivity_table(full, locked)[:12]) + "\n   ...")

    t0 = time.perf_counter()
    mf = compile_functions(full, out)
    t1 = time.perf_counter()
    mr = compile_functions(reduced, out)
    t2 = time.perf_counter()
    print(f"generated+compiled: full {t1 - t0:.1f} s, reduced {t2 - t1:.1f} s")
    ops_f = next(v["total"] for k, v in mf.op_counts.items() if k.endswith("forward_dynamics"))
    ops_r = next(v["total"] for k, v in mr.op_counts.items() if k.endswith("forward_dynamics"))

    # the reduced model reproduces the full one's motion with the locked joints held
    rng = np.random.default_rng(0)
    worst = 0.0
    for _ in range(5):
        q = full.random_configuration(rng)
        for n in locked:
            q[7 + full.joint_names.index(n)] = LOCK_AT
        v = rng.normal(size=full.nv) * 0.2
        for n in locked:
            v[6 + full.joint_names.index(n)] = 0.0
        tau = rng.normal(size=full.nv) * 5
        a_full = held_accelerations(full, q, v, tau, locked)
        q2, v2, a2 = map_state(full, reduced, q, v, a_full)
        keep = list(range(6)) + [6 + full.joint_names.index(n) for n in reduced.joint_names]
        a_red = mr.forward_dynamics(q2, v2, tau[keep])
        worst = max(worst, float(np.max(np.abs(a_red - a2))))
        # the generated full model agrees with the numeric algorithm (sanity of the timing subject)
        assert np.allclose(mf.forward_dynamics(q, v, tau), fd_numeric(full, Numeric(), q, v, tau), atol=1e-8)
    print(f"reduced vs full-with-locked-joints-held: max |a_red - a_full| = {worst:.2e}")

    def per_call(mod: object, robot: Robot, n: int) -> tuple[float, float]:
        qs = np.array([robot.random_configuration(rng) for _ in range(n)])
        vs = rng.normal(size=(n, robot.nv))
        ts = rng.normal(size=(n, robot.nv))
        t = time.perf_counter()
        mod.forward_dynamics(qs, vs, ts)  # batch entry point: C loop, no Python overhead
        batch = (time.perf_counter() - t) / n
        m = min(n, 2000)
        t = time.perf_counter()
        for i in range(m):
            mod.forward_dynamics(qs[i], vs[i], ts[i])
        single = (time.perf_counter() - t) / m
        return batch, single

    bf, sf = min(per_call(mf, full, args.calls) for _ in range(3))
    br, sr = min(per_call(mr, reduced, args.calls) for _ in range(3))
    res = {
        "ops_full": ops_f,
        "ops_reduced": ops_r,
        "batch_us_full": bf * 1e6,
        "batch_us_reduced": br * 1e6,
        "single_us_full": sf * 1e6,
        "single_us_reduced": sr * 1e6,
        "speedup_batch": bf / br,
        "speedup_single": sf / sr,
        "max_error": worst,
    }
    print(f"forward dynamics ops: full {ops_f}, reduced {ops_r} (ratio {ops_f / ops_r:.2f})")
    print(f"per call (C batch): full {bf * 1e6:.2f} us, reduced {br * 1e6:.2f} us -> speed-up {bf / br:.2f}x")
    print(f"per call (Python single): full {sf * 1e6:.2f} us, reduced {sr * 1e6:.2f} us -> {sf / sr:.2f}x")
    print("seed 004 reports roughly 4x (a quarter of the time) for its planning task")
    return res


if __name__ == "__main__":
    os.environ.setdefault("PYTHONHASHSEED", "0")
    sys.exit(0 if main() else 1)
