"""CasADi's external-function C interface for a compiled module: generated wrappers and their library.

:func:`emit_abi` renders ``templates/casadi_abi.c.j2``: for every described function ``<name>`` the
symbols that ``casadi.external(name, library)`` looks up (``<name>``, ``_n_in``, ``_n_out``, ``_name_in``,
``_name_out``, ``_sparsity_in``, ``_sparsity_out``, ``_work``) and, when the module has the derivatives,
``jac_<name>``: CasADi's full Jacobian (inputs: the inputs, then the nominal outputs; one output of size
(all output entries) x (all input entries) with its sparsity pattern; CasADi's ``External`` reads
``jac_<name>_sparsity_out(0)`` as the Jacobian's sparsity and calls ``jac_<name>`` whenever its AD needs a
derivative).  The wrappers call the module's own C functions: no second derivation.
:func:`build_library` compiles them with the module's C source into one shared library (plain C, no
Python), which CasADi's generated C code can also link.

The descriptions (:class:`AbiFunction`) are plain data; :mod:`soadyn.casadi` makes them from a loaded
module.
"""

from __future__ import annotations

import hashlib
import json
import os
import sys
from collections.abc import Sequence
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path

import jinja2

from soadyn.codegen.build import CompileError, _check, _run
from soadyn.codegen.emit import generator_version
from soadyn.codegen.profiles import compiler_command


@dataclass(frozen=True)
class AbiArg:
    """An array: CasADi name, (rows, cols) in CasADi, whether the module stores it row-major (transposed)."""

    name: str
    rows: int
    cols: int

    @property
    def size(self) -> int:
        return self.rows * self.cols

    @property
    def transpose(self) -> bool:
        return self.rows > 1 and self.cols > 1


@dataclass(frozen=True)
class AbiJacobian:
    """The full Jacobian of a function from the module's generated derivative functions.

    ``kind``: the public function (``inverse_dynamics``, ``forward_dynamics``, ``frame_pose``,
    ``frame_twist``, ``frame_acceleration``); ``prefix``: the module's C prefix (``<module>_``); ``frame``:
    the frame id of a family; ``pattern``: boolean rows x columns (nested tuples) of the true sparsity,
    rows in CasADi's order of the outputs' entries (column-major), columns q (raw, nq), then the other
    inputs."""

    kind: str
    prefix: str
    nq: int
    nv: int
    pattern: tuple[tuple[bool, ...], ...]
    frame: int | None = None
    #: the number of bodies: of the variant with external wrenches (its f_ext is input 3) and of
    #: ``body_poses``; 0 otherwise
    fext_bodies: int = 0
    #: ``kind == "tangent"``: the C function of the forward-mode derivatives (``<prefix><api>_derivatives``:
    #: for each output y and input x, ``d<y>_d<x>``, row-major ``y.shape + x.shape``, q along the tangent
    #: (nv)), and the function's inputs and outputs (q first)
    tangent: str = ""
    inputs: tuple[AbiArg, ...] = ()
    outputs: tuple[AbiArg, ...] = ()


@dataclass(frozen=True)
class AbiFunction:
    """One exported CasADi function ``name`` calling the module's C function ``call`` (``frame``: the
    frame id of a family), ``quat``: index of the input q of a free base (checked for a zero quaternion)."""

    name: str
    call: str
    doc: str
    inputs: tuple[AbiArg, ...]
    outputs: tuple[AbiArg, ...]
    frame: int | None = None
    quat: int | None = None
    jac: AbiJacobian | None = field(default=None)


def dense_sparsity(rows: int, cols: int) -> list[int]:
    """CasADi's compressed form of a dense pattern: ``[rows, cols, 1]``."""
    return [rows, cols, 1]


def ccs(pattern: Sequence[Sequence[bool]]) -> list[int]:
    """CasADi's compressed-column sparsity ``[nrow, ncol, colind (ncol + 1), row (nnz)]`` of a pattern."""
    nrow = len(pattern)
    ncol = len(pattern[0]) if nrow else 0
    colind, row = [0], []
    for c in range(ncol):
        row += [r for r in range(nrow) if pattern[r][c]]
        colind.append(len(row))
    return [nrow, ncol, *colind, *row]


def _env() -> jinja2.Environment:
    return jinja2.Environment(
        loader=jinja2.FunctionLoader(
            lambda name: resources.files("soadyn.templates").joinpath(name).read_text(encoding="utf-8")),
        undefined=jinja2.StrictUndefined, trim_blocks=True, lstrip_blocks=True, keep_trailing_newline=True)


