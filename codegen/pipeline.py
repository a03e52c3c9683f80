"""Robot -> compiled module: derive, optimise, emit, build, with a fingerprint cache and atomic writes.

Layout of a compiled module ``<out_dir>/<module>/`` (``<module>`` = the robot name as an identifier, with
``_<base>`` appended when ``base`` overrides the robot file's base)::

    <module>.c, <module>.h          generated C99 (the part to reuse in other projects)
    _soadyn_<key>.<EXT_SUFFIX>      cffi extension (compiled <module>.c + wrapper)
    __init__.py                     Python functions (numpy in/out, optional batch dimension)
    soadyn_stamp.json               cache key, timings, operation counts, structural nonzeros of the outputs

The cache key hashes the robot fingerprint (every parameter that affects the dynamics, the base type
included), the robot file's sha256 (a comment-only change rebuilds too), the generator version, the source
of the generator itself (the files of :data:`GENERATOR_MANIFEST`: the generic core, the algorithms, the
generator modules of soadyn.codegen and the templates -- not the robot-file parsers, the reference path,
the runtime or the command line), the C compiler and its flags, and the selected functions.  An
unchanged robot is loaded from the existing module without deriving or compiling anything, after
checking the sha256 of every file of the module against the stamp (:mod:`soadyn.codegen.cache`: a
damaged or edited file is a miss and the module is rebuilt).  A build is a transaction under a
per-module lock: generate and compile in a private temporary directory next to the target, rename it
into place and load it, all while holding the lock, so the module returned is the one built; an error or
Ctrl-C leaves the previous module (or nothing) in place, and temporary directories of builds that died
are removed by the next build.
"""

from __future__ import annotations

import hashlib
import json
import os
import secrets
import shutil
import sys
import time
import types
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from importlib import resources
from pathlib import Path
from typing import Any

import soadyn.codegen.build as _build
import soadyn.codegen.cache as _cache
import soadyn.codegen.objcache as objcache
from soadyn.codegen.derive import Program, algorithm, derive, nonzero_patterns, rename_reserved
from soadyn.codegen.emit import emit_functions, emit_module, generator_version
from soadyn.codegen.fastcalls import emit_fastcalls
from soadyn.codegen.functions import FunctionSpec, api_names, function_table, select_functions
from soadyn.codegen.load import load
from soadyn.codegen.optimise import optimise
from soadyn.codegen.profiles import Profile, get_profile
from soadyn.codegen.python_api import emit_wrapper
from soadyn.codegen.units import lowered_unit, translation_units
from soadyn.model.names import module_name
from soadyn.model.robot import Robot

STAMP = _cache.STAMP
DEFAULT_OUT_DIR = "generated"


@dataclass
class Generated:
    """Everything emitted for one robot (before compilation)."""

    robot: Robot
    module_name: str
    specs: list[FunctionSpec]
    files: dict[str, str]
    cdef: str
    functions: list
    timings: dict[str, float] = field(default_factory=dict)
    #: C function name (without the module prefix) -> :func:`~soadyn.codegen.derive.nonzero_patterns`
    patterns: dict[str, dict[str, str]] = field(default_factory=dict)

    @property
    def source_name(self) -> str:
        return f"{self.module_name}.c"

    @property
    def header_name(self) -> str:
        return f"{self.module_name}.h"

    def op_counts(self) -> dict[str, dict[str, int]]:
        return {f.cname: dict(f.ops) for f in self.functions}


def module_name_for(robot: Robot, file_base: str | None = None) -> str:
    """Module (and C prefix, directory and file stem) name: :func:`soadyn.model.names.module_name` of the
    robot name (an identifier of bounded length that shadows no standard-library module, e.g. ``json`` ->
    ``json_robot``), with ``_<base>`` added when ``base`` overrides the robot file's."""
    name = module_name(robot.name)
    if file_base is not None and robot.base != file_base:
        name = f"{name}_{robot.base}"
    return name


def _progress(total: int, enabled: bool, desc: str, unit: str = "fn"):
    from tqdm.auto import tqdm

    return tqdm(total=total, disable=not enabled, desc=desc, unit=unit, leave=False, file=sys.stderr,
                dynamic_ncols=True)


