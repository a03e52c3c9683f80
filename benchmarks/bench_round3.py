#!/usr/bin/env python3
"""Issue 26's table from one run: held-out robots, the shipped modules' C against Pinocchio 4.1 C++ in
alternating rounds, and every batched entry point against its single call.

    python benchmarks/bench_round3.py [--rounds 3] [--robots xarm7_free,ur10_fixed,...]

Robots (example-robot-data URDFs that no test uses): xArm7 on a free base (nv = 13) and fixed (nv = 7), B1
quadruped + Z1 arm on a free base with the gripper joint locked (nv = 24), UR10 fixed (nv = 6), TALOS
reduced on a free base (nv = 38; no derivative module unless ``--derivatives talos_free``: its compile
takes ~40 s more),
Kinova Jaco2 (6 joints, fingers fixed) on a free base (nv = 12) and UR3 fixed (nv = 6).
Every robot is compiled with ideal joints (``Robot.rigid``: the URDFs' damping and friction dropped), as
Pinocchio's algorithms compute.

Per robot, once: a fresh compile of the default functions (``bench_dynamics.fresh_compile``: child process,
no object cache, the shipped ``fast`` profile; wall seconds against the compile budget) and a second module
of the two derivative functions; the Pinocchio model built from the soadyn robot
(``bench_dynamics.pin_model``), 1,000 random states shared by both sides, and the checks at state 0 (FD
against ABA, the derivatives against ``computeRNEADerivatives`` / ``computeABADerivatives``).
Then ``--rounds`` rounds, each: every single-state C function of both modules in a C loop over the states
(the shipped extension's own symbols, any signature: ``bench_dynamics.time_module_functions``), Pinocchio's
RNEA / CRBA / ABA / computeMinverse (``bench_pinocchio.bench_pinocchio_model``) and its derivative program
(``bench_derivatives``: one build for every robot), and every batched Python entry point with ``threads=1``
against one call per state from Python (``bench_batches.batch_row``).  Each figure is the minimum over
the rounds (process CPU time; other jobs on the shared machine inflate it the least).

Printed: the issue's table (soadyn ns, Pinocchio ns, ratio, target) and, per robot, every function with a
batched entry: C single call, Python single call, batched per state, and batched / C single (target <= 0.8).
"""

from __future__ import annotations

import argparse
import inspect
import json
import os
import shutil
import sys
import tempfile
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import bench_batches as bb  # noqa: E402
import bench_derivatives as bdv  # noqa: E402
import bench_dynamics as bd  # noqa: E402
import bench_pinocchio as bp  # noqa: E402

from soadyn import load_robot  # noqa: E402
from soadyn.codegen import load  # noqa: E402
from soadyn.structure.operations import lock_joints  # noqa: E402

#: label -> (URDF under example-robot-data/robots, base, joints locked at 0, derivative module)
ROBOTS = {
    "xarm7_free": ("xarm_description/urdf/xarm7.urdf", "free", [], True),
    "xarm7_fixed": ("xarm_description/urdf/xarm7.urdf", "fixed", [], True),
    "b1_z1_free": ("b1_description/urdf/b1-z1.urdf", "free", ["jointGripper"], True),
    "ur10_fixed": ("ur_description/urdf/ur10_robot.urdf", "fixed", [], True),
    "talos_free": ("talos_data/robots/talos_reduced.urdf", "free", [], False),
    "kinova_free": ("kinova_description/robots/kinova.urdf", "free", [], True),
    "ur3_fixed": ("ur_description/urdf/ur3_robot.urdf", "fixed", [], True),
}
DERIVATIVES = ("inverse_dynamics_derivatives", "forward_dynamics_derivatives")
#: (row label, soadyn C function, Pinocchio timing, target ratio)
SINGLE_ROWS = (("FD single", "forward_dynamics", "aba", 4.0),
               ("M^-1 single", "mass_matrix_inverse", "minv", 3.0),
               ("ID single", "inverse_dynamics", "rnea", 4.0),
               ("M single", "mass_matrix", "crba", 2.5),
               ("ID derivatives single", "inverse_dynamics_derivatives", "rnea_derivatives", 4.0),
               ("FD derivatives single", "forward_dynamics_derivatives", "aba_derivatives", 3.0))