def _layout(args: Sequence[AbiArg], start: int, sparsities: list[list[int]]) -> tuple[list[dict], int]:
    """Template entries of arrays with their work offsets and sparsity indices."""
    out, off = [], start
    for a in args:
        sp = dense_sparsity(a.rows, a.cols)
        if sp not in sparsities:
            sparsities.append(sp)
        out.append({"name": a.name, "rows": a.rows, "cols": a.cols, "size": a.size, "woff": off,
                    "transpose": int(a.transpose), "sp": sparsities.index(sp)})
        off += a.size
    return out, off


def _jacobian(f: AbiFunction, ins: list[dict]) -> dict:
    j = f.jac
    assert j is not None
    nrow = sum(a.size for a in f.outputs)
    ncol = sum(a.size for a in f.inputs)
    if nrow != len(j.pattern) or any(len(r) != ncol for r in j.pattern):
        raise ValueError(f"{f.name}: Jacobian pattern is not {nrow} x {ncol}")
    sparsities: list[list[int]] = []
    nominal = [AbiArg("out_" + a.name, a.rows, a.cols) for a in f.outputs]
    jins, _ = _layout([*f.inputs, *nominal], 0, sparsities)
    n_in_work = sum(a.size for a in f.inputs)
    # CasADi >= 3.6: one output per block d output / d input, outputs major
    jout, gathers = [], []
    r0 = 0
    for o in f.outputs:
        c0 = 0
        for i in f.inputs:
            block = [row[c0:c0 + i.size] for row in j.pattern[r0:r0 + o.size]]
            sp = ccs(block)
            if sp not in sparsities:
                sparsities.append(sp)
            k = sparsities.index(sp)
            gathers.append(f"if (res[{len(jout)}]) soadyn_ca_gather(res[{len(jout)}], J, {nrow}, {r0}, {c0}, "
                           f"jac_{f.name}_s{k});")
            jout.append({"name": f"jac_{o.name}_{i.name}", "sp": k})
            c0 += i.size
        r0 += o.size
    body, n_work = _jacobian_body(j, nrow, n_in_work)
    del ins
    return {"inputs": jins, "outputs": jout, "sparsities": sparsities, "jwoff": n_work, "jsize": nrow * ncol,
            "n_work": n_work + nrow * ncol, "body": body + gathers}


