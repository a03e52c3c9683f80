"""The C parameter screen: :func:`soadyn.model.parameters.screen_conditions` (the rule of
``clearly_consistent``) printed as C statements, the same IEEE operations in the same order, for the
single-call entries' screen (``fx_screen`` in ``templates/fastcalls.c.j2``) and the one fused into a SIMD
batch's lanes (:func:`soadyn.codegen.lanes.screen_function`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from soadyn.model.parameters import screen_conditions


def _binary(op: str, swap: bool = False) -> Callable[[_Traced, Any], _Traced]:
    """The method ``a op b`` (``swap``: ``b op a``, the reflected operator) of :class:`_Traced`."""
    def method(self: _Traced, other: Any) -> _Traced:
        return self._op(other, op, swap)
    return method


class _Traced:
    """A value of the C parameter screen: every operation appends ``const T t<k> = a op b;`` to ``lines``
    (``T``: ``double``, or a vector of four rows; the template defines it), so that a formula written over
    NumPy arrays prints as C with the same IEEE operations in the same order."""

    def __init__(self, text: str, lines: list[str]) -> None:
        self.text, self.lines = text, lines

    def _new(self, rhs: str) -> _Traced:
        name = f"t{len(self.lines)}"
        self.lines.append(f"const T {name} = {rhs};")
        return _Traced(name, self.lines)

    def _op(self, other: Any, op: str, swap: bool = False) -> _Traced:
        a, b = self.text, _c_operand(other)
        return self._new(f"{b} {op} {a}" if swap else f"{a} {op} {b}")

    __add__ = _binary("+")
    __radd__ = _binary("+", swap=True)
    __sub__ = _binary("-")
    __rsub__ = _binary("-", swap=True)
    __mul__ = _binary("*")
    __rmul__ = _binary("*", swap=True)
    __truediv__ = _binary("/")
    __rtruediv__ = _binary("/", swap=True)

    def __neg__(self) -> _Traced:
        return self._new(f"-{self.text}")


def _c_operand(x: Any) -> str:
    """A traced value's name, or a constant as a C double literal (``repr``: the exact value)."""
    if isinstance(x, _Traced):
        return x.text
    r = repr(float(x))
    if r in ("inf", "-inf", "nan"):
        raise ValueError(f"parameter screen: constant {r} has no C literal")
    return r


def parameter_screen() -> str:
    """C statements of the parameter screen (:func:`soadyn.model.parameters.screen_conditions`, the rule of
    ``clearly_consistent``) over one row, or a vector of rows, of ``params``: they read ``c0`` .. ``c9``
    (the row's entries, defined by the template), use the type ``T``, and clear ``ok`` where the row
    fails."""
    lines: list[str] = []
    cols = [_Traced(f"c{k}", lines) for k in range(10)]
    conds = screen_conditions(cols)
    lines += [f"ok &= {_c_operand(x)} > {_c_operand(y)};" for x, y in conds]
    return "\n".join(lines)