#: (row label, Python function, Pinocchio timing, target ratio)
BATCH_ROWS = (("M batched per state", "mass_matrix", "crba", 2.5),
              ("ID derivatives batched per state", "inverse_dynamics_derivatives", "rnea_derivatives", None),
              ("FD derivatives batched per state", "forward_dynamics_derivatives", "aba_derivatives", None))
#: compile budget of the default functions, seconds (issue 26): by nv
BUDGET = {13: 8.0, 38: 30.0}
BATCH_TARGET = 0.8


def robots_dir() -> Path:
    return bp.cmeel_prefix() / "share" / "example-robot-data" / "robots"


def c_name(api: str) -> str:
    """The C function a Python entry point calls for one state with its defaults."""
    return "jacobian_local" if api == "jacobian" else api


def batched_entries(mod, ins: dict[str, np.ndarray], frame: str) -> dict[str, tuple]:
    """Every Python function of ``mod`` with a ``threads=`` argument -> (callable of the array arguments,
    their batch arrays); ``frame`` fills a ``frame`` argument, optional arguments keep their defaults."""
    out = {}
    for name in sorted(dir(mod)):
        f = getattr(mod, name)
        if name.startswith("_") or not callable(f):
            continue
        try:
            sig = inspect.signature(f)
        except (TypeError, ValueError):
            continue
        if "threads" not in sig.parameters:
            continue
        pos = [p for p in sig.parameters.values()
               if p.kind == p.POSITIONAL_OR_KEYWORD and p.default is inspect.Parameter.empty]
        arrays = [p.name for p in pos if p.name != "frame"]
        if any(a not in ins for a in arrays):
            continue

        def call(*arrs, _f=f, _pos=tuple(p.name for p in pos), **kw):
            it = iter(arrs)
            return _f(*[frame if p == "frame" else next(it) for p in _pos], **kw)

        out[name] = (call, [ins[a] for a in arrays])
    return out