def generate(robot: Robot, module_name: str | None = None, progress: bool = False,
             specs: list[FunctionSpec] | None = None,
             functions: list[str] | tuple[str, ...] | str | None = None,
             profile: Profile | None = None,
             on_function: Callable[[list, str], None] | None = None) -> Generated:
    """Derive and optimise the functions of :func:`function_table` and emit C source and header.

    ``functions``: public API names to generate (default: all; see
    :func:`~soadyn.codegen.functions.select_functions`); ``specs``: an explicit table instead.
    ``profile``: stage length and SIMD lanes of the emitted C (default: plain functions, as committed
    under ``generated/``; see :mod:`soadyn.codegen.profiles`).
    ``on_function(funcs, header_text)``: called as soon as each function is derived and optimised, with
    its emitted C functions finished for ``profile`` (its variants included) and the header of a module
    holding just them, so that a build compiles them while the next functions are derived (the
    returned :class:`Generated` then holds the functions unfinished: the module's files are the same).
    """
    module_name = module_name or module_name_for(robot)
    if specs is None:
        table = function_table(robot, derivatives=functions is not None)   # derivatives only on request
        specs = select_functions(table, functions, robot.name)
    for s in specs:
        algorithm(s.algorithm)             # a missing algorithm raises DerivationError before any work
    specs = _derivation_order(specs)
    programs: list[Program] = []
    by_name: dict[str, Program] = {}
    emitted: tuple[list, list[bool]] = ([], [])
    t_derive = t_opt = t_emit = 0.0
    with _progress(len(specs), progress, f"deriving {robot.name}") as bar:
        for spec in specs:
            bar.set_postfix_str(spec.name, refresh=False)
            t0 = time.perf_counter()
            if spec.zero_fext_call:        # runs the program of the *_fext function (emit_zero_fext_call)
                t1 = t0
                programs.append(by_name[spec.zero_fext_call])
            else:
                raw = rename_reserved(derive(robot, spec), spec)
                t1 = time.perf_counter()
                programs.append(optimise(raw))
            by_name[spec.name] = programs[-1]
            t2 = time.perf_counter()
            t_derive += t1 - t0
            t_opt += t2 - t1
            if on_function is not None:        # emitted once: finished copies for the units, then the files
                funcs, simd = emit_functions(robot, module_name, [spec], programs[-1:])
                emitted[0].extend(funcs)
                emitted[1].extend(simd)
                one, _, group = emit_module(robot, module_name, [spec], programs[-1:],
                                            *((profile.stage_ops, profile.lanes) if profile else ()),
                                            emitted=(funcs, simd))
                on_function(group, one[f"{module_name}.h"])
                t_emit += time.perf_counter() - t2
            bar.update(1)
    t0 = time.perf_counter()
    finish = (profile.stage_ops, profile.lanes) if profile and on_function is None else ()
    files, cdef, funcs = emit_module(robot, module_name, specs, programs, *finish,
                                     emitted=emitted if on_function is not None else None)
    timings = {"derive": t_derive, "optimise": t_opt, "emit": t_emit + time.perf_counter() - t0}
    patterns = {spec.name: nonzero_patterns(p) for spec, p in zip(specs, programs)}
    return Generated(robot, module_name, specs, files, cdef, funcs, timings, patterns)


def _derivation_order(specs: list[FunctionSpec]) -> list[FunctionSpec]:
    """``specs`` with each function that calls its ``*_fext`` variant with zero wrenches after that
    variant; one whose variant is not among ``specs`` gets a program of its own."""
    names = {s.name for s in specs}
    own = [s if not s.zero_fext_call or s.zero_fext_call in names else replace(s, zero_fext_call="")
           for s in specs]
    callers = {s.zero_fext_call: s for s in own if s.zero_fext_call}
    out: list[FunctionSpec] = []
    for s in own:
        if not s.zero_fext_call:
            out.append(s)
            if s.name in callers:
                out.append(callers[s.name])
    return out


