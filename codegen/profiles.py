"""Build profiles: the compiler flags, stage length and SIMD width a compiled module is built with.

=========  ======================================================  =========================================
profile    flags (after ``-fno-math-errno -ffp-contract=off``)      use
=========  ======================================================  =========================================
fast       ``-O2 -march=native -fno-tree-slp-vectorize``          default: the fastest code measured within
           + :data:`STRAIGHT_LINE_FLAGS`                           the compile budget, for this machine
portable   ``-O2`` + the architecture's baseline ISA               modules copied to other machines of the
           (x86-64: ``-march=x86-64 -mtune=generic``;              same class (flight computers, clusters)
           aarch64: ``-march=armv8-a``) + :data:`STRAIGHT_LINE_FLAGS`
debug      ``-O0 -g``                                              compiles quickly; for tests and debugging
=========  ======================================================  =========================================

Every profile keeps ``-fno-math-errno`` (``sqrt`` is the bare instruction; IEEE semantics unchanged) and
``-ffp-contract=off`` (no fused multiply-add): each profile rounds every operation exactly as the
float run of the algorithm does, so all profiles give bit-identical results and ``soadyn verify``
holds with the same tolerances for each.  ``-fno-tree-slp-vectorize`` with ``-march=native``: gcc 12's
SLP vectoriser forms ``vfmaddsub``/``vfmsubadd`` (fused) instructions despite ``-ffp-contract=off`` when
FMA is available (15 of them in the 4-DOF test arm's module; its centre of mass then differs from the
un-fused result by 1-2 ulp); without SLP the straight-line code is unchanged otherwise, and the
batched entry points vectorise across states instead (:mod:`soadyn.codegen.units`).

Measured before choosing (gcc 12.2, 2-core AMD EPYC with AVX-512, Panda free base nv = 13, per call,
issue 11): ``-O1`` 328 / 320 / 814 / 913 ns for ID / M / FD / M^-1, ``-O3 -march=native`` 276 / 291 / 548 /
630 ns at the same compile time; gcc's time on long straight-line functions is dominated by the register
allocator and is cut by :mod:`soadyn.codegen.units` (stage functions), not by the ``-O`` level.

:data:`STRAIGHT_LINE_FLAGS` turn off six gcc passes that find nothing left to do in code that soadyn has
already optimised (global CSE done, every store needed, statements in a chosen order): the tree passes
FRE, PRE and DSE (partial redundancy, dead stores; with "alias stmt walking" they were ~25 % of gcc's
time on a forward-dynamics unit, ``-ftime-report``), RTL GCSE and DSE, and the second instruction
scheduling pass (the out-of-order cores these modules run on reorder for themselves).  Measured (gcc 12.2,
same machine, issue 11): gcc CPU for all 52 units of the 37-DOF four-arm robot's default functions
45.8 -> 35.2 s (-23 %); run time per call, best of 3 rounds, Panda free base ID / FD / M / M^-1 162 / 396 /
121 / 494 -> 164 / 400 / 121 / 506 ns, four-arm 751 / 1587 / 814 / 2221 -> 770 / 1604 / 808 / 2221 ns.
On AMD Zen 5 and later and on Intel's Emerald Rapids the ``fast`` profile also defines ``SOADYN_TAKEN_JUMPS``
(:func:`taken_jumps_help`: the derivative stages' taken jumps, :data:`soadyn.codegen.stages.JUMP_EVERY`).
``SOADYN_CFLAGS`` (environment) still replaces the optimisation flags of any profile; the flags in
effect are recorded in the module's stamp and are part of its cache key.
"""

from __future__ import annotations

import functools
import hashlib
import os
import platform
import shlex
import subprocess
import sysconfig
from dataclasses import dataclass

from soadyn.codegen.units import STAGE_OPS