def _jacobian_body(j: AbiJacobian, nrow: int, start: int) -> tuple[list[str], int]:
    """C statements that fill the dense column-major Jacobian ``J`` (``nrow`` rows) from the module's
    derivative functions, with their buffers in ``w`` from offset ``start``; returns (lines, end offset)."""
    nq, nv, p, fid = j.nq, j.nv, j.prefix, j.frame
    off = start
    bufs: list[str] = []

    def buf(name: str, size: int) -> str:
        nonlocal off
        bufs.append(f"double *{name} = w + {off};")
        off += size
        return name

    if j.kind in ("inverse_dynamics", "forward_dynamics"):
        d = [buf(f"D{k}", nv * nv) for k in range(3)]
        nb = j.fext_bodies
        sfx, fx = ("_fext", "x[3], ") if nb else ("", "")
        ip = next((i for i, x in enumerate(j.inputs) if x.name == "params"), None)
        px = f"x[{ip}], " if ip is not None else ""     # run-time inertial parameters: the last input
        if j.kind == "inverse_dynamics":
            call = [f"{p}inverse_dynamics_derivatives{sfx}(x[0], x[1], x[2], {fx}{px}D0, D1);",
                    f"{p}mass_matrix(x[0], {px}D2);"]
        else:
            call = [f"{p}forward_dynamics_derivatives{sfx}(x[0], x[1], x[2], {fx}{px}D0, D1, D2);"]
        if ip is not None:     # dtau/dparams = Y(q, v, a) (the regressor); da/dparams = -M^-1 Y(q, v, a)
            npb = j.inputs[ip].rows
            ncol = 10 * npb
            buf("Y", nv * ncol)
            c0 = nq + 2 * nv + 6 * nb
            acc = "x[2]"
            if j.kind == "forward_dynamics":
                buf("A", nv)
                call.append(f"{p}forward_dynamics{sfx}(x[0], x[1], x[2], {fx}{px}A);")
                acc = "A"
            call.append(f"{p}inverse_dynamics_regressor(x[0], x[1], {acc}, Y);")
            # params (npb x 10, CasADi column-major): entry (k, c) is column c0 + k + npb c
            if j.kind == "inverse_dynamics":
                sign, t, inner = "", f"Y[i_ * {ncol} + k_ * 10 + c_]", ""
            else:
                sign, t = "-", "t_"
                inner = (f"t_ = 0.0; for (m_ = 0; m_ < {nv}; ++m_) "
                         f"t_ += D2[i_ * {nv} + m_] * Y[m_ * {ncol} + k_ * 10 + c_]; ")
            call.append(f"{{ int i_, k_, c_, m_; double t_; (void)m_; (void)t_; "
                        f"for (k_ = 0; k_ < {npb}; ++k_) for (c_ = 0; c_ < 10; ++c_) "
                        f"for (i_ = 0; i_ < {nv}; ++i_) {{ {inner}"
                        f"J[i_ + {nrow} * ({c0} + k_ + {npb} * c_)] = {sign}{t}; }} }}")
        lines = [*call, f"soadyn_ca_qcols(J, {nrow}, {d[0]}, x[0], {nv});",
                 f"soadyn_ca_block(J, {nrow}, 0, {nq}, D1, {nv}, {nv});",
                 f"soadyn_ca_block(J, {nrow}, 0, {nq + nv}, D2, {nv}, {nv});"]
        if nb:       # f_ext (nb x 6, CasADi column-major) columns: -J_k^T (ID) or M^-1 J_k^T (FD)
            buf("Jk", 6 * nv)
            minv = "NULL" if j.kind == "inverse_dynamics" else "D2"
            lines += [f"for (k = 0; k < {nb}; ++k) {{",
                      f"    if ({p}jacobian_local(x[0], k, Jk)) return 1;",
                      f"    soadyn_ca_fext_cols(J, {nrow}, {nq + 2 * nv}, {nb}, k, Jk, {minv}, {nv});",
                      "}"]
    elif j.kind == "frame_pose":
        buf("Jw", 6 * nv), buf("Rp", 12), buf("Dq", 12 * nv)
        lines = [f"if ({p}jacobian_world(x[0], {fid}, Jw)) return 1;",
                 f"if ({p}frame_pose(x[0], {fid}, Rp, Rp + 9)) return 1;",
                 f"soadyn_ca_rotation_rows(Dq, {nv}, Jw, Rp);",
                 f"memcpy(Dq + {9 * nv}, Jw + {3 * nv}, {3 * nv} * sizeof(double));",
                 f"soadyn_ca_qcols(J, {nrow}, Dq, x[0], {nv});"]
    elif j.kind == "body_poses":
        nb = j.fext_bodies
        buf("Jw", 6 * nv), buf("Rp", 12 * nb), buf("Dq", 12 * nb * nv)
        lines = [f"{p}body_poses(x[0], Rp, Rp + {9 * nb});",
                 f"for (k = 0; k < {nb}; ++k) {{",
                 f"    if ({p}jacobian_world(x[0], k, Jw)) return 1;",
                 f"    soadyn_ca_body_rows(Dq, {nv}, {nb}, k, Jw, Rp + 9 * k);",
                 "}",
                 f"soadyn_ca_qcols(J, {nrow}, Dq, x[0], {nv});"]
    elif j.kind in ("frame_twist", "frame_acceleration"):
        buf("Jw", 6 * nv), buf("VA", 12), buf("Dq", 12 * nv), buf("Dv", 6 * nv)
        a = "x[2]"
        lines = []
        if j.kind == "frame_twist":
            buf("Z", nv)
            a = "Z"
            lines.append(f"memset(Z, 0, {nv} * sizeof(double));")
        lines += [f"if ({p}frame_acceleration_derivatives(x[0], x[1], {a}, {fid}, VA, VA + 6, Dq, "
                  f"Dq + {6 * nv}, Dv)) return 1;",
                  f"if ({p}jacobian_world(x[0], {fid}, Jw)) return 1;",
                  f"soadyn_ca_qcols(J, {nrow}, Dq, x[0], {nv});",
                  f"soadyn_ca_block(J, {nrow}, 0, {nq}, Jw, 6, {nv});"]
        if j.kind == "frame_acceleration":
            lines += [f"soadyn_ca_block(J, {nrow}, 6, {nq}, Dv, 6, {nv});",
                      f"soadyn_ca_block(J, {nrow}, 6, {nq + nv}, Jw, 6, {nv});"]
    elif j.kind == "tangent":      # outputs major: d y_k / d x_i, then the raw-q columns from the tangent
        ds = [[buf(f"D{k}_{i}", o.size * (nv if i == 0 else x.size)) for i, x in enumerate(j.inputs)]
              for k, o in enumerate(j.outputs)]
        buf("Dq", nrow * nv)
        frame = f"{fid}, " if fid is not None else ""
        args = ", ".join([*(f"x[{i}]" for i in range(len(j.inputs)))])
        call = f"{j.tangent}({args}, {frame}{', '.join(d for row in ds for d in row)})"
        lines = [f"if ({call}) return 1;" if fid is not None else f"{call};"]
        r0 = 0
        for k, o in enumerate(j.outputs):
            c0 = nq
            for i, x in enumerate(j.inputs):
                if i == 0:
                    lines.append(f"soadyn_ca_trows(Dq, {nv}, {r0}, {ds[k][i]}, {o.rows}, {o.cols});")
                else:
                    lines.append(f"soadyn_ca_tblock(J, {nrow}, {r0}, {c0}, {ds[k][i]}, {o.rows}, {o.cols}, "
                                 f"{x.rows}, {x.cols});")
                    c0 += x.size
            r0 += o.size
        lines.append(f"soadyn_ca_qcols(J, {nrow}, Dq, x[0], {nv});")
    else:
        raise ValueError(f"no C Jacobian for {j.kind!r}")
    return [*bufs, *lines], off