# --------------------------------------------------------------------------------------------------
# cache key
# --------------------------------------------------------------------------------------------------
#: The generator manifest: every file that decides the generated C (and the generated ``__init__.py``), as
#: (package, file).  Its contents are hashed into the cache key; nothing else of soadyn is (robot files,
#: URDF import, the reference path, the runtime and the command line cannot change the output).
#: ``tests/test_codegen.py::test_generator_loads_only_manifest_files`` fails when generating a module
#: loads a soadyn module missing here.
GENERATOR_MANIFEST: tuple[tuple[str, str], ...] = (
    ("soadyn", "_version.py"),                       # printed into the generated files
    ("soadyn.model", "robot.py"),                    # the Robot methods the algorithms call
    ("soadyn.model", "rotations.py"),                # SO(3) helpers of the spatial algebra
    ("soadyn.model", "parameters.py"),               # the 10-parameter convention (params, regressors)
    ("soadyn.model", "exact.py"),                    # machine-independent model constants
    ("soadyn.model", "names.py"),                    # escaping of names into C, comments, the wrapper
    ("soadyn.symbolic", "__init__.py"),
    ("soadyn.symbolic", "parameters.py"),            # the inertia accessor of the algorithms
    ("soadyn.symbolic", "scalar.py"),
    ("soadyn.symbolic", "spatial.py"),
    ("soadyn.symbolic", "tangent.py"),               # forward-mode tangents of the derivative functions
    *(("soadyn.symbolic.algorithms", f"{m}.py") for m in (
        "__init__", "articulated_body", "closed_loop", "decoupled", "derivatives", "dual", "forward_dynamics",
        "free_floating", "innovations", "jacobians", "kinematics", "linalg", "momentum", "newton_euler",
        "operational_space", "regressors", "rnea_derivatives", "schur", "frames",
        "drive", "coupling")),                       # issue 25: drive train, mimic couplings
    *(("soadyn.codegen", f"{m}.py") for m in (
        "__init__", "functions", "derive", "optimise", "emit", "sections", "build", "cache", "pipeline",
        # load: imported by the package for its public load()
        "load", "units", "profiles", "objcache", "schedule", "trig",
        # the typed program, its printers and transformations (issue 22)
        "cprogram", "printer", "products", "stages", "lanes", "python_api", "fastcalls", "screen")),
    ("soadyn.templates", "__init__.py"),
    ("soadyn.templates", "module.c.j2"),
    ("soadyn.templates", "module.h.j2"),
    ("soadyn.templates", "__init__.py.j2"),
    ("soadyn.templates", "fastcalls.c.j2"),
)


def generator_files() -> list[tuple[str, Path]]:
    """(``package/file``, path) of the :data:`GENERATOR_MANIFEST`, sorted; a missing file raises."""
    out = []
    for pkg, name in GENERATOR_MANIFEST:
        path = Path(str(resources.files(pkg))) / name
        if not path.is_file():
            raise FileNotFoundError(f"generator manifest: {pkg}/{name} does not exist ({path}); update "
                                    "soadyn.codegen.pipeline.GENERATOR_MANIFEST")
        out.append((f"{pkg}/{name}", path))
    return sorted(out)


def manifest_modules() -> set[str]:
    """Dotted module names of the Python files of the manifest (``pkg`` for ``pkg/__init__.py``)."""
    mods = set()
    for pkg, name in GENERATOR_MANIFEST:
        if name.endswith(".py"):
            mods.add(pkg if name == "__init__.py" else f"{pkg}.{name[:-3]}")
    return mods


def _generator_source_hash() -> str:
    """Hash of the code that determines a module (:func:`generator_files`)."""
    h = hashlib.sha256()
    for name, p in generator_files():
        h.update(name.encode())
        h.update(p.read_bytes())
    return h.hexdigest()


def cache_key(robot: Robot, module_name: str, functions: list[str] | tuple[str, ...] | None = None,
              profile: Profile | None = None) -> str:
    """Key of a compiled module: robot fingerprint and robot-file sha256 (a comment-only change of the file
    rebuilds too, so the module's recorded sha256 always follows the file's bytes), module name, generator
    version and source, compiler, build profile and its flags (with the machine for ``-march=native``) and
    the selected functions (``None`` = all)."""
    profile = profile or get_profile()
    h = hashlib.sha256()
    h.update(json.dumps({
        "fingerprint": robot.fingerprint(), "module": module_name, "version": generator_version(),
        "robot_sha256": robot.source_hash,
        "generator": _generator_source_hash(), "cc": _build.compiler_command(), "profile": profile.key(),
        "ext_suffix": _build.extension_suffix(),
        "functions": None if functions is None else sorted(set(functions)),
    }, sort_keys=True).encode())
    return h.hexdigest()