#: flags every profile starts with (they fix the rounding: see the module docstring)
IEEE_FLAGS = ("-fno-math-errno", "-ffp-contract=off")
#: gcc passes that cost compile time and find nothing in soadyn's straight-line code (module docstring);
#: given to GCC only (:func:`compiler_is_gcc`): Clang names its passes differently
STRAIGHT_LINE_FLAGS = ("-fno-tree-fre", "-fno-tree-pre", "-fno-tree-dse", "-fno-gcse", "-fno-dse",
                       "-fno-schedule-insns2")
#: the define that turns on the derivative stages' taken jumps (:data:`soadyn.codegen.stages.JUMP_EVERY`,
#: printed under ``#if defined(SOADYN_TAKEN_JUMPS)``): the ``fast`` profile gives it where
#: :func:`taken_jumps_help` says so, so the generated source stays the same on every machine
TAKEN_JUMPS_FLAG = "-DSOADYN_TAKEN_JUMPS"
#: Intel ``model`` numbers (``cpu family`` 6) given :data:`TAKEN_JUMPS_FLAG`: the ones it was measured on
#: (207: Emerald Rapids Xeon; :func:`taken_jumps_help`)
INTEL_TAKEN_JUMPS_MODELS = frozenset({"207"})
PROFILES = ("fast", "portable", "debug")
DEFAULT_PROFILE = "fast"


@dataclass(frozen=True)
class Profile:
    """One build profile: its name, C flags, target operations per stage function (0: never split) and
    the number of states its batched entry points evaluate at once across SIMD lanes (1: scalar loop)."""

    name: str
    cflags: tuple[str, ...]
    stage_ops: int
    lanes: int
    native: bool = False

    def key(self) -> dict:
        """What the cache key needs: the flags, and for ``-march=native`` the machine they resolve to."""
        out = {"profile": self.name, "cflags": list(self.cflags), "stage_ops": self.stage_ops,
               "lanes": self.lanes}
        if self.native or any("native" in f for f in self.cflags):
            out["machine"] = machine_id()
        return out

    def stamp(self) -> dict:
        return {"profile": self.name, "cflags": list(self.cflags), "stage_ops": self.stage_ops,
                "simd_lanes": self.lanes}


def compiler_command() -> list[str]:
    """The C compiler as an argument list: ``$CC``, else Python's configured ``CC``, else ``cc``."""
    cc = os.environ.get("CC") or sysconfig.get_config_var("CC") or "cc"
    return shlex.split(cc)


@functools.lru_cache(maxsize=8)
def _predefined_macros(cc: tuple[str, ...]) -> str:
    try:
        done = subprocess.run([*cc, "-dM", "-E", "-x", "c", os.devnull], stdout=subprocess.PIPE,
                              stderr=subprocess.DEVNULL, text=True, timeout=60)
    except (OSError, subprocess.SubprocessError):
        return ""
    return done.stdout if done.returncode == 0 else ""


def compiler_is_gcc() -> bool:
    """Whether :func:`compiler_command` is GCC itself (``__GNUC__`` without ``__clang__`` or Intel's
    ``__INTEL_COMPILER``/``__INTEL_LLVM_COMPILER``, which define ``__GNUC__`` too): GCC's own pass flags
    (:data:`STRAIGHT_LINE_FLAGS`) are only given to it."""
    macros = _predefined_macros(tuple(compiler_command()))
    names = {w[1] for w in (line.split() for line in macros.splitlines()) if len(w) > 1 and w[0] == "#define"}
    return "__GNUC__" in names and not names & {"__clang__", "__INTEL_COMPILER", "__INTEL_LLVM_COMPILER"}


def _baseline_isa() -> tuple[str, ...]:
    m = platform.machine().lower()
    if m in ("x86_64", "amd64"):
        return ("-march=x86-64", "-mtune=generic")
    if m in ("aarch64", "arm64"):
        return ("-march=armv8-a",)
    return ()


