"""Regenerate the committed C sources of the example robots: ``python -m soadyn.cli.regenerate``.

For every robot file ``examples/*.yaml`` of the repository (except the ones in :data:`ON_DEMAND`, too big
to commit) this writes ``generated/<robot>/<robot>.c`` and ``<robot>.h`` (sources only, no compiled
extension; the file's own base type).  The output is deterministic, so ``--check`` (used by the tests)
regenerates in memory and exits with 1, listing the files, when the committed sources differ from what
the current generator emits.

The robots of :data:`ON_DEMAND` are generated when needed (``soadyn compile examples/<robot>.yaml``, or
their example script); ``--all`` includes them here too.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


#: example robot files whose sources are not committed (tens of MB of C): generated on demand
ON_DEMAND = frozenset({"seed004_four_arm_37dof.yaml"})


def example_robots(examples: Path, include_on_demand: bool = False) -> list[Path]:
    """The robot files of ``examples`` whose generated sources are committed (all with
    ``include_on_demand``)."""
    return sorted(p for p in examples.glob("*.yaml")
                  if p.is_file() and (include_on_demand or p.name not in ON_DEMAND))


def generate_example(path: Path) -> tuple[str, dict[str, str]]:
    """(module name, {file name: text}) for one robot file."""
    from soadyn.codegen.pipeline import generate, resolve_robot

    robot, name = resolve_robot(path)
    return name, generate(robot, name).files


def stale(examples: Path, out: Path, include_on_demand: bool = False) -> list[str]:
    """Descriptions of the committed files that differ from a fresh generation (empty when current)."""
    problems = []
    for path in example_robots(examples, include_on_demand):
        name, files = generate_example(path)
        for fname, text in files.items():
            target = out / name / fname
            if not target.is_file():
                problems.append(f"{target}: missing")
            elif target.read_text(encoding="utf-8") != text:
                problems.append(f"{target}: differs from the generator's output")
    return problems


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m soadyn.cli.regenerate",
                                 description=__doc__.splitlines()[0])
    ap.add_argument("--examples", type=Path, default=REPO / "examples", help="robot files directory")
    ap.add_argument("--out", type=Path, default=REPO / "generated", help="output directory")
    ap.add_argument("--check", action="store_true", help="only check that the committed sources are current")
    ap.add_argument("--all", action="store_true",
                    help=f"include the robots generated on demand ({', '.join(sorted(ON_DEMAND))})")
    args = ap.parse_args(argv)
    if not args.examples.is_dir():
        print(f"error: no examples directory {args.examples} (run from a source checkout or pass --examples)",
              file=sys.stderr)
        return 2
    if args.check:
        problems = stale(args.examples, args.out, args.all)
        for p in problems:
            print(p)
        if problems:
            print("generated sources are stale: run python -m soadyn.cli.regenerate", file=sys.stderr)
        return 1 if problems else 0
    for path in example_robots(args.examples, args.all):
        name, files = generate_example(path)
        target = args.out / name
        target.mkdir(parents=True, exist_ok=True)
        for fname, text in files.items():
            tmp = target / f".{fname}.tmp"
            tmp.write_text(text, encoding="utf-8", newline="\n")
            tmp.replace(target / fname)
            print(target / fname)
    return 0


def _main_one_line_errors(argv: list[str] | None = None) -> int:
    """:func:`main`, with a bad robot file reported as one line (file, field, fix) instead of a traceback."""
    from soadyn.model.robotfile import RobotFileError

    try:
        return main(argv)
    except RobotFileError as e:
        print(f"error: {e}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(_main_one_line_errors())
