"""Compile generated C into a Python extension with cffi (API mode).

The flags come from the build profile (:mod:`soadyn.codegen.profiles`) and the translation units from
:func:`soadyn.codegen.units.translation_units` (stage functions, one function per unit, objects reused
through :mod:`soadyn.codegen.objcache`); the notes below on ``-O1`` describe the defaults used when no
profile flags are passed.

``cffi.FFI.cdef`` gets the prototypes of the generated header, ``set_source`` a wrapper that includes the
header; cffi writes the wrapper C (``emit_c_code``) and we run the C compiler ourselves, so that the flags
are exactly ours and a failure can show the compiler's own messages:

    $CC -c -fPIC -O1 -fno-math-errno -ffp-contract=off -I<python include> -I<module dir> <unit>.c -o <unit>.o
    $CC -shared <units>.o -o <ext>

The generated functions are compiled as several translation units in parallel (``SOADYN_JOBS``
processes, default: the number of CPUs) by a :class:`UnitCompiler`, which starts on each function's
units as soon as the pipeline has emitted it, while the next functions are derived; each unit holds
stages of one function (:func:`soadyn.codegen.units.translation_units`), the statements of ``<robot>.c``.

* ``-O1``: the generated functions are long straight-line blocks.  Most of gcc's time on them goes to
  register allocation (LRA hard-register assignment ~35 %) and the combiner, which grow faster than
  linearly with the block length.  Measured on the Panda (free base, 28 functions, gcc 12, x86-64):
  ``-O1`` compiles in 18 % less CPU time than ``-O2`` (17.0 s vs 20.7 s) and the code is as fast or
  faster (forward_dynamics +-0 %, mass_matrix -9 %, inverse_dynamics -7 % per call); ``-O2``'s extra
  passes (SLP vectorisation, scheduling, PRE) do not pay off on this code, ``-O3`` even less.
* ``-fno-math-errno``: lets ``sqrt`` compile to the bare instruction (no errno branch); results are
  unchanged (IEEE semantics are kept: no ``-ffast-math``, no reassociation).
* ``-ffp-contract=off``: no fused multiply-adds, so the compiled code rounds exactly like the float run of
  the algorithm it was printed from (deterministic across machines).

``CC`` (environment) overrides the compiler, ``SOADYN_CFLAGS`` the optimisation flags.  On platforms
other than Linux/macOS cffi's own (setuptools) compiler driver is used.
"""

from __future__ import annotations

import io
import os
import shlex
import subprocess
import sys
import sysconfig
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor, as_completed
from pathlib import Path

import cffi
from cffi.recompiler import make_c_source

import soadyn.codegen.objcache as objcache
from soadyn.codegen.profiles import compiler_command

#: number of C compilations run in this process (tests use it to prove that a cached compile builds nothing)
STATS = {"compilations": 0}

DEFAULT_CFLAGS = ("-O1", "-fno-math-errno", "-ffp-contract=off")


class CompileError(RuntimeError):
    """The C compiler is missing or failed; the message names it and shows the end of its output."""


def cflags() -> list[str]:
    env = os.environ.get("SOADYN_CFLAGS")
    return shlex.split(env) if env is not None else list(DEFAULT_CFLAGS)


def extension_suffix() -> str:
    return sysconfig.get_config_var("EXT_SUFFIX") or (".pyd" if os.name == "nt" else ".so")


def _tail(text: str, lines: int = 25) -> str:
    return "\n".join(text.strip().splitlines()[-lines:])


def jobs() -> int:
    """Parallel compiler processes: ``SOADYN_JOBS`` or the number of CPUs."""
    env = os.environ.get("SOADYN_JOBS")
    if env:
        try:
            return max(1, int(env))
        except ValueError:
            raise CompileError(f"SOADYN_JOBS must be a positive integer, got {env!r}") from None
    return max(1, os.cpu_count() or 1)