def machine_id() -> str:
    """The CPU this process runs on (model name and ISA flags), hashed: ``-march=native`` code is only
    reused on the same kind of CPU."""
    text = platform.machine()
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as fh:
            for line in fh:
                if line.startswith(("model name", "flags", "Features", "CPU part")):
                    text += line
                    if line.startswith(("flags", "Features")):
                        break
    except OSError:
        text += platform.processor()
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def taken_jumps_help(cpuinfo: str | None = None) -> bool:
    """Whether this CPU runs the long straight-line stages faster with a taken jump every few statements:
    AMD Zen 5 and later (``cpu family`` >= 26: two decode clusters, the second one used from a taken
    branch on; TALOS's FD derivatives 0.93-0.97 of the time, benchmarks/README.md, thirteenth session) and
    Intel's Emerald Rapids Xeon (family 6, model 207, Raptor Cove cores: code fetched from L2 at ~13 bytes
    a cycle; Alex's ID / FD derivatives 0.70-0.92 / 0.84-1.01 of the time per round, benchmarks/README.md,
    fifteenth session).  Not measured elsewhere, so not given elsewhere (a taken branch costs a fetch cycle
    on cores with one decoder; ``SOADYN_CFLAGS`` can add :data:`TAKEN_JUMPS_FLAG` by hand).  ``cpuinfo``:
    the text of ``/proc/cpuinfo`` (read when None; False where there is none)."""
    if cpuinfo is None:
        try:
            with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as fh:
                cpuinfo = fh.read(65536)
        except OSError:
            return False
    fields: dict[str, str] = {}
    for line in cpuinfo.splitlines():
        key, sep, value = line.partition(":")
        if not sep:
            if fields:
                break  # the first processor's block is enough
            continue
        fields.setdefault(key.strip(), value.strip())
    family, model, vendor = fields.get("cpu family", ""), fields.get("model", ""), fields.get("vendor_id")
    if vendor == "AuthenticAMD":
        return family.isdigit() and int(family) >= 26
    return vendor == "GenuineIntel" and family == "6" and model in INTEL_TAKEN_JUMPS_MODELS


def get_profile(name: str | Profile | None = None) -> Profile:
    """The profile called ``name`` (default :data:`DEFAULT_PROFILE`, or ``SOADYN_PROFILE``); raises
    ``ValueError`` naming the valid ones.  ``SOADYN_CFLAGS`` replaces the optimisation flags.  A
    :class:`Profile` is returned as it is (custom profiles for measurements)."""
    if isinstance(name, Profile):
        return name
    name = name or os.environ.get("SOADYN_PROFILE") or DEFAULT_PROFILE
    passes = STRAIGHT_LINE_FLAGS if compiler_is_gcc() else ()
    if name == "fast":
        jumps = (TAKEN_JUMPS_FLAG,) if taken_jumps_help() else ()
        prof = Profile("fast", ("-O2", "-march=native", "-fno-tree-slp-vectorize", *passes, *jumps,
                                *IEEE_FLAGS), stage_ops=STAGE_OPS, lanes=4, native=True)
    elif name == "portable":
        prof = Profile("portable", ("-O2", *_baseline_isa(), *passes, *IEEE_FLAGS),
                       stage_ops=STAGE_OPS, lanes=2)
    elif name == "debug":
        prof = Profile("debug", ("-O0", "-g", *IEEE_FLAGS), stage_ops=0, lanes=1)
    else:
        raise ValueError(f"unknown build profile {name!r}; valid profiles: {', '.join(PROFILES)}")
    env = os.environ.get("SOADYN_CFLAGS")
    if env is not None:  # the optimisation flags; every profile keeps the IEEE flags (bit-identical results)
        flags = tuple(shlex.split(env))
        flags += tuple(f for f in IEEE_FLAGS if f not in flags)
        prof = Profile(prof.name, flags, prof.stage_ops, prof.lanes, native=any("native" in f for f in flags))
    return prof