def read_stamp(module_dir: Path) -> dict | None:
    return _cache.read_stamp(module_dir)


def is_current(module_dir: Path, key: str) -> bool:
    """The module in ``module_dir`` has cache key ``key`` and every file matches its recorded sha256."""
    return _cache.verify(Path(module_dir), key)


# --------------------------------------------------------------------------------------------------
# compile
# --------------------------------------------------------------------------------------------------
def resolve_robot(robot_or_path: Robot | str | os.PathLike, base: str | None = None,
                  **load_kw: Any) -> tuple[Robot, str]:
    """(robot with the requested base, module name)."""
    if isinstance(robot_or_path, Robot):
        robot = robot_or_path
        file_base = robot.base
        if base is not None and base != robot.base:
            robot = robot.with_base(base)
    else:
        from soadyn.symbolic.checks import load_robot

        robot = load_robot(robot_or_path, None, **load_kw)
        file_base = robot.base
        if base is not None and base != robot.base:
            robot = load_robot(robot_or_path, base, **load_kw)
    return robot, module_name_for(robot, file_base)


def write_sources(gen: Generated, directory: Path) -> list[Path]:
    """Write the C source and header (only) into ``directory``."""
    directory.mkdir(parents=True, exist_ok=True)
    out = []
    for name, text in gen.files.items():
        p = directory / name
        p.write_text(text, encoding="utf-8", newline="\n")
        out.append(p)
    return out


def _normalise_functions(robot: Robot,
                         functions: list[str] | tuple[str, ...] | str | None) -> list[str] | None:
    """The requested API names, validated against the robot's table (``None`` = all)."""
    if functions is None:
        return None
    return api_names(select_functions(function_table(robot, derivatives=True), functions, robot.name))


def compile_robot(robot_or_path: Robot | str | os.PathLike, out_dir: str | os.PathLike | None = None,
                  base: str | None = None, functions: list[str] | tuple[str, ...] | str | None = None, *,
                  force: bool = False, progress: bool | None = None, profile: str | Profile | None = None,
                  **load_kw: Any) -> types.ModuleType:
    """Compile a robot (a :class:`Robot` or a robot file path) into ``out_dir/<module>/`` and import it.

    ``out_dir`` defaults to ``./generated``; ``base`` ('free' | 'fixed') overrides the robot's base.
    ``functions``: public API names to build (e.g. ``["forward_dynamics", "mass_matrix"]`` or
    ``"forward_dynamics,mass_matrix"``; default: all); an unknown name raises ``ValueError`` listing the
    valid ones.  The selection is part of the cache key.
    ``profile``: 'fast' (default: this machine's fastest code), 'portable' or 'debug' (compiles quickly);
    see :mod:`soadyn.codegen.profiles`.  It is recorded in the stamp and part of the cache key.
    Cached: when the module exists with the same cache key it is imported without any work
    (``force=True`` rebuilds).  ``progress`` (default: when stderr is a terminal) shows tqdm bars.
    Raises :class:`~soadyn.codegen.build.CompileError` when the C compiler is missing or fails.
    """
    prof = get_profile(profile)
    robot, module_name = resolve_robot(robot_or_path, base, **load_kw)
    selected = _normalise_functions(robot, functions)
    out = Path(out_dir if out_dir is not None else DEFAULT_OUT_DIR).resolve()
    target = out / module_name
    key = cache_key(robot, module_name, selected, prof)
    if progress is None:
        progress = sys.stderr.isatty()
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise _build.CompileError(f"cannot create the output directory {out}: {e.strerror}") from None
    try:
        lock = _cache.module_lock(out, module_name)
        lock.__enter__()
    except OSError as e:
        # no lock file in a read-only output directory: a verified module can still be served
        if not force and is_current(target, key):
            return _load_built(target, key)
        raise _build.CompileError(f"cannot write to the output directory {out} ({e.strerror}); choose a "
                                  "writable one with -o / out_dir") from None
    try:
        _cache.clean_stale(out, module_name)
        if not force and is_current(target, key):
            return _load_built(target, key)
        _cache.check_owner(target, robot.name, {f"{module_name}.c", f"{module_name}.h", "__init__.py",
                                                STAMP})
        _build_into(robot, module_name, selected, key, out, target, progress, prof)
        return _load_built(target, key)
    finally:
        lock.__exit__(None, None, None)