def build_extension(module_dir: Path, ext_name: str, header_file: str, cdef: str,
                    source_file: str | None = None,
                    progress: Callable[[str], None] | None = None, flags: Sequence[str] | None = None,
                    object_cache: Path | None = None, fast_source: str | None = None,
                    started: UnitCompiler | None = None) -> Path:
    """Build ``<module_dir>/<ext_name><EXT_SUFFIX>`` from the generated functions.

    ``started``: the :class:`UnitCompiler` compiling the functions' translation units
    (:func:`soadyn.codegen.units.translation_units`, added while the rest of the module was generated; its
    objects reused from ``object_cache``, :mod:`soadyn.codegen.objcache`); the build adds cffi's wrapper
    and ``fast_source`` to it, waits for every unit, links them and closes it (removing the sources and
    objects).  ``fast_source``: the single-call entry points
    (:func:`soadyn.codegen.fastcalls.emit_fastcalls`), one more unit compiled against numpy's headers
    (POSIX driver only; the module's Python code works without them).  ``flags``: the profile's flags
    (default :func:`cflags`).  ``source_file`` (the single generated source) is used instead by the
    fallback compiler driver.  ``progress(name)`` is called after
    each compiled unit and after linking.  Raises :class:`CompileError` on failure.
    """
    STATS["compilations"] += 1
    module_dir = Path(module_dir)
    ffi = cffi.FFI()
    ffi.cdef(cdef)
    flags = list(flags) if flags is not None else cflags()
    ffi.set_source(ext_name, f'#include "{header_file}"\n', include_dirs=[str(module_dir)],
                   sources=[str(module_dir / source_file)] if source_file else [], extra_compile_args=flags)
    wrapper = module_dir / f"{ext_name}.c"
    # cffi's emit_c_code prints "generating ..." on sys.stdout; make_c_source with verbose=False does
    # the same work silently, without redirecting the (process-wide) sys.stdout of other threads
    text = io.StringIO()
    make_c_source(ffi, ext_name, f'#include "{header_file}"\n', text, verbose=False)
    wrapper.write_text(text.getvalue(), encoding="utf-8")
    target = module_dir / f"{ext_name}{extension_suffix()}"
    if sys.platform.startswith("linux") or sys.platform == "darwin":
        comp = started if started is not None else UnitCompiler(module_dir, ext_name, flags, object_cache)
        try:
            comp.progress = progress
            comp.add(wrapper, lowered_flags(flags), None)
            if fast_source is not None:
                import numpy

                comp.add_unit("fast", fast_source, f"numpy {numpy.__version__}",
                              [*flags, "-I", numpy.get_include()])
            try:
                comp.link(target)
            except CompileError:
                if object_cache is None or not comp.deps:
                    raise
                comp.link(target, rebuild=True)   # distrust the cache
            objcache.prune(object_cache)
        finally:
            comp.close()
    else:  # pragma: no cover - exercised on other platforms only
        _compile_with_cffi(ffi, module_dir, target)
        wrapper.unlink(missing_ok=True)
    return target


def lowered_flags(flags: Sequence[str]) -> list[str]:
    """``flags`` with ``-O2``/``-O3`` lowered to ``-O1``: for cffi's wrapper unit and the SIMD batches'
    own units (:func:`soadyn.codegen.units.lowered_unit`).  The wrapper converts Python arguments once per
    call of a ``lib`` function (single calls from Python go through the ``_fast`` unit, batches call it
    once per batch); at ``-O2`` it was the largest unit of the Panda's build (1.33 s of gcc CPU, 0.92 s at
    ``-O1``).  A SIMD batch's vector stages at ``-O1``: 20-25 % less gcc CPU (the xArm7's Schur FD lanes),
    the batch 0-5 % slower per state."""
    return ["-O1" if f in ("-O2", "-O3") else f for f in flags]


