"""The typed program of a generated function: an ordered list of statements, not C text.

After derivation and optimisation (:mod:`soadyn.codegen.derive`, :mod:`soadyn.codegen.optimise`) the
emitter (:mod:`soadyn.codegen.emit`) turns a function into a list of :class:`Stmt`; every back-end
transformation works on that list -- load sinking (:func:`sink_loads`), the fusion of sines and cosines
(:func:`soadyn.codegen.trig.fuse_trig`), stage functions (:mod:`soadyn.codegen.stages`), SIMD lanes across
states (:mod:`soadyn.codegen.lanes`), the expressions of general products
(:func:`soadyn.codegen.products.expanded_products`) -- and a printer per target
(:mod:`soadyn.codegen.printer`: C99 double, C99 float) prints it once, at the end.

A statement has a kind (:data:`KINDS`), the name it defines or the array it stores into, its right-hand
side as an :class:`Expr` and, derived from the expression, the names it reads and its operation count.
An :class:`Expr` is one C expression as the expression printer produced it (``symengine.ccode`` with
exact constants), lexed into tokens when a transformation renames some (a value read from a work array,
an input element, a vector function); nothing re-parses printed statements.  The function around the
statements (inputs, outputs, operation counts, frame cases, product loops) is
:class:`soadyn.codegen.emit.EmittedFunction`.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass

#: the lexer of one printed C expression: an input element (``q[3]``), an identifier, a number, white
#: space, or any other single character (operators, parentheses, commas).  ``"".join(tokens)`` is the text.
_TOKEN = re.compile(r"[A-Za-z_]\w*\[\d+\]|[A-Za-z_]\w*|(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?|\s+|.")
#: the same lexer's identifiers alone (an element gives its array; an exponent's ``e`` is no name), and
#: its numbers: the names and operations of an expression at C speed (every statement needs them)
_NAME = re.compile(r"(?<![\w.])[A-Za-z_]\w*")
_NUMBER = re.compile(r"(?<![A-Za-z0-9_.])(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?")
_FLOAT = re.compile(r"\d[.eE]|\.\d")
_OPERATION = re.compile(r"[-+*/]|\b(?:soadyn_sin|soadyn_cos|sin|cos|sqrt|pow)\(")

#: the functions the generated scalar expressions may call (``soadyn_sin``/``soadyn_cos``: the inline
#: functions of :mod:`soadyn.codegen.trig`)
CALLS = frozenset({"soadyn_sin", "soadyn_cos", "sin", "cos", "sqrt", "pow"})


def lex(text: str) -> list[str]:
    """The tokens of a C expression (see :data:`_TOKEN`)."""
    return _TOKEN.findall(text)


def has_float_literal(text: str) -> bool:
    """A digit next to a ``.`` or an exponent in ``text``: where it may hold a floating-point number
    (SymEngine prints every finite float so)."""
    return _FLOAT.search(text) is not None


def is_name(tok: str) -> bool:
    """An identifier token (not an element, not a number)."""
    return (tok[0].isalpha() or tok[0] == "_") and not tok.endswith("]")


def is_element(tok: str) -> bool:
    """An array element token ``name[k]``."""
    return tok.endswith("]") and (tok[0].isalpha() or tok[0] == "_")


def element(tok: str) -> tuple[str, int]:
    """(array, index) of an element token."""
    name, _, k = tok[:-1].partition("[")
    return name, int(k)


def is_constant(expr: Expr) -> bool:
    """A constant expression: numbers and math calls of numbers only (``0``, ``-0.5``, ``1.0/2.0``,
    ``sqrt(2.0)``): a ``double`` the same for every state (the SIMD lanes broadcast it)."""
    return all(t in CALLS for t in expr.names())


class Expr:
    """One C expression: its text as the expression printer produced it, its tokens (:func:`lex`), the
    names it reads and its operations (each computed once, when first needed)."""

    __slots__ = ("text", "_tokens", "_names")

    def __init__(self, text: str, tokens: list[str] | None = None) -> None:
        self.text = text
        self._tokens = tokens
        self._names: tuple[str, ...] | None = None

    @classmethod
    def of(cls, text: str) -> Expr:
        return cls(text)

    @classmethod
    def of_tokens(cls, tokens: list[str]) -> Expr:
        return cls("".join(tokens), tokens)

    @property
    def tokens(self) -> list[str]:
        if self._tokens is None:
            self._tokens = _TOKEN.findall(self.text)
        return self._tokens

    def names(self) -> tuple[str, ...]:
        """Identifiers read, in order of appearance (an element gives its array; function names
        included)."""
        if self._names is None:
            self._names = tuple(_NAME.findall(self.text))
        return self._names

    def cost(self) -> int:
        """Operations: ``+ - * /`` and calls of :data:`CALLS` (what the stage cut counts)."""
        return len(_OPERATION.findall(_NUMBER.sub(" ", self.text)))

    def renamed(self, names: dict[str, str]) -> Expr:
        """The expression with the identifiers of ``names`` replaced by their text."""
        return Expr.of_tokens([names.get(t, t) for t in self.tokens])

    def calls(self, names: dict[str, str]) -> Expr:
        """The expression with the called functions of ``names`` (an identifier followed by ``(``)
        replaced."""
        if "(" not in self.text:
            return self
        toks = self.tokens
        return Expr.of_tokens([names.get(t, t) if i + 1 < len(toks) and toks[i + 1] == "(" else t
                               for i, t in enumerate(toks)])

    def trig_args(self) -> Iterator[tuple[str, str, int]]:
        """(``sin`` or ``cos``, argument, token position) of each call ``[soadyn_]sin(x)`` /
        ``[soadyn_]cos(x)`` whose argument is one name or element."""
        if "sin(" not in self.text and "cos(" not in self.text:
            return
        toks = self.tokens
        for i in range(len(toks) - 3):
            t = toks[i]
            if t in _TRIG_CALLS and toks[i + 1] == "(" and toks[i + 3] == ")" and _simple(toks[i + 2]):
                yield _TRIG_CALLS[t], toks[i + 2], i

    def __repr__(self) -> str:
        return f"Expr({self.text!r})"


_TRIG_CALLS = {"sin": "sin", "soadyn_sin": "sin", "cos": "cos", "soadyn_cos": "cos"}


def _simple(tok: str) -> bool:
    return is_name(tok) or is_element(tok)


#: statement kinds
LOAD = "load"          # const double <target> = <array>[<index>];   an input element
TRIG = "trig"          # const double <target> = soadyn_sin(x);       one sine or cosine of a name or element
ARITH = "arith"        # const double <target> = <expr>;              any other value
STORE = "store"        # <target>[<index>] = <expr>;                  an output (or scratch) entry
ZEROS = "zeros"        # <target>[k] = 0 for index <= k < end         a run of exact zeros of an output
WORK = "work"          # w[<index>] = <target>;                       a value crossing a stage boundary
SCRATCH = "scratch"    # double <target>[<index>];                    a local array (zeroed: ``zero``)
CALL = "call"          # <target>(<args>);                            a stage, the *_fext variant
PRODUCT = "product"    # <target>(<args>);                            a product loop (soadyn.codegen.products)
VOID = "void"          # (void)<target>;                              a parameter the function ignores
COMMENT = "comment"    # /* <text> */
SINCOS = "sincos"      # the fused sines and cosines of a block (:func:`soadyn.codegen.trig.fuse_trig`)
SWITCH = "switch"      # switch (frame) { <cases> }: a frame family's cases (``cases``), then return 0
BASE = "base"          # [double *]<target> = w + <index>;            a base pointer into the work array
#                        (or into ``array``, an output: ``<array> + <index>``; ``zero``: declared here),
#                        opaque to the compiler (soadyn.codegen.stages, windows)
JUMP = "jump"          # __asm__ volatile("jmp 1f\n1:");              a taken jump to the next instruction
PREFETCH = "prefetch"  # __builtin_prefetch of <target>[k], k = the multiples of 8 in index..end (one loop),
#                        and of <target>[end] when end is none: a slice of an output's lines (SIMD lanes
#                        driver, soadyn.codegen.lanes.prefetched_outputs)
KINDS = (LOAD, TRIG, ARITH, STORE, ZEROS, WORK, SCRATCH, CALL, PRODUCT, VOID, COMMENT, SINCOS, SWITCH, BASE,
         PREFETCH, JUMP)
VALUES = (LOAD, TRIG, ARITH)

#: a run of at least ZERO_RUN exact zeros in an output of a frame family (``emit._stores``; a windowed
#: stage's stores too: ``stages._zero_runs``) is written by loops of at most
#: ZERO_CHUNK elements, which C compilers turn into a few vector stores: a frame's Jacobian is zero in
#: every column of a joint off the frame's path (153 of the 222 entries for a hand of the four-arm
#: robot).  gcc 12 inlines such a loop for up to 8 doubles under every tuning tried (generic x86-64,
#: AVX2, AVX-512) but calls libc's memset for 16 or more with the generic and AVX2 tunings (measured
#: slower than the single stores for the short cases of a tree's frames)
ZERO_RUN = 4
ZERO_CHUNK = 8


def zero_run(array: str, start: int, end: int) -> list[Stmt]:
    """The stores of exact zeros into ``array[start:end]`` (at least :data:`ZERO_RUN` entries): loops
    (:data:`ZEROS`) of at most :data:`ZERO_CHUNK` entries, a shorter tail as single stores."""
    out: list[Stmt] = []
    for a in range(start, end, ZERO_CHUNK):
        b = min(a + ZERO_CHUNK, end)
        out += ([Stmt(ZEROS, array, index=a, end=b)] if b - a >= ZERO_RUN
                else [store(array, k, Expr("0")) for k in range(a, b)])
    return out


@dataclass(slots=True)
class Case:
    """One case of a frame family's switch: its enumerator, the comment on its line (None: a compact
    one-line case of a single call), and its statements."""

    enumerator: str
    comment: str | None
    body: list[Stmt]


@dataclass(slots=True)
class Stmt:
    """One statement (see :data:`KINDS` for what each field means per kind)."""

    kind: str
    target: str = ""
    expr: Expr | None = None
    index: int = 0
    end: int = 0
    array: str = ""
    text: str = ""
    args: tuple[str, ...] = ()
    cases: tuple[Case, ...] | list[Case] = ()
    #: TRIG: ``sin`` or ``cos`` and its argument (a name or an element); SINCOS: the call and arguments
    fn: str = ""
    arg: str = ""
    zero: bool = False

    @property
    def defines(self) -> str | None:
        """The local this statement defines (None for stores, calls, comments)."""
        return self.target if self.kind in VALUES else None

    def reads(self) -> tuple[str, ...]:
        """The names read, in order of appearance in the printed statement (a store's array first)."""
        k = self.kind
        if k in (TRIG, ARITH):
            return self.expr.names()
        if k == STORE:
            return (self.target, *self.expr.names())
        if k == LOAD:
            return (self.array,)
        if k in (ZEROS, PREFETCH):
            return (self.target,)
        if k == WORK:
            return ("w", self.target)
        if k in (CALL, PRODUCT):
            return (self.target, *self.args)
        if k == SWITCH:
            return tuple(n for c in self.cases for s in c.body for n in s.reads())
        return ()

    def cost(self) -> int:
        """Operations (the stage cut's measure): an expression's, plus one for a store."""
        if self.kind in (TRIG, ARITH):
            return self.expr.cost()
        if self.kind == STORE:
            return self.expr.cost() + 1
        if self.kind == ZEROS:
            return 1
        return 0

    def semicolons(self) -> int:
        """Printed lines ending in ``;`` (what :data:`soadyn.codegen.trig.INLINE_TRIG_STATEMENTS`
        measures)."""
        if self.kind in (COMMENT, BASE, JUMP):
            return 0
        if self.kind == SINCOS:
            return 2
        if self.kind == SWITCH:
            return 2 + sum(1 if c.comment is None else 1 + statements(c.body) for c in self.cases)
        return 1


def statements(body: list[Stmt]) -> int:
    """Printed lines ending in ``;`` of ``body``."""
    n = len(body)
    for s in body:
        if s.kind in (COMMENT, SINCOS, SWITCH, BASE, JUMP):
            n += s.semicolons() - 1
    return n


def load(target: str, array: str, index: int) -> Stmt:
    return Stmt(LOAD, target, Expr(f"{array}[{index}]"), index=index, array=array)


def value(target: str, expr: Expr) -> Stmt:
    """An assignment: :data:`TRIG` when it is one sine or cosine of a name or element, else :data:`ARITH`."""
    if not expr.text.startswith(("soadyn_sin(", "soadyn_cos(")):
        return Stmt(ARITH, target, expr)
    toks = expr.tokens
    if len(toks) == 4 and toks[0] in ("soadyn_sin", "soadyn_cos") and toks[1] == "(" and toks[3] == ")" \
            and (is_name(toks[2]) or is_element(toks[2])):
        return Stmt(TRIG, target, expr, fn=toks[0][7:], arg=toks[2])
    return Stmt(ARITH, target, expr)


def store(array: str, index: int, expr: Expr) -> Stmt:
    return Stmt(STORE, array, expr, index=index)


def comment(text: str) -> Stmt:
    return Stmt(COMMENT, text=text)


def call(function: str, args: Iterable[str]) -> Stmt:
    return Stmt(CALL, function, args=tuple(args))


def renamed(s: Stmt, names: dict[str, str]) -> Stmt:
    """``s`` with the names of ``names`` replaced on its right-hand side (a trig argument too)."""
    if s.expr is None or s.kind == LOAD:
        return s
    if s.kind == TRIG:
        return Stmt(TRIG, s.target, s.expr.renamed(names), fn=s.fn, arg=names.get(s.arg, s.arg))
    return Stmt(s.kind, s.target, s.expr.renamed(names), index=s.index)


def sink_loads(body: list[Stmt]) -> list[Stmt]:
    """``body`` with each input load moved to just before the first statement that reads it, or before the
    block (a frame family's switch) holding that statement.  A preamble of loads keeps every input value
    live from the start (spilled to the stack): the compiler does not move a load past the sines' and
    cosines' call, which could write the memory the input points to.  Measured (gcc 12, ns per call, best
    of 3 rounds, issue 11): Dimitrov robot, plain C at ``-O2 -march=native``, the ``_fext`` variants of
    the inverse dynamics 226 -> 214, forward dynamics 532 -> 492, generalised bias 467 -> 419, decoupled
    forward dynamics 1,429 -> 1,335, and the forward dynamics 444 -> 427; Panda free base, the shipped
    ``fast`` units, ID 164 -> 156, ID ``_fext`` 192 -> 168, FD ``_fext`` 479 -> 404, while the FD,
    401 -> 434 in one binary, was 448 -> 433 in a binary with other functions linked beside it and even
    at ``-O3`` (code layout).  The statements and their roundings are unchanged."""
    loads = {s.target: k for k, s in enumerate(body) if s.kind == LOAD}
    if not loads:
        return body
    moved = set(loads.values())
    before: dict[int, list[Stmt]] = {}
    for k, s in enumerate(body):
        if not loads:
            break
        if k in moved:
            continue
        for name in s.reads():
            j = loads.pop(name, None)
            if j is not None:
                before.setdefault(k, []).append(body[j])
    for j in loads.values():          # read by no statement: where it was
        before.setdefault(j, []).append(body[j])
    out: list[Stmt] = []
    for k, s in enumerate(body):
        out += before.get(k, [])
        if k not in moved:
            out.append(s)
    return out


def stored_entries(body: list[Stmt], outputs: list[str]) -> dict[str, list[tuple[int, str | None]]]:
    """The entries of each output array that a straight-line body stores, in order: (index, the constant
    stored there, or None for a computed value)."""
    out: dict[str, list[tuple[int, str | None]]] = {name: [] for name in outputs}
    for s in body:
        if s.kind == STORE and s.target in out:
            out[s.target].append((s.index, s.expr.text.strip() if is_constant(s.expr) else None))
    return out