def draw_states(robot, pm, n: int, n_batch: int) -> tuple[dict, dict, dict]:
    """``n`` random states of Pinocchio model ``pm`` (seed 0), the same in soadyn's conventions with wrenches,
    momenta and joint rates added (seed 1), and those tiled into ``n_batch`` states for the batches."""
    pst = bp.random_states(pm, n, seed=0)
    st = bp.states_to_soadyn(pst, robot.is_free)
    rng = np.random.default_rng(1)
    st["f_ext"] = rng.uniform(-1, 1, (n, 6 * robot.n_bodies))
    st["h"] = rng.uniform(-1, 1, (n, 6))
    st["qd"] = np.ascontiguousarray(st["v"][:, 6:] if robot.is_free else st["v"])     # joint rates
    reps = -(-n_batch // n)
    batch = {k: np.ascontiguousarray(np.tile(x, (reps, 1))[:n_batch]) for k, x in st.items()}
    return pst, st, batch


def prepare(label: str, work: Path, n: int, n_batch: int, flags: list[str],
            derivatives: bool = False) -> dict:
    """Compile the modules of one robot, draw the states, check both sides at state 0; ``derivatives``:
    the derivative module too where the robot's row has none by default."""
    import pinocchio as pin

    from soadyn.model.conventions import PinocchioMap

    rel, base, lock, derivs = ROBOTS[label]
    derivs = derivs or derivatives
    path = robots_dir() / rel
    robot = load_robot(path, base=base, mimic="independent")
    robot = (lock_joints(robot, lock) if lock else robot).rigid()      # Pinocchio's ABA has no damping
    frame = robot.body_names[-1]                  # a leaf (depth-first order): the tip of an arm
    info = bd.fresh_compile(path, base, lock, work / label, "fast", rigid=True)
    mods = {"default": load(info["module_dir"])}
    infod = None
    if derivs:
        infod = bd.fresh_compile(path, base, lock, work / f"{label}_deriv", "fast", ",".join(DERIVATIVES),
                                 rigid=True)
        mods["derivatives"] = load(infod["module_dir"])
    pm = bd.pin_model(robot, frame)
    pst, st, batch = draw_states(robot, pm, n, n_batch)
    checks = {}
    mod = mods["default"]
    pmap = PinocchioMap(robot, pm)
    data = pm.createData()
    q0, v0, a0, t0 = (pst[k][0] for k in ("q", "v", "a", "tau"))
    aba = bp.states_to_soadyn({"a": pin.aba(pm, data, q0, v0, t0)[None, :]}, robot.is_free)["a"][0]
    fd = mod.forward_dynamics(st["q"][0], st["v"][0], st["tau"][0])
    checks["FD vs ABA"] = float(np.max(np.abs(fd - aba)) / np.max(np.abs(aba)))
    Mi = pin.computeMinverse(pm, data, q0)
    Mi = np.triu(Mi) + np.triu(Mi, 1).T
    checks["M^-1 vs computeMinverse"] = float(np.max(np.abs(mod.mass_matrix_inverse(st["q"][0])
                                                           - pmap.matrix_from_pin(Mi))) / np.max(np.abs(Mi)))
    pin_deriv = None
    if derivs:
        res = bdv.bench_pinocchio_derivatives(pm, flags, n, 0, work / "pin_deriv", states=pst,
                                              tag=f"_{label}")
        ref = res["reference_state0"]
        md = mods["derivatives"]
        dq, dv = md.inverse_dynamics_derivatives(st["q"][0], st["v"][0], st["a"][0])
        da = md.forward_dynamics_derivatives(st["q"][0], st["v"][0], st["tau"][0])
        for k, o in (("dtau_dq", dq), ("dtau_dv", dv), *zip(("ddq_dq", "ddq_dv", "ddq_dtau"), da)):
            checks[k] = float(np.max(np.abs(o - pmap.matrix_from_pin(ref[k]))) / np.max(np.abs(ref[k])))
        checks["Pinocchio derivative C++ vs Python"] = max(res["check_max_rel_diff"].values())
        pin_deriv = res["timing_command"]
    return {"label": label, "robot": robot, "frame": frame, "info": info, "info_deriv": infod, "mods": mods,
            "pm": pm, "pst": pst,
            "st": st, "batch": batch, "checks": checks, "pin_deriv": pin_deriv}


def one_round(job: dict, work: Path, seen: dict, fresh: bool = False) -> None:
    """One timing round of a robot; ``seen[(side, name)]`` collects the ns of every round.  ``fresh``: both
    sides' C is timed from fresh copies of their shared object / program (a new placement of the pages
    per round: the same bytes ran up to 2x apart between copies, benchmarks/README.md)."""
    label, st = job["label"], job["st"]

    def keep(side: str, name: str, ns: float) -> None:
        seen.setdefault((side, name), []).append(ns)

    for kind, mod in job["mods"].items():
        fid = mod.frame_ids[job["frame"]]
        names = [k.removeprefix(mod.module_name + "_") for k in bd.prototypes(mod)]
        copy = None
        if fresh:
            copies = work / label / "copies"
            copies.mkdir(parents=True, exist_ok=True)
            fd, name = tempfile.mkstemp(prefix=f"{kind}_", suffix=".so", dir=copies)
            os.close(fd)
            copy = Path(name)
            shutil.copy2(_shared_object(mod), copy)
        try:
            timed = bd.time_module_functions(mod, names, st, work / label / f"harness_{kind}", fid,
                                             library=copy)
        finally:
            if copy is not None:
                copy.unlink()
        for f, ns in timed.items():
            keep("c", f, ns)
        for f, (g, arrays) in batched_entries(mod, job["batch"], job["frame"]).items():
            _, (single, single_out, batched, batched_out) = bb.batch_row(g, arrays, 300)
            keep("py_single", f, min(single, single_out))
            keep("batch", f, batched)
            keep("batch_out", f, batched_out)
    pin = bp.bench_pinocchio_model(job["pm"], job["frame"], n_states=len(st["q"]), workdir=work / "pinocchio",
                                   states=job["pst"], fresh_copy=fresh)
    for k, ns in pin["ns_per_call"].items():
        keep("pinocchio", k, ns)
    if job["pin_deriv"]:
        for k, ns in bdv.time_pinocchio(job["pin_deriv"], stat="ns_min", fresh_copy=fresh).items():
            keep("pinocchio", k, ns)


def _shared_object(mod) -> Path:
    """The compiled extension of a loaded module (its ``_soadyn_*.so`` beside ``__init__.py``)."""
    found = sorted(Path(mod.__file__).parent.glob("_soadyn_*.so"))
    if len(found) != 1:
        raise bp.BenchError(f"{mod.__name__}: expected one _soadyn_*.so beside {mod.__file__}, found {found}")
    return found[0]


def reduce_rounds(seen: dict, stat: str) -> dict:
    """One figure per (side, name) from the rounds: ``min`` or ``median``."""
    f = min if stat == "min" else (lambda xs: float(np.median(xs)))
    return {k: f(v) for k, v in seen.items()}


def _cell(x: float | None, fmt: str = ",.0f") -> str:
    return "-" if x is None or x != x else format(x, fmt)


def report(jobs: list[dict], best: dict[str, dict]) -> str:
    lines = ["| robot | function | soadyn ns | Pinocchio ns | ratio | target |", "|---|---|---|---|---|---|"]
    for job in jobs:
        b, r = best[job["label"]], job["robot"]
        head = f"{job['label']} (nv {r.nv})"
        for label, f, pf, target in SINGLE_ROWS:
            s, p = b.get(("c", f)), b.get(("pinocchio", pf))
            if s is None:
                continue
            ok = "" if p is None else (" met" if p / s >= target else " NOT met")
            lines.append(f"| {head} | {label} | {_cell(s)} | {_cell(p)} | "
                         f"{_cell(p / s if p else None, '.2f')}x | {target:g}x{ok} |")
            head = ""
        for label, f, pf, target in BATCH_ROWS:
            s, p, c = b.get(("batch", f)), b.get(("pinocchio", pf)), b.get(("c", f))
            if s is None:
                continue
            tgt = f"{target:g}x" if target else f"<= {BATCH_TARGET}x single"
            lines.append(f"| {head} | {label} (batch / C single {_cell(s / c, '.2f')}) | {_cell(s)} | "
                         f"{_cell(p)} | {_cell(p / s if p else None, '.2f')}x | {tgt} |")
            head = ""
    lines.append("")
    for job in jobs:
        b, r, info = best[job["label"]], job["robot"], job["info"]
        t = info["stamp"]["timings"]
        budget = BUDGET.get(r.nv)
        lines += [f"#### {job['label']}: {r.name} ({r.base} base, nq = {r.nq}, nv = {r.nv}), "
                  f"frame {job['frame']}", "",
                  f"default functions: compile wall {info['wall']:.1f} s"
                  + (f" (budget {budget:g} s)" if budget else "") + "; "
                  + ", ".join(f"{k} {v:.1f} s" for k, v in t.items())
                  + f"; {sum(v['total'] for v in info['stamp']['ops'].values()):,} operations"
                  + (f"; derivative functions: compile wall {job['info_deriv']['wall']:.1f} s"
                     if job.get("info_deriv") else ""),
                  "checks at state 0 (max relative difference): "
                  + ", ".join(f"{k} {v:.1e}" for k, v in job["checks"].items()), "",
                  "| function | C single ns | Python single ns | batch ns/state | batch out= ns/state "
                  "| batch / C single | batch / Python single |", "|---|---|---|---|---|---|---|"]
        worst = []
        for f in sorted({k for side, k in b if side == "batch"}):
            c, py, bt, bo = (b.get((s, x)) for s, x in (("c", c_name(f)), ("py_single", f), ("batch", f),
                                                        ("batch_out", f)))
            ratio = bt / c if c else None
            mark = " **" if ratio and ratio > BATCH_TARGET else ""
            if mark:
                worst.append(f)
            lines.append(f"| {f} | {_cell(c)} | {_cell(py)} | {_cell(bt)} | {_cell(bo)} | "
                         f"{_cell(ratio, '.2f')}{mark} | {_cell(bt / py if py else None, '.2f')} |")
        lines += ["", f"above {BATCH_TARGET}x the C single call: {', '.join(worst) or 'none'}", ""]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--robots", default=",".join(ROBOTS), help=f"comma-separated, of {', '.join(ROBOTS)}")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--states", type=int, default=1000, help="states of the C loops (both sides)")
    ap.add_argument("--batch", type=int, default=2000, help="states per batched call from Python")
    ap.add_argument("--flags", default=" ".join(bp.DEFAULT_FLAGS), help="Pinocchio's C++ flags")
    ap.add_argument("--workdir", default=str(HERE / "build" / "round3"))
    ap.add_argument("--out", help="write the figures (JSON) here")
    ap.add_argument("--derivatives", default="",
                    help="comma-separated robots whose derivative module is built and timed although their "
                         "row has none by default (talos_free: ~40 s more of compile)")
    ap.add_argument("--robot", action="append", default=[], metavar="LABEL=PATH@BASE[@LOCK,...]",
                    help="another robot (repeatable): an example-robot-data URDF path under robots/ (or an "
                         "absolute path), base free or fixed, joints locked at 0; timed with its derivative "
                         "module, e.g. anymal_c=anymal_c_simple_description/urdf/anymal.urdf@free")
    ap.add_argument("--fresh-copies", action="store_true",
                    help="time both sides from fresh copies of their compiled code every round (a new "
                         "placement of the pages per round) and report the median over the rounds instead "
                         "of the minimum")
    args = ap.parse_args(argv)
    labels = [x for x in args.robots.split(",") if x]
    for spec in args.robot:
        label, _, rest = spec.partition("=")
        rel, _, rest = rest.partition("@")
        base, _, lock = rest.partition("@")
        if not label or not rel or base not in ("free", "fixed") or label in ROBOTS:
            ap.error(f"--robot {spec!r}: give LABEL=PATH@free or LABEL=PATH@fixed[@JOINT,...], a new LABEL")
        ROBOTS[label] = (rel, base, [j for j in lock.split(",") if j], True)
        labels.append(label)
    extra = [x for x in args.derivatives.split(",") if x]
    unknown = [x for x in labels + extra if x not in ROBOTS]
    if unknown:
        ap.error(f"unknown robot(s) {unknown}; choose from {', '.join(ROBOTS)}")
    if set(extra) - set(labels):
        ap.error(f"--derivatives {','.join(sorted(set(extra) - set(labels)))}: not in --robots")
    work = Path(args.workdir).resolve()
    work.mkdir(parents=True, exist_ok=True)
    flags = args.flags.split()
    print(f"machine: {bp.machine_info()}; {bp._compiler_version(bp._compiler('c'))}; "
          f"load average {os.getloadavg()[0]:.1f}", flush=True)
    jobs = []
    try:
        for label in labels:
            jobs.append(prepare(label, work, args.states, args.batch, flags, label in extra))
            infod = jobs[-1]["info_deriv"]
            print(f"{label}: compiled in {jobs[-1]['info']['wall']:.1f} s"
                  + (f", derivative functions in {infod['wall']:.1f} s" if infod else "")
                  + f" (load {os.getloadavg()[0]:.1f})", flush=True)
    except bp.BenchError as e:           # no Pinocchio/Eigen headers, a compiler failure: one line
        print(f"bench_round3: {e}", file=sys.stderr)
        return 1
    seen: dict[str, dict] = {j["label"]: {} for j in jobs}
    stat = "median" if args.fresh_copies else "min"
    loads = []
    for r in range(args.rounds):
        for job in jobs:
            one_round(job, work, seen[job["label"]], fresh=args.fresh_copies)
            loads.append(os.getloadavg()[0])
            b = reduce_rounds(seen[job["label"]], stat)
            print(f"round {r} {job['label']} (load {loads[-1]:.1f}): "
                  + ", ".join(f"{f} {b.get(('c', f), 0):.0f}/{b.get(('pinocchio', p), 0):.0f}"
                              for _, f, p, _ in SINGLE_ROWS if ("c", f) in b), flush=True)
    best = {lab: reduce_rounds(v, stat) for lab, v in seen.items()}
    print()
    print(f"figures: {stat} over {args.rounds} rounds"
          + (" (both sides timed from a fresh copy of their compiled code in every round)"
             if args.fresh_copies else ""))
    print(report(jobs, best))
    print(f"load average during the rounds: {min(loads):.1f}-{max(loads):.1f}")
    if args.out:
        Path(args.out).write_text(json.dumps({lab: {f"{s}:{k}": v for (s, k), v in b.items()}
                                              for lab, b in best.items()}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