def _run(cmd: list[str], cwd: Path) -> subprocess.CompletedProcess:
    try:
        return subprocess.run(cmd, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    except FileNotFoundError:
        raise CompileError(f"C compiler {cmd[0]!r} not found: install a C compiler (gcc or clang) or point "
                           f"the CC environment variable at one") from None
    except OSError as e:
        raise CompileError(f"could not run the C compiler {cmd[0]!r}: {e}") from None


def _check(proc: subprocess.CompletedProcess, cmd: list[str], what: str) -> None:
    if proc.returncode != 0:
        raise CompileError(f"C compiler {cmd[0]!r} failed (exit code {proc.returncode}) {what}:\n"
                           f"  {shlex.join(cmd)}\n{_tail(proc.stdout or '')}")


class UnitCompiler:
    """Translation units of one module compiled in parallel (:func:`jobs` compiler processes) as they are
    added, so that the units of the first functions compile while the later ones are being derived; objects
    reused from ``object_cache``.  :meth:`link` waits for all of them and links the extension;
    :meth:`close` stops the compilations still queued and removes the sources and objects."""

    def __init__(self, module_dir: Path, ext_name: str, flags: Sequence[str] | None = None,
                 object_cache: Path | None = None) -> None:
        self.module_dir = Path(module_dir)
        self.ext_name = ext_name
        self.flags = list(flags) if flags is not None else cflags()
        self.cache = object_cache
        self.progress: Callable[[str], None] | None = None
        self.sources: list[Path] = []
        self.unit_flags: dict[Path, list[str]] = {}
        self.deps: dict[Path, str] = {}
        self.cc = compiler_command()
        self.include = sysconfig.get_paths()["include"]
        self._pool = ThreadPoolExecutor(max_workers=jobs())
        self._futures: dict = {}

    def add_unit(self, stem: str, text: str, dependency: str = "",
                 flags: Sequence[str] | None = None) -> Path:
        """Write ``<ext_name>_<stem>.c`` and start compiling it (``dependency``: what else than its text
        decides its object, for the object cache)."""
        p = self.module_dir / f"{self.ext_name}_{stem}.c"
        p.write_text(text, encoding="utf-8")
        self.add(p, list(flags) if flags is not None else self.flags, dependency)
        return p

    def add(self, src: Path, flags: list[str], dependency: str | None) -> None:
        """Start compiling the written source ``src`` (``dependency`` None: never from the object cache)."""
        self.sources.append(src)
        self.unit_flags[src] = flags
        if dependency is not None:
            self.deps[src] = dependency
        self._futures[self._pool.submit(self._compile, src, self.cache)] = src

    def _compile(self, src: Path, cache: Path | None) -> None:
        obj = src.with_suffix(".o")
        key = None
        if src in self.deps and cache is not None:
            key = objcache.object_key(src.read_text(encoding="utf-8"), self.deps[src], self.cc,
                                      self.unit_flags[src], self.include)
            if objcache.fetch(cache, key, obj):
                return
        cmd = [*self.cc, "-c", "-fPIC", *self.unit_flags[src], "-I", self.include, "-I", str(self.module_dir),
               str(src), "-o", str(obj)]
        _check(_run(cmd, self.module_dir), cmd, f"compiling {src.name}")
        if key is not None:
            objcache.store(cache, key, obj)

    def link(self, target: Path, rebuild: bool = False) -> None:
        """Wait for every unit (``rebuild``: compile them all again, without the object cache), then link."""
        if rebuild:
            self._futures = {self._pool.submit(self._compile, src, None): src for src in self.sources}
        futures, self._futures = self._futures, {}
        try:
            for fut in as_completed(futures):
                fut.result()
                if self.progress is not None and not rebuild:
                    self.progress(futures[fut].name)
        except BaseException:
            for f in futures:
                f.cancel()
            raise
        link = ["-bundle", "-undefined", "dynamic_lookup"] if sys.platform == "darwin" else ["-shared"]
        cmd = [*self.cc, *link, *[str(s.with_suffix(".o")) for s in self.sources], "-o", str(target)]
        _check(_run(cmd, self.module_dir), cmd, f"linking {target.name}")
        if self.progress is not None and not rebuild:
            self.progress(target.name)

    def close(self) -> None:
        """Cancel the compilations not started, wait for the running ones, remove sources and objects."""
        for f in self._futures:
            f.cancel()
        self._pool.shutdown(wait=True)
        for p in self.sources:
            p.unlink(missing_ok=True)
            p.with_suffix(".o").unlink(missing_ok=True)


def _compile_with_cffi(ffi: cffi.FFI, module_dir: Path, target: Path) -> None:  # pragma: no cover
    try:
        built = Path(ffi.compile(tmpdir=str(module_dir), verbose=False))
    except Exception as e:
        raise CompileError(f"C compilation through cffi/setuptools failed: {e}") from None
    if built != target:
        built.replace(target)