def _load_built(target: Path, key: str) -> types.ModuleType:
    """Load ``target`` (built or verified under the module lock) and check that it is that build."""
    module = load(target, verified=True)   # is_current() or the build just hashed every file
    if getattr(module, "cache_key", None) != key:  # pragma: no cover - the lock makes this impossible
        raise _build.CompileError(f"{target} changed while it was loaded; compile again")
    return module


def _build_into(robot: Robot, module_name: str, selected: list[str] | None, key: str, out: Path,
                target: Path, progress: bool, prof: Profile) -> None:
    """Generate and compile into a private temporary directory, then swap it into ``target``."""
    tmp = out / f".{module_name}.tmp-{os.getpid()}-{secrets.token_hex(4)}"
    try:
        os.mkdir(tmp, 0o777)  # the process umask applies, as to any file the user creates
    except OSError as e:
        raise _build.CompileError(f"cannot write to the output directory {out} ({e.strerror}); choose a "
                                  "writable one with -o / out_dir") from None
    ext_name = f"_soadyn_{key[:16]}"
    units = None
    try:
        # each function's units compile (in other processes) while the next functions are derived
        units = _build.UnitCompiler(tmp, ext_name, prof.cflags, objcache.default_dir())

        def start(funcs: list, header_text: str) -> None:
            for stem, text in translation_units(funcs, header_text):
                # a SIMD batch's own units and the product-loop functions' at -O1 (lowered_unit)
                lowered = _build.lowered_flags(prof.cflags) if lowered_unit(stem) else None
                units.add_unit(stem, text, flags=lowered)

        gen = generate(robot, module_name, progress=progress, functions=selected, profile=prof,
                       on_function=start)
        write_sources(gen, tmp)
        t0 = time.perf_counter()
        kb = len(gen.files[gen.source_name]) // 1024
        with _progress(len(units.sources) + 3, progress, f"compiling {gen.source_name} ({kb} kB)",
                       "unit") as bar:
            fast = emit_fastcalls(robot, module_name, ext_name, gen.specs, gen.header_name)
            ext = _build.build_extension(tmp, ext_name, gen.header_name, gen.cdef, gen.source_name,
                                         progress=lambda name: bar.update(1), flags=prof.cflags,
                                         object_cache=objcache.default_dir(), fast_source=fast,
                                         started=units)
        gen.timings["compile"] = time.perf_counter() - t0   # after the last function was generated
        (tmp / "__init__.py").write_text(emit_wrapper(robot, module_name, ext_name, gen.specs, gen.functions,
                                                      key),
                                         encoding="utf-8", newline="\n")
        stamp = {"key": key, "robot": robot.name, "module": module_name, "base": robot.base,
                 "fingerprint": robot.fingerprint(), "robot_sha256": robot.source_hash,
                 "version": generator_version(), "extension": ext.name, **prof.stamp(),
                 "functions": selected, "files": _cache.file_digests(tmp),
                 "timings": {k: round(v, 3) for k, v in gen.timings.items()}, "ops": gen.op_counts(),
                 "nonzeros": gen.patterns}
        (tmp / STAMP).write_text(json.dumps(stamp, indent=1, sort_keys=True) + "\n", encoding="utf-8")
        _swap_into_place(tmp, target)
    except BaseException:
        if units is not None:
            units.close()
        shutil.rmtree(tmp, ignore_errors=True)
        raise


def _swap_into_place(tmp: Path, target: Path) -> None:
    """Rename ``tmp`` to ``target``, replacing an existing module (old one removed after the rename)."""
    old = None
    if target.exists() or target.is_symlink():
        old = target.parent / f".{target.name}.old-{os.getpid()}-{secrets.token_hex(4)}"
        target.rename(old)
    try:
        tmp.rename(target)
    except BaseException:
        if old is not None and not target.exists():
            old.rename(target)
        raise
    if old is not None:
        shutil.rmtree(old, ignore_errors=True)
