#!/usr/bin/env python3
# ruff: noqa: B023  (the closures passed to check() are called at once, inside the loop)
"""Every example-robot-data URDF through the toolchain, as a new user would run it, checked against Pinocchio.

    python benchmarks/sweep_erd.py [--workdir /tmp/erdsweep/sweep] [--jobs 2] [--timeout 600]
                                   [--only NAME,...] [--profile fast] [--markdown]

For every ``*.urdf`` under example-robot-data's ``robots/`` directory (files that are not URDF are not
swept: SRDF, SDF, xacro, MJCF, launch and mesh files), in a child process per file with a timeout:

1. ``python3 -m soadyn.cli info FILE`` (what a new user runs first): its exit status and, on failure, the
   last line it printed (one clear line, or a traceback);
2. per base (free for every robot; fixed as well for the arms and hands, whose URDF root is a link welded
   to the world or the first moving joint's parent): the robot loaded (``load_robot``, the default
   ``mimic="couple"``) and made ideal (``Robot.rigid``: Pinocchio's RNEA/ABA have no damping or
   friction), compiled with the default functions, and with ``inverse_dynamics_derivatives`` and
   ``forward_dynamics_derivatives`` where nv <= 40;
3. each function at 3 random states against Pinocchio 4.1 built from the same URDF by Pinocchio's own
   parser (``buildModelFromUrdf``), through ``PinocchioMap``: M (crba), ID (rnea), FD (aba), M^-1
   (computeMinverse), CoM, the LOCAL Jacobian of the last body, the ID and FD derivatives
   (computeRNEADerivatives, computeABADerivatives); a robot with mimic couplings in its reduced
   coordinates (``check_against_pinocchio``); relative error (max |ours - theirs| / max |theirs|) <= 1e-9.

Result per robot and base: ok / info error / load error (the one line) / generation error / compile error /
mismatch (worst function, its relative error) / crash (traceback) / timeout.  A function that Pinocchio
cannot compute for that model (e.g. derivatives with mimic joints) is listed as not checked.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
import traceback
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np

TOL = 1e-9
NV_DERIVATIVES = 40
DERIVATIVES = ("inverse_dynamics_derivatives", "forward_dynamics_derivatives")
N_STATES = 3


def _robots_dir() -> Path:
    for p in sys.path:
        d = Path(p) / "cmeel.prefix" / "share" / "example-robot-data" / "robots"
        if d.is_dir():
            return d
    raise SystemExit("example-robot-data is not installed (pip install example-robot-data)")


def urdf_files(root: Path) -> list[Path]:
    return sorted(p for p in root.rglob("*.urdf") if p.is_file())


def others(root: Path) -> dict[str, int]:
    """Files that are not swept, counted by suffix (meshes and textures left out)."""
    skip = {".stl", ".dae", ".obj", ".png", ".jpg", ".mtl", ".urdf", ".md", ".ply", ".jpeg", ".tga"}
    out: dict[str, int] = {}
    for p in root.rglob("*"):
        if p.is_file() and p.suffix.lower() not in skip:
            out[p.suffix.lower() or p.name] = out.get(p.suffix.lower() or p.name, 0) + 1
    return dict(sorted(out.items()))


# ---------------------------------------------------------------------------------------------------------
# one robot file, in a child process
# ---------------------------------------------------------------------------------------------------------
def _last_line(text: str) -> str:
    lines = [ln for ln in text.strip().splitlines() if ln.strip()]
    return lines[-1].strip() if lines else ""


def _classify_exception(e: BaseException) -> tuple[str, str]:
    tb = traceback.format_exc()
    line = f"{type(e).__name__}: {e}".splitlines()[0]
    if type(e).__name__ in ("ValueError", "RobotFileError", "SoadynError", "CompileError") \
            or isinstance(e, (ValueError, )) and "\n" not in str(e):
        return "user error", line
    where = [ln.strip() for ln in tb.splitlines() if ln.strip().startswith("File ")][-2:]
    return "crash", tb.strip().splitlines()[-1] + " @ " + " | ".join(where)


def _exact_permutations(model) -> None:
    """Pinocchio's rotations within 1e-10 of a signed permutation made that permutation (docs/conventions.md
    "Placements are read as written, with two roundings"): tests/pinocchio_placements.py, the test suite's
    helper, loaded from this checkout by its path."""
    import importlib.util

    path = Path(__file__).resolve().parent.parent / "tests" / "pinocchio_placements.py"
    spec = importlib.util.spec_from_file_location("_soadyn_pinocchio_placements", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    module.exact_permutations(model)


def _rel(x, ref) -> float:
    x, ref = np.asarray(x, float), np.asarray(ref, float)
    if x.shape != ref.shape:
        return float("inf")
    scale = float(np.max(np.abs(ref))) if ref.size else 0.0
    err = float(np.max(np.abs(x - ref))) if ref.size else 0.0
    return err / (scale if scale > 0 else 1.0) if np.all(np.isfinite(x)) else float("inf")


def _sym(A) -> np.ndarray:
    A = np.asarray(A, dtype=float)
    return np.triu(A) + np.triu(A, 1).T


def check_against_pinocchio(path: Path, robot, mod, dmod) -> tuple[dict[str, float], list[str]]:
    """Worst relative error per function over ``N_STATES`` random states; the functions not checked.

    A robot with mimic couplings is compared with Pinocchio's model of the uncoupled tree (every joint its
    own coordinate; Pinocchio 4.1's mimic joints refuse chains of mimics) in the reduced coordinates:
    ``q_full = G q + b``, ``v_full = G v``, ``a_full = G a`` (constant ``G``, ``Robot.expansion``),
    ``M = G^T M_full G``, ``tau = G^T rnea(q_full, G v, G a)``, ``J = J_full G``, ``a = M^-1 (tau - G^T
    nle)``, ``dtau/dx = G^T dtau_full/dx_full G`` and ``da/dx = -M^-1 dtau/dx`` at ``a = FD``."""
    import pinocchio as pin

    from soadyn.model.conventions import PinocchioMap

    coupled = robot.is_coupled
    full = robot.uncoupled() if coupled else robot
    model = (pin.buildModelFromUrdf(str(path), pin.JointModelFreeFlyer()) if robot.is_free
             else pin.buildModelFromUrdf(str(path)))
    model.gravity.linear = np.asarray(robot.gravity, dtype=float).copy()
    _exact_permutations(model)
    data = model.createData()
    pm = PinocchioMap(full, model)
    G, b = robot.expansion() if coupled else (np.eye(robot.nv), None)
    nb, bq = robot.base_nv, robot.base_nq
    rng = np.random.default_rng(0)
    leaf = robot.body_names[-1]
    worst: dict[str, float] = {}
    skipped: list[str] = []

    def qfull(q: np.ndarray) -> np.ndarray:
        return np.r_[q[:bq], G[nb:, nb:] @ q[bq:] + b] if coupled else q

    def red(A: np.ndarray) -> np.ndarray:                     # full nv x nv (ours) -> reduced
        return G.T @ A @ G

    def check(name: str, f) -> None:
        try:
            ours, theirs = f()
        except Exception as e:                    # Pinocchio cannot compute it for this model
            if not any(x.startswith(name) for x in skipped):
                skipped.append(f"{name} ({type(e).__name__}: {str(e).splitlines()[0][:80]})")
            return
        worst[name] = max(worst.get(name, 0.0), _rel(ours, theirs))

    for _ in range(N_STATES):
        q = robot.random_configuration(rng)
        v, a, tau = (rng.normal(size=robot.nv) for _ in range(3))
        qp, vp, ap = pm.q_to_pin(qfull(q)), pm.v_to_pin(G @ v), pm.v_to_pin(G @ a)
        M = red(pm.matrix_from_pin(_sym(pin.crba(model, data, qp))))
        Minv = np.linalg.inv(M) if coupled else pm.matrix_from_pin(_sym(pin.computeMinverse(model, data, qp)))
        a_fd = (np.linalg.solve(M, tau - G.T @ pm.tau_from_pin(pin.nonLinearEffects(model, data, qp, vp)))
                if coupled else pm.a_from_pin(pin.aba(model, data, qp, vp, pm.tau_to_pin(tau))))
        check("M", lambda: (mod.mass_matrix(q), M))
        check("ID", lambda: (mod.inverse_dynamics(q, v, a),
                             G.T @ pm.tau_from_pin(pin.rnea(model, data, qp, vp, ap))))
        check("FD", lambda: (mod.forward_dynamics(q, v, tau), a_fd))
        check("M^-1", lambda: (mod.mass_matrix_inverse(q), Minv))

        def com():
            c = pin.centerOfMass(model, data, qp)
            if not robot.is_free:                 # Pinocchio leaves the links welded to the ground out
                m0, c0, m = model.inertias[0].mass, model.inertias[0].lever, data.mass[0]
                c = (m * c + m0 * c0) / (m + m0)
            return mod.center_of_mass(q), c
        check("CoM", com)

        def jac():
            fid = model.getFrameId(leaf)
            if fid >= model.nframes:
                raise KeyError(f"no frame {leaf!r}")
            Jp = pin.computeFrameJacobian(model, data, qp, fid, pin.ReferenceFrame.LOCAL)
            return mod.jacobian(q, leaf), pm.jacobian_from_pin(Jp) @ G
        check(f"J({leaf})", jac)
        if dmod is not None:
            def rnea_d(vp=vp, ap=ap):
                dq, dv, _ = pin.computeRNEADerivatives(model, data, qp, vp, ap)
                return red(pm.matrix_from_pin(np.asarray(dq))), red(pm.matrix_from_pin(np.asarray(dv)))

            def id_d():
                return np.hstack(dmod.inverse_dynamics_derivatives(q, v, a)[:2]), np.hstack(rnea_d())

            def fd_d():
                ours = np.hstack(dmod.forward_dynamics_derivatives(q, v, tau)[:3])
                if not coupled:
                    pin.computeABADerivatives(model, data, qp, vp, pm.tau_to_pin(tau))
                    return ours, np.hstack([pm.matrix_from_pin(np.asarray(t)) for t in
                                            (data.ddq_dq, data.ddq_dv, _sym(data.Minv))])
                dq, dv = rnea_d(ap=pm.v_to_pin(G @ a_fd))
                return ours, np.hstack([-Minv @ dq, -Minv @ dv, Minv])
            check("ID derivatives", id_d)
            check("FD derivatives", fd_d)
    return worst, skipped


def run_one(path: Path, base: str, out: Path, profile: str) -> dict:
    """Load, compile and check one robot file on one base (in this process)."""
    from soadyn import load_robot
    from soadyn.codegen import compile_robot

    res: dict = {"base": base}
    t0 = time.perf_counter()
    try:
        robot = load_robot(path, base=base)
    except Exception as e:
        kind, line = _classify_exception(e)
        res.update(result="load " + kind, detail=line)
        return res
    res.update(nv=robot.nv, bodies=robot.n_bodies, coupled=robot.is_coupled)
    robot = robot.rigid()
    try:
        mod = compile_robot(robot, out_dir=out, profile=profile, progress=False)
        dmod = (compile_robot(robot, out_dir=out / "deriv", functions=list(DERIVATIVES), profile=profile,
                              progress=False) if robot.nv <= NV_DERIVATIVES else None)
    except Exception as e:
        kind, line = _classify_exception(e)
        name = type(e).__name__
        res.update(result=("compile error" if name == "CompileError" else f"generation {kind}"), detail=line)
        res["seconds"] = round(time.perf_counter() - t0, 1)
        return res
    res["compile_s"] = round(time.perf_counter() - t0, 1)
    try:
        worst, skipped = check_against_pinocchio(path, robot, mod, dmod)
    except Exception as e:
        res.update(result="check failed", detail=_classify_exception(e)[1])
        res["seconds"] = round(time.perf_counter() - t0, 1)
        return res
    res["worst"] = {k: float(f"{v:.3g}") for k, v in worst.items()}
    res["not_checked"] = skipped
    bad = {k: e for k, e in worst.items() if not e <= TOL}
    if bad:
        k = max(bad, key=lambda n: bad[n])
        res.update(result="mismatch", detail=f"{k} rel err {bad[k]:.2g}" + (f" (+{len(bad) - 1} more: "
                   f"{', '.join(sorted(set(bad) - {k}))})" if len(bad) > 1 else ""))
    else:
        res["result"] = "ok"
    res["seconds"] = round(time.perf_counter() - t0, 1)
    return res


def is_arm(path: Path) -> bool:
    """Whether the file's root link is the world or carries no mass and one child joint: a robot bolted
    down (arms, hands, pendulums), also swept on a fixed base."""
    import xml.etree.ElementTree as ET

    try:
        root = ET.parse(path).getroot()
    except ET.ParseError:
        return False
    children = {j.find("child").get("link") for j in root.iter("joint") if j.find("child") is not None}
    roots = [lk.get("name") for lk in root.iter("link") if lk.get("name") not in children]
    return any(r == "world" for r in roots) or any(
        w in str(path).lower() for w in ("ur_description", "panda", "xarm", "kinova", "z1_", "so_arm",
                                         "double_pendulum", "asr_twodof", "finger_edu", "allegro", "baxter"))


def child_main(path: str, out: str, profile: str) -> None:
    p = Path(path)
    bases = ["free", "fixed"] if is_arm(p) else ["free"]
    for base in bases:
        res = run_one(p, base, Path(out) / base, profile)
        print("RESULT " + json.dumps(res), flush=True)


def sweep_file(path: Path, root: Path, work: Path, timeout: float, profile: str) -> dict:
    rel = str(path.relative_to(root))
    label = rel.replace("/", "__").removesuffix(".urdf")
    row: dict = {"file": rel, "runs": []}
    t0 = time.perf_counter()
    info = subprocess.run([sys.executable, "-m", "soadyn.cli", "info", str(path)], capture_output=True,
                          text=True, cwd="/tmp", timeout=timeout, check=False)
    row["info"] = "ok" if info.returncode == 0 else ("traceback: " if "Traceback" in info.stderr else "") + \
        _last_line(info.stderr or info.stdout)
    env = dict(os.environ)
    try:
        p = subprocess.run([sys.executable, __file__, "--child", str(path), "--workdir", str(work / label),
                            "--profile", profile], capture_output=True, text=True, cwd="/tmp",
                           timeout=timeout, check=False, env=env)
        row["runs"] = [json.loads(ln[7:]) for ln in p.stdout.splitlines() if ln.startswith("RESULT ")]
        if p.returncode != 0:
            row["runs"].append({"result": "crash", "detail": _last_line(p.stderr)[:200]})
    except subprocess.TimeoutExpired:
        row["runs"].append({"result": "timeout", "detail": f"> {timeout:.0f} s"})
    row["seconds"] = round(time.perf_counter() - t0, 1)
    return row


def markdown(rows: list[dict]) -> str:
    out = ["| robot file | info | base | nv | bodies | result | seconds |", "|---|---|---|---|---|---|---|"]
    for r in rows:
        runs = r["runs"] or [{"result": "-"}]
        for i, run in enumerate(runs):
            res = run["result"] + (f": {run['detail']}" if run.get("detail") else "")
            if run.get("not_checked"):
                res += f" (not checked: {'; '.join(run['not_checked'])})"
            res = res.replace("|", "\\|")
            out.append(f"| {r['file'] if i == 0 else ''} | {(r['info'] if i == 0 else '')[:100]} | "
                       f"{run.get('base', '')} | {run.get('nv', '')} | {run.get('bodies', '')} | {res} | "
                       f"{run.get('seconds', r['seconds'] if i == 0 else '')} |")
    return "\n".join(out)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--workdir", default="/tmp/erdsweep/sweep")
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--timeout", type=float, default=900.0, help="seconds per robot file (all bases)")
    ap.add_argument("--only", default="", help="comma-separated substrings of the files to sweep")
    ap.add_argument("--profile", default="fast")
    ap.add_argument("--json", default="", help="write the rows to this JSON file")
    ap.add_argument("--markdown", action="store_true", help="print the table as Markdown")
    ap.add_argument("--child", default="", help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.child:
        child_main(a.child, a.workdir, a.profile)
        return
    root = _robots_dir()
    work = Path(a.workdir)
    work.mkdir(parents=True, exist_ok=True)
    files = urdf_files(root)
    if a.only:
        files = [f for f in files if any(s in str(f) for s in a.only.split(","))]
    print(f"{len(files)} URDF files under {root}; not swept (not URDF): {others(root)}", flush=True)
    rows: list[dict] = []
    with ThreadPoolExecutor(a.jobs) as ex:
        for row in ex.map(lambda f: sweep_file(f, root, work, a.timeout, a.profile), files):
            rows.append(row)
            for run in row["runs"]:
                print(f"{row['file']:<60} {run.get('base', ''):<5} nv={run.get('nv', '')!s:<3} "
                      f"{run['result']}{': ' + run['detail'] if run.get('detail') else ''}"
                      f"  [{run.get('seconds', '')} s]", flush=True)
            if row["info"] != "ok":
                print(f"{row['file']:<60} info: {row['info']}", flush=True)
    if a.json:
        Path(a.json).write_text(json.dumps(rows, indent=1) + "\n")
    if a.markdown:
        print(markdown(rows))


if __name__ == "__main__":
    main()