def emit_abi(module: str, header: str, functions: Sequence[AbiFunction], free: bool) -> str:
    """C source of the CasADi interface of ``functions`` (module ``module``, header file ``header``)."""
    entries = []
    for f in functions:
        sparsities: list[list[int]] = []
        ins, off = _layout(f.inputs, 0, sparsities)
        outs, off = _layout(f.outputs, off, sparsities)
        entries.append({"name": f.name, "call": f.call, "doc": f.doc.replace("*/", "* /"), "inputs": ins,
                        "outputs": outs, "frame": f.frame, "quat": f.quat, "n_work": off,
                        "sparsities": sparsities, "jac": _jacobian(f, ins) if f.jac else None})
    return _env().get_template("casadi_abi.c.j2").render(
        source_name=f"{module}_casadi.c", module=module, header=header, version=generator_version(),
        free=free, any_jac=any(f.jac for f in functions), functions=entries)


def build_library(module_dir: Path, module: str, source: str, out_dir: Path | None = None,
                  flags: Sequence[str] | None = None) -> Path:
    """Compile ``source`` (:func:`emit_abi`) with the module's ``<module>.c`` into a shared library in
    ``out_dir`` (default ``<module_dir>/casadi``), named by the hash of both sources and the flags so that
    a library CasADi has loaded is never overwritten; an existing one is reused."""
    module_dir = Path(module_dir)
    out_dir = Path(out_dir) if out_dir is not None else module_dir / "casadi"
    c_file = module_dir / f"{module}.c"
    if not c_file.is_file():
        raise FileNotFoundError(f"{c_file} is missing: the CasADi library is built from the module's C "
                                f"source; rebuild the module with 'soadyn compile ROBOT --force'")
    flags = list(flags) if flags is not None else ["-O1", "-fno-math-errno", "-ffp-contract=off"]
    cc = compiler_command()
    digest = hashlib.sha256(json.dumps([source, c_file.read_text(encoding="utf-8"), flags, cc]).encode())
    tag = digest.hexdigest()[:16]
    suffix = {"darwin": ".dylib", "win32": ".dll"}.get(sys.platform, ".so")
    target = out_dir / f"lib{module}_casadi_{tag}{suffix}"
    if target.is_file():
        return target
    out_dir.mkdir(parents=True, exist_ok=True)
    src = out_dir / f"{module}_casadi_{tag}.c"
    src.write_text(source, encoding="utf-8")
    tmp = target.with_name(target.name + f".{os.getpid()}.tmp")
    cmd = [*cc, "-shared", "-fPIC", *flags, "-I", str(module_dir), str(c_file), str(src), "-o", str(tmp),
           "-lm"]
    try:
        _check(_run(cmd, out_dir), cmd, f"building the CasADi library of {module}")
        os.replace(tmp, target)
    finally:
        tmp.unlink(missing_ok=True)
    return target


__all__ = ["AbiArg", "AbiFunction", "AbiJacobian", "CompileError", "build_library", "ccs", "emit_abi"]
