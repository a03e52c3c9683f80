"""Product loops: the dense matrix products a program leaves to loops after its statements.

A :class:`~soadyn.codegen.derive.Product` (placed by :func:`soadyn.codegen.derive.place_products`) is
evaluated by loops instead of unrolled statements: in place in the outputs (``M^-1 B`` with ``B`` read
back from the result's columns) or from a scratch array of its factors (a general product ``A B``, added
to an output or stored into it).  :func:`product_function` prints the loops as a function of their own
(vectorised with GCC/Clang vector extensions, scalar elsewhere: the same operations in the same order);
the function's statements end with a :data:`~soadyn.codegen.cprogram.PRODUCT` statement calling it.
:func:`expanded_products` writes the same products as statements (for the SIMD lanes, which evaluate
statements only), summed in the loops' order.
"""

from __future__ import annotations

import dataclasses
import functools

import soadyn.codegen.cprogram as cp
from soadyn.codegen.cprogram import Expr, Stmt
from soadyn.codegen.derive import Product
from soadyn.codegen.lanes import shuffle_macro
from soadyn.codegen.sections import section_of
from soadyn.model.names import c_comment

#: how many result vectors one pass of a product's row loop keeps in registers
PRODUCT_BLOCK = 8
#: the vector loops' sum over the inner dimension unrolled whole (a constant trip count): no loop counter
#: or branch per term (xArm7 free forward-dynamics derivatives, 13 x 13 by 13 x 17: 15 instructions per
#: term, 4 of them loop control); the same operations in the same order
UNROLL = "_Pragma(\"GCC unroll 32\")"


def _product_vector_lines(p: Product, width: int) -> list[str]:
    """The loops of an in-place product (:func:`product_function`) with ``width`` doubles per GCC/Clang
    vector (1: plain scalar loops): the right factor read back from the result's columns, then each result
    row accumulated over the left factor's row, ``r = a[0] B[0] + a[1] B[1] + ...`` (left to right), and
    stored.  The factor and the row are unions of vectors and doubles (C99 type punning), so that no vector
    load waits on the scalar stores just before it."""
    m, n = p.m, p.columns
    if width == 1:
        return [f"double prod_B[{m}][{n}], prod_r[{n}];",
                "int prod_i, prod_j, prod_k;",
                f"for (prod_k = 0; prod_k < {m}; ++prod_k) {{",
                *_product_copies(p, "prod_B[prod_k]", load=True),
                "}",
                f"for (prod_i = 0; prod_i < {m}; ++prod_i) {{",
                f"    const double *prod_a = {p.left} + {m} * prod_i;",
                f"    for (prod_j = 0; prod_j < {n}; ++prod_j) "
                "prod_r[prod_j] = prod_a[0] * prod_B[0][prod_j];",
                f"    for (prod_k = 1; prod_k < {m}; ++prod_k)",
                f"        for (prod_j = 0; prod_j < {n}; ++prod_j) "
                "prod_r[prod_j] += prod_a[prod_k] * prod_B[prod_k][prod_j];",
                *_product_copies(p, "prod_r", load=False), "}"]
    if row_vectors(p, width):
        return _column_product_lines(p, width)
    nvec = sum(-(-count // width) for *_, count in p.runs)     # each run from a whole vector on
    out = [f"typedef double prod_v __attribute__((vector_size({8 * width})));",
           f"typedef double prod_w __attribute__((vector_size({8 * width}), aligned(8), may_alias));",
           f"union {{ prod_v v[{nvec}]; double d[{nvec * width}]; }} prod_B[{m}], prod_r;",
           "int prod_i, prod_j, prod_k;",
           f"for (prod_k = 0; prod_k < {m}; ++prod_k) {{",
           f"    for (prod_j = 0; prod_j < {nvec}; ++prod_j) prod_B[prod_k].v[prod_j] = (prod_v){{0}};"]
    out += _product_copies(p, "prod_B[prod_k].d", load=True, width=width)
    out += ["}",
            f"for (prod_i = 0; prod_i < {m}; ++prod_i) {{",
            f"    const double *prod_a = {p.left} + {m} * prod_i;"]
    out += _accumulate_row(nvec, m, "prod_r")
    return out + _product_copies(p, "prod_r.d", load=False, width=width) + ["}"]


def _accumulate_row(nvec: int, k: int, row: str, indent: str = "    ", a: str = "prod_a[{}]") -> list[str]:
    """Row ``prod_i`` of a product, ``nvec`` vectors wide, into ``row``: blocks of at most
    :data:`PRODUCT_BLOCK` vector accumulators, ``c = a[0] B[0] + a[1] B[1] + ...`` (left to right);
    ``a``: how entry ``{}`` of the left factor's row is read."""
    a0, ak = a.format(0), a.format("prod_k")
    out = []
    for b0 in range(0, nvec, PRODUCT_BLOCK):
        acc = range(b0, min(nvec, b0 + PRODUCT_BLOCK))
        out += [f"{indent}{{",
                f"{indent}    " + " ".join(f"prod_v prod_c{v} = {a0} * prod_B[0].v[{v}];" for v in acc),
                f"{indent}    {UNROLL}",
                f"{indent}    for (prod_k = 1; prod_k < {k}; ++prod_k) {{",
                f"{indent}        " + " ".join(f"prod_c{v} += {ak} * prod_B[prod_k].v[{v}];"
                                               for v in acc),
                f"{indent}    }}",
                f"{indent}    " + " ".join(f"{row}.v[{v}] = prod_c{v};" for v in acc),
                f"{indent}}}"]
    return out


def _product_copies(p: Product, row: str, load: bool, width: int = 1) -> list[str]:
    """Loops between a row buffer ``row`` and the result's columns in the outputs: ``load``: row ``prod_k``
    of the right factor read back; else row ``prod_i`` of the result stored, scaled.  ``width`` > 1: whole
    unaligned vectors (``prod_w``) of each run, then its last entries one by one (an elementwise loop over
    runs of 7 and 13 entries was compiled into scalar loads and lane inserts: 4.5 % of the Panda
    forward-dynamics derivatives' time, perf)."""
    out = []
    at = 0
    sign = "-" if p.scale < 0 and not load else ""
    for name, stride, col, count in p.runs:
        if width > 1:
            at = -(-at // width) * width
        src, dst = f"{row} + {at}", f"{name} + {stride} * {'prod_k' if load else 'prod_i'} + {col}"
        if load:
            src, dst = dst, src
        if width > 1:
            out.append(f"    {UNROLL} for (prod_j = 0; prod_j + {width} <= {count}; prod_j += {width}) "
                       f"*(prod_w *)({dst} + prod_j) = {sign}*(const prod_w *)({src} + prod_j);")
            out.append(f"    {UNROLL} for (; prod_j < {count}; ++prod_j) "
                       f"({dst})[prod_j] = {sign}({src})[prod_j];")
        else:
            out.append(f"    for (prod_j = 0; prod_j < {count}; ++prod_j) "
                       f"({dst})[prod_j] = {sign}({src})[prod_j];")
        at += count
    return out


def _general_product_lines(p: Product, width: int) -> list[str]:
    """The loops of a general product (``p.k`` > 0): ``A`` (m x k) and ``B`` (k x n) read from the scratch
    array ``p.left``; each result row accumulated over ``A``'s row, ``r = a[0] B[0] + a[1] B[1] + ...``
    (left to right), then stored into (or, ``accumulate``, added to) its output row.  A symmetric product
    computes row i from column i on (whole vectors from the one holding column i), stores it from column
    i on and copies it into column i below the diagonal (what the program stored there equals the
    entry above; the vector loops copy after the last row: :func:`_symmetric_row_lines`,
    :func:`_mirror_lines`).  ``width`` doubles per vector (1: the plain scalar loops)."""
    m, k, n = p.m, p.k, p.columns
    name, stride, col, _ = p.runs[0]
    op = ("-=" if p.scale < 0 else "+=") if p.accumulate else "="
    sign = "-" if p.scale < 0 and not p.accumulate else ""
    first = "prod_i" if p.symmetric else "0"
    boff = 0 if p.source else m * k             # B's offset in the scratch array
    index, row_a, a = _left_rows(p)

    def head(r0: int, r1: int) -> list[str]:
        return [f"for (prod_i = {r0}; prod_i < {r1}; ++prod_i) {{",
                f"    const double *prod_a = {row_a};",
                f"    double *prod_o = {name} + {stride} * ({p.row0} + prod_i) + {col};"]
    mirror = ([f"    for (prod_j = prod_i + 1; prod_j < {n}; ++prod_j) "
               f"prod_o[{stride} * (prod_j - prod_i) + prod_i] = prod_o[prod_j];"]
              if p.symmetric else [])
    if width == 1:
        out = [f"double prod_r[{n}];",
               "int prod_i, prod_j, prod_k;",
               f"const double *prod_b = {p.left} + {boff};", *index]
        for r0, r1, t in row_segments(p):
            out += [*head(r0, r1),
                    f"    for (prod_j = {first}; prod_j < {n}; ++prod_j) "
                    f"prod_r[prod_j] = {a.format(0)} * prod_b[prod_j];",
                    f"    for (prod_k = 1; prod_k < {t}; ++prod_k)",
                    f"        for (prod_j = {first}; prod_j < {n}; ++prod_j) "
                    f"prod_r[prod_j] += {a.format('prod_k')} * prod_b[{n} * prod_k + prod_j];",
                    f"    for (prod_j = {first}; prod_j < {n}; ++prod_j) "
                    f"prod_o[prod_j] {op} {sign}prod_r[prod_j];",
                    *mirror, "}"]
        return out
    if row_vectors(p, width):
        return _column_product_lines(p, width)
    nvec = -(-n // width)
    out = [f"typedef double prod_v __attribute__((vector_size({8 * width})));",
           f"typedef double prod_w __attribute__((vector_size({8 * width}), aligned(8), may_alias));",
           f"union {{ prod_v v[{nvec}]; double d[{nvec * width}]; }} prod_B[{k}], prod_u;",
           "int prod_i, prod_j, prod_k;",
           f"for (prod_k = 0; prod_k < {k}; ++prod_k) {{",
           f"    {UNROLL} for (prod_j = 0; prod_j < {n}; ++prod_j) "
           f"prod_B[prod_k].d[prod_j] = {p.left}[{boff} + {n} * prod_k + prod_j];"]
    if nvec * width > n:
        out.append(f"    for (prod_j = {n}; prod_j < {nvec * width}; ++prod_j) "
                   "prod_B[prod_k].d[prod_j] = 0.0;")
    out += ["}", *index]
    if p.symmetric:
        for r0, r1, t in row_segments(p):
            out += head(r0, r1) + _symmetric_row_lines(p, width, op, sign, t)
        return out + _mirror_lines(p, width)
    out += head(0, m)
    out += _accumulate_row(nvec, k, "prod_u", a=a)
    # whole (unaligned) vectors of the row, then its last entries one by one
    out += [f"    {UNROLL} for (prod_j = {first}; prod_j + {width} <= {n}; prod_j += {width}) "
            f"*(prod_w *)(prod_o + prod_j) {op} {sign}*(const prod_w *)(prod_u.d + prod_j);",
            f"    {UNROLL} for (; prod_j < {n}; ++prod_j) prod_o[prod_j] {op} {sign}prod_u.d[prod_j];", "}"]
    return out


#: at most this many row loops of a product whose rows sum different numbers of terms (``Product.terms``,
#: :func:`row_segments`)
ROW_SEGMENTS = 4


def row_segments(p: Product) -> list[tuple[int, int, int]]:
    """The row loops of a general product: ``(first row, end row, terms)``, rows ``r0 <= i < r1`` summing
    ``terms`` terms of ``A``'s row (``Product.terms``: its trailing exact zeros skipped).  Consecutive rows
    with the same count share a loop; of more than :data:`ROW_SEGMENTS` such runs, the neighbours whose
    merging adds the fewest terms are merged (the larger count for both).  G1's M^-1 base term (29 x 9:
    the base's 6 columns and the 3 waist hinges, zero on the 12 leg rows): 4 loops, 6, 7, 8 and 9 terms
    (the product alone, a C loop: 257 -> 230 ns)."""
    if not p.terms:
        return [(0, p.m, p.inner)]
    segs = []
    for i, t in enumerate(p.terms):
        if segs and segs[-1][2] == t:
            segs[-1][1] = i + 1
        else:
            segs.append([i, i + 1, t])

    def cost(a: list[int], b: list[int]) -> int:     # terms added by running both at the larger count
        t = max(a[2], b[2])
        return sum((t - x[2]) * (x[1] - x[0]) for x in (a, b))
    while len(segs) > ROW_SEGMENTS:
        j = min(range(len(segs) - 1), key=lambda i: (cost(segs[i], segs[i + 1]), i))
        a, b = segs[j], segs.pop(j + 1)
        segs[j] = [a[0], b[1], max(a[2], b[2])]
    return [(a, b, t) for a, b, t in segs]


def row_counts(p: Product) -> list[int]:
    """Per row of a general product, the terms its loop sums (:func:`row_segments`, merged runs included)."""
    return [t for r0, r1, t in row_segments(p) for _ in range(r0, r1)]


def _symmetric_row_lines(p: Product, width: int, op: str, sign: str, terms: int | None = None) -> list[str]:
    """Row ``prod_i`` of a symmetric general product (:func:`_general_product_lines`, ``width`` > 1): each
    vector of the row from the one holding column ``prod_i`` on, ``c = a[0] B[0] + a[1] B[1] + ...``, added
    to (or stored into) the output straight from the register where the vector lies wholly on or above the
    diagonal and within the row; else only its lanes from column ``prod_i`` on: with AVX-512 or AVX masked
    loads and stores (:func:`_masked_lanes`), otherwise lane by lane from ``prod_u``.  Where ``A`` is read
    in place from the output the product writes (``p.source``), with AVX-512 or AVX the last ``n % width``
    columns are unmasked pieces of 4, 2 and 1 lanes (:func:`_tail_lanes`; in the rows that start there,
    their lanes below the diagonal too, which the mirror copy, :func:`_mirror_lines`, overwrites after the
    last row), so that no store reaches past column ``n - 1``.
    (A masked store of the last vector, its lanes past the row masked off, still spans the next row's
    first entries, which the next row's broadcasts of ``A`` (M^-1's base columns, read in place) load right
    after: G1's M^-1 base term in its forward-dynamics derivatives, 29 x 6 by 6 x 29, row stride 35, took
    5.9 % of the time, TALOS's, 32 columns, 2.1 %; perf.  Storing the row into ``prod_u`` and reading it
    back from column ``prod_i``, an offset that is not a multiple of the vector, made every such load wait
    for the stores to retire, no store forwarding: TALOS's M^-1 base term, 32 x 6 by 6 x 32, 324-336 ns a
    call in a C loop against 244-252 with masked lanes, perf; 273-278 lane by lane: reading one double of a
    vector just stored stalls too.  Whole vectors in place of the masked ones at the start of each row,
    their lanes below the diagonal left to the mirror: nothing measurable on G1's M^-1 function, which
    ran 1.93-2.10 us in two modes either way.)"""
    k, n = terms or p.k, p.columns
    nvec = -(-n // width)
    whole = n // width
    tail = width in (4, 8) and bool(n % width) and p.source is not None and p.source[0] == p.runs[0][0]
    if width in (4, 8):
        partial = _masked_lanes(width, whole * width if tail else n, op, sign)
    else:
        lane = (f"prod_j * {width} < prod_i ? prod_i - {width} * prod_j : 0", f"prod_k < {width}"
                + (f" && {width} * prod_j + prod_k < {n}" if n % width else ""))
        partial = ["            prod_u.v[0] = prod_c;",
                   f"            for (prod_k = {lane[0]}; {lane[1]}; ++prod_k) "
                   f"prod_o[{width} * prod_j + prod_k] {op} {sign}prod_u.d[prod_k];"]
    return [*(f"    prod_v prod_a{c} = {{{', '.join([f'prod_a[{c}]'] * width)}}};" for c in range(k)),
            f"    for (prod_j = prod_i / {width}; prod_j < {nvec}; ++prod_j) {{",
            "        prod_v prod_c = prod_a0 * prod_B[0].v[prod_j];",
            *(f"        prod_c += prod_a{c} * prod_B[{c}].v[prod_j];" for c in range(1, k)),
            f"        if (prod_j * {width} >= prod_i" + (f" && prod_j < {whole}" if n % width else "")
            + f") *(prod_w *)(prod_o + {width} * prod_j) {op} {sign}prod_c;",
            *((f"        else if (prod_j < {whole}) {{", *partial, "        }",
               "        else {", *_tail_lanes(width, n, op, sign), "        }") if tail else
              ("        else {", *partial, "        }")),
            "    }", "}"]


def _masked_lanes(width: int, n: int, op: str, sign: str) -> list[str]:
    """The lanes of vector ``prod_j`` of a symmetric product's row from column ``prod_i`` to column ``n - 1``
    (:func:`_symmetric_row_lines`): the output loaded, added to and stored under a mask (AVX-512 masked
    loads, operations and stores; AVX ``vmaskmovpd``, which loads zeros in the other lanes), so that no
    other entry is read or written; each lane's operation is the scalar loop's."""
    o, ind = f"prod_o + {width} * prod_j", " " * 12
    if width == 8:
        hi = f" & (0xffu >> (8 * prod_j + 8 > {n} ? 8 * prod_j + 8 - {n} : 0))" if n % 8 else ""
        lo = "(0xffu << (8 * prod_j < prod_i ? prod_i - 8 * prod_j : 0))"
        mask = [f"{ind}const __mmask8 prod_m = (__mmask8)({lo}{hi});"]
        value = f"(__m512d)({sign}prod_c)"
        if op == "=":
            return mask + [f"            _mm512_mask_storeu_pd({o}, prod_m, {value});"]
        fn = "_mm512_maskz_add_pd" if op == "+=" else "_mm512_maskz_sub_pd"
        return mask + [f"            const __m512d prod_x = _mm512_maskz_loadu_pd(prod_m, {o});",
                       f"            _mm512_mask_storeu_pd({o}, prod_m, {fn}(prod_m, prod_x, {value}));"]
    mask = ["            typedef long long prod_l __attribute__((vector_size(32)));",
            "            const prod_l prod_n = (prod_l){0, 1, 2, 3} + 4 * prod_j;",
            f"{ind}const __m256i prod_m = (__m256i)((prod_n >= (prod_l){{prod_i, prod_i, prod_i, prod_i}})"
            + (f" & (prod_n < (prod_l){{{n}, {n}, {n}, {n}}})" if n % 4 else "") + ");"]
    value = f"(__m256d)({sign}prod_c)"
    if op == "=":
        return mask + [f"            _mm256_maskstore_pd({o}, prod_m, {value});"]
    fn = "_mm256_add_pd" if op == "+=" else "_mm256_sub_pd"
    return mask + [f"{ind}_mm256_maskstore_pd({o}, prod_m, {fn}(_mm256_maskload_pd({o}, prod_m), {value}));"]


def _tail_lanes(width: int, n: int, op: str, sign: str) -> list[str]:
    """The last ``n % width`` lanes of a symmetric product's row (:func:`_symmetric_row_lines`, vector
    ``prod_j`` = ``n // width``) added to (or stored into) the output as unmasked loads and stores of 4, 2
    and 1 lanes, taken from the register by casts and extracts (no store beyond column ``n - 1``; each
    lane's operation is the scalar loop's)."""
    ind, o = " " * 12, f"prod_o + {width} * prod_j"
    fn = {"+=": "add", "-=": "sub"}.get(op)
    kind = {8: "__m512d", 4: "__m256d", 2: "__m128d", 1: "__m128d"}
    out = [f"{ind}const {kind[width]} prod_t = ({kind[width]})({sign}prod_c);"]
    cur, have, off, left = "prod_t", width, 0, n % width
    for size in (4, 2, 1):
        if size >= have or not left:
            continue
        low = (f"_mm512_castpd512_pd256({cur})" if have == 8 else
               f"_mm256_castpd256_pd128({cur})" if have == 4 else cur)
        if left >= size:
            at = f"{o} + {off}" if off else o
            part = f"prod_p{size}"
            out.append(f"{ind}const {kind[size]} {part} = {low};")
            load, store, op_ = {4: ("_mm256_loadu_pd", "_mm256_storeu_pd", f"_mm256_{fn}_pd"),
                                2: ("_mm_loadu_pd", "_mm_storeu_pd", f"_mm_{fn}_pd"),
                                1: ("_mm_load_sd", "_mm_store_sd", f"_mm_{fn}_sd")}[size]
            out.append(f"{ind}{store}({at}, {part if fn is None else f'{op_}({load}({at}), {part})'});")
            off, left = off + size, left - size
            if left:
                high = (f"_mm512_extractf64x4_pd({cur}, 1)" if have == 8 else
                        f"_mm256_extractf128_pd({cur}, 1)" if have == 4 else f"_mm_unpackhi_pd({cur}, {cur})")
                out.append(f"{ind}const {kind[size]} prod_h{size} = {high};")
                cur = f"prod_h{size}"
        else:
            cur = low
        have = size
    return out


def transpose_stages(width: int) -> list[tuple[int, int, int, list[int]]]:
    """A ``width`` x ``width`` transposition (``width`` a power of 2) as two-vector shuffles, each
    ``(stage, row, other row, lane indices)``: at stage ``s`` (1, 2, 4, ...) rows ``r`` and ``r + s``
    (``r & s == 0``) swap their off-diagonal ``s`` x ``s`` blocks; index ``l`` < ``width`` takes lane ``l``
    of row ``r``, ``width + l`` lane ``l`` of row ``r + s``.  Data movement only (the same bits)."""
    out = []
    s = 1
    while s < width:
        for r in range(width):
            if not r & s:
                out.append((s, r, r + s, [l if not l & s else width + l - s for l in range(width)]))
                out.append((s, r + s, r, [l + s if not l & s else width + l for l in range(width)]))
        s *= 2
    return out


def _mirror_lines(p: Product, width: int) -> list[str]:
    """A symmetric product's entries below the diagonal, copied from those above once every row is done
    (the entries the program stored there equal the ones above): each whole ``width`` x ``width`` block
    above the diagonal loaded as ``width`` vectors, transposed by shuffles (:func:`transpose_stages`) and
    stored below it (a block on the diagonal blended with its own rows: only the lanes below the diagonal
    change); the entries of the last columns that fill no whole block copied one by one, unrolled
    (constant offsets: a loop per row cost ~6 instructions per entry).  TALOS's M^-1 base term (32 x 32,
    496 entries): 140 of the loops' 250 ns a call as scalar copies."""
    m, n = p.m, p.columns
    name, stride, col, _ = p.runs[0]
    full = n // width if width in (4, 8) else 0        # 2 x 2 blocks: no fewer instructions than copies

    def at(i: int, j: int) -> int:
        return stride * (p.row0 + i) + col + j
    out = shuffle_macro("PROD_SHUF", width) if full else []
    rows = range(width)
    for c in range(full):
        for r in range(c, full):
            out.append("{")
            out += [f"    prod_v prod_t0_{i}; __builtin_memcpy(&prod_t0_{i}, "
                    f"{name} + {at(width * c + i, width * r)}, sizeof prod_t0_{i});" for i in rows]
            for s, i, o, idx in transpose_stages(width):     # stage s reads stage s // 2 (0: the loads)
                out.append(f"    const prod_v prod_t{s}_{i} = PROD_SHUF(prod_t{s // 2}_{min(i, o)}, "
                           f"prod_t{s // 2}_{max(i, o)}, {', '.join(map(str, idx))});")
            fin = width // 2
            for i in rows:
                t = f"prod_t{fin}_{i}"
                if r == c:               # a diagonal block: lanes below the diagonal from the transpose
                    if i == 0:
                        continue
                    t = f"prod_d{i}"
                    blend = [l if l < i else width + l for l in rows]
                    out.append(f"    const prod_v {t} = PROD_SHUF(prod_t{fin}_{i}, prod_t0_{i}, "
                               f"{', '.join(map(str, blend))});")
                out.append(f"    __builtin_memcpy({name} + {at(width * r + i, width * c)}, &{t}, "
                           f"sizeof {t});")
            out.append("}")
    if full:
        out.append("#undef PROD_SHUF")
    return out + [f"{name}[{at(j, i)}] = {name}[{at(i, j)}];"
                  for i in range(m) for j in range(max(i + 1, full * width), n)]


#: at most this many vector accumulators in a column of :func:`_column_product_lines` (else by rows)
COLUMN_VECTORS = 10


def row_vectors(p: Product, width: int) -> bool:
    """Whether a product's loops run down the result's columns, ``width`` rows per vector
    (:func:`_column_product_lines`), instead of along its rows: when ``A`` is (a block of) a symmetric
    matrix whose rows are contiguous (so that its columns are contiguous runs of that matrix) and this
    takes fewer vector multiplications (B1 + Z1's forward-dynamics derivatives: the leg blocks 24 x 9 by
    9 x 3, six vectors per column instead of one per row, and no index lookup per entry of ``A``)."""
    if width < 2 or p.symmetric or not p.left_symmetric:
        return False
    if p.k:
        if p.source is None:
            return False
        rows = p.source[2]
        if rows != tuple(range(rows[0], rows[0] + len(rows))):
            return False
        by_rows = -(-p.columns // width)
    else:
        by_rows = sum(-(-count // width) for *_, count in p.runs)
    whole, tail = divmod(p.m, width)
    return 0 < whole <= COLUMN_VECTORS and p.columns * (whole + tail) < p.m * by_rows


def _column_product_lines(p: Product, width: int) -> list[str]:
    """The loops of a product down each column j of the result: column c of ``A`` is the run of the
    symmetric matrix's row c (in place: ``A[i, c] = W[rows[i], cols[c]] = W[cols[c], rows[i]]``), read as
    whole vectors (the last ``m % width`` rows one by one) and scaled by ``B[c, j]``.  In place
    (``p.k == 0``), column j of ``B`` is read back from the result's column first.  The sum over c runs
    left to right as in the row loops, so every entry rounds the same."""
    m = p.m
    k = p.k or m
    whole, tail = divmod(m, width)
    if p.k:
        src, sstride, rows, cols = p.source
        r0 = rows[0]
    else:
        src, sstride, r0, cols = p.left, m, 0, tuple(range(m))
    if cols == tuple(range(cols[0], cols[0] + len(cols))):
        index, column = [], f"{src} + {sstride} * ({cols[0]} + prod_k) + {r0}"
    else:
        index = [f"const int prod_ci[{k}] = {{{', '.join(map(str, cols))}}};"]
        column = f"{src} + {sstride} * prod_ci[prod_k] + {r0}"
    vec = [f"prod_c{t}" for t in range(whole)]
    sca = [f"prod_e{t}" for t in range(tail)]
    bcast = "(prod_v){" + ", ".join(["prod_b"] * width) + "}"

    def step(first: bool, b: str, ind: str) -> list[str]:
        eq = "=" if first else "+="
        ops = ([f"{c} {eq} *(const prod_w *)(prod_a + {width * t}) * prod_s;" for t, c in enumerate(vec)]
               + [f"{e} {eq} prod_a[{width * whole + t}] * prod_b;" for t, e in enumerate(sca)])
        return [f"{ind}prod_a = {column};", f"{ind}prod_b = {b};", f"{ind}prod_s = {bcast};",
                ind + " ".join(ops)]

    def column_loop(count: int, b: str, dst: str, op: str, sign: str, read_back: list[str]) -> list[str]:
        """One loop over ``count`` result columns: ``b`` is entry prod_k of column prod_j of B, ``dst``
        the result's entry prod_i of that column."""
        return [f"for (prod_j = 0; prod_j < {count}; ++prod_j) {{",
                *read_back,
                "    prod_k = 0;",
                *step(True, b, "    "),
                f"    {UNROLL}",
                f"    for (prod_k = 1; prod_k < {k}; ++prod_k) {{",
                *step(False, b, "        "),
                "    }",
                "    " + " ".join(f"prod_u.v[{t}] = {c};" for t, c in enumerate(vec)),
                f"    {UNROLL} for (prod_i = 0; prod_i < {whole * width}; ++prod_i) "
                f"{dst} {op} {sign}prod_u.d[prod_i];",
                *(f"    prod_i = {width * whole + t}; {dst} {op} {sign}{e};" for t, e in enumerate(sca)),
                "}"]
    out = [f"typedef double prod_v __attribute__((vector_size({8 * width})));",
           f"typedef double prod_w __attribute__((vector_size({8 * width}), aligned(8), may_alias));",
           f"union {{ prod_v v[{whole}]; double d[{whole * width}]; }} prod_u;",
           "int prod_j, prod_k, prod_i;", "const double *prod_a;", "double prod_b;", "prod_v prod_s;",
           *([f"double {', '.join(sca)};"] if sca else []), "prod_v " + ", ".join(vec) + ";", *index]
    if p.k:
        name, stride, col, _ = p.runs[0]
        op = ("-=" if p.scale < 0 else "+=") if p.accumulate else "="
        sign = "-" if p.scale < 0 and not p.accumulate else ""
        return out + column_loop(p.columns, f"{p.left}[{p.columns} * prod_k + prod_j]",
                                 f"{name}[{stride} * ({p.row0} + prod_i) + {col} + prod_j]", op, sign, [])
    sign = "-" if p.scale < 0 else ""
    out.append(f"double prod_bj[{m}];")
    for name, stride, col, count in p.runs:      # in place: column j of B read back, then overwritten
        entry = f"{name}[{stride} * prod_i + {col} + prod_j]"
        back = [f"    {UNROLL} for (prod_i = 0; prod_i < {m}; ++prod_i) prod_bj[prod_i] = {entry};"]
        out += column_loop(count, "prod_bj[prod_k]", entry, "=", sign, back)
    return out


def _masked_product_lines(p: Product, width: int) -> list[str]:
    """The code of a masked general product (``p.ranges``), unrolled: for each row ``c`` of ``B`` (stride
    ``p.bstride`` in the scratch array, padded with zeros), its vectors of ``width`` columns built from
    scalar loads (a vector load of entries the statements have just stored one by one would wait for the
    stores: 19 % slower on the xArm7's ID derivatives), then every result vector that holds one of a
    row's columns ``lo <= j < hi`` accumulates ``a_ic B[c]`` (``a_ic`` broadcast), so that each entry is
    ``a_i0 B[0] + a_i1 B[1] + ...`` left to right; last, each row's entries are stored into (or added to)
    the output.  ``width`` 1: one scalar expression per entry, in the same order."""
    m, k, bs = p.m, p.k, p.bstride
    name, stride, col, _ = p.runs[0]
    op = ("-=" if p.scale < 0 else "+=") if p.accumulate else "="
    sign = "-" if p.scale < 0 and not p.accumulate else ""
    if p.source:                       # A read from another array: A[i, c] = src[stride rows[i] + cols[c]]
        src, st, rs, cs = p.source
        out = [f"const double *prod_a = {src};", f"const double *prod_b = {p.left};"]
    else:
        st, rs, cs = k, range(m), range(k)
        out = [f"const double *prod_a = {p.left};", f"const double *prod_b = {p.left} + {m * k};"]
    rows = [(i, lo, hi) for i, (lo, hi) in enumerate(p.ranges) if lo < hi]
    if width == 1:
        for i, lo, hi in rows:
            for j in range(lo, hi):
                terms = " + ".join(f"prod_a[{st * rs[i] + cs[c]}]*prod_b[{bs * c + j}]" for c in range(k))
                out.append(f"{name}[{stride * (p.row0 + i) + col + j}] {op} {sign}({terms});")
        return out
    vecs = {(i, v) for i, lo, hi in rows for v in range(lo // width, -(-hi // width))}
    used = sorted({v for _, v in vecs})
    out = [f"typedef double prod_v __attribute__((vector_size({8 * width})));",
           f"union {{ prod_v v; double d[{width}]; }} prod_u;", *out]
    out += [f"prod_v prod_c{i}_{v};" for i, v in sorted(vecs)]
    for c in range(k):
        out.append("{")
        for v in used:
            entries = ", ".join(f"prod_b[{bs * c + width * v + w}]" for w in range(width))
            out.append(f"    const prod_v prod_b{v} = {{{entries}}};")
        for i, lo, hi in rows:
            a = ", ".join([f"prod_a[{st * rs[i] + cs[c]}]"] * width)
            out.append(f"    {{ const prod_v prod_x = {{{a}}};")
            for v in range(lo // width, -(-hi // width)):
                out.append(f"      prod_c{i}_{v} {'=' if c == 0 else '+='} prod_x * prod_b{v};")
            out.append("    }")
        out.append("}")
    for i, lo, hi in rows:
        for v in range(lo // width, -(-hi // width)):
            out.append(f"prod_u.v = {'-' if sign else ''}prod_c{i}_{v};")    # an exact negation
            for j in range(max(lo, width * v), min(hi, width * (v + 1))):
                out.append(f"{name}[{stride * (p.row0 + i) + col + j}] {op} prod_u.d[{j - width * v}];")
    return out


def _left_rows(p: Product) -> tuple[list[str], str, str]:
    """How a general product's loops read ``A``: index arrays to declare, the start of row ``prod_i``
    (``prod_a``) and the entry ``{}`` of that row.  From the scratch array, or in place from the output
    ``p.source`` (a contiguous run of rows or columns is read without an index array)."""
    if p.source is None:
        return [], f"{p.left} + {p.k} * prod_i", "prod_a[{}]"
    src, stride, rows, cols = p.source
    index = []
    if rows == tuple(range(rows[0], rows[0] + len(rows))):
        row = f"{src} + {stride} * ({rows[0]} + prod_i)"
    else:
        index.append(f"const int prod_ri[{len(rows)}] = {{{', '.join(map(str, rows))}}};")
        row = f"{src} + {stride} * prod_ri[prod_i]"
    if cols == tuple(range(cols[0], cols[0] + len(cols))):
        return index, f"{row} + {cols[0]}", "prod_a[{}]"
    index.append(f"const int prod_ci[{len(cols)}] = {{{', '.join(map(str, cols))}}};")
    return index, row, "prod_a[prod_ci[{}]]"


def product_function(p: Product, cname: str, also: tuple[str, ...] = ()) -> tuple[str, list[Stmt]]:
    """C of ``p``, run after the statements: ``(definition, statements of the call)``; ``also``: the
    products that call this definition too (:func:`shared_functions`), named in its comment.

    The loops (:func:`_product_vector_lines` in place, :func:`_general_product_lines` from a scratch array)
    come four times: with GCC or Clang over vectors of 8 doubles with AVX-512 (xArm7 free / B1 + Z1
    forward-dynamics derivatives 1,588 -> 1,548 / 4,267 -> 4,083 ns, medians of 5 alternating fresh
    copies, load 9), 4 with AVX, else 2; otherwise plain scalar loops.  Every lane performs the scalar
    loop's operations in the same order (``-ffp-contract=off``), so all four give the same bits.  The
    loops are a function of their own (``noinline``): inlined at the end of a long straight-line body,
    gcc -O3 made them 2.5x slower (Panda forward-dynamics derivatives: 700 against 280 ns)."""
    what = section_of(p.name) or f"{p.name}: dense product"
    sign = "-" if p.scale < 0 else ""
    name = f"{cname}_prod_{p.name}"
    if p.k:
        lines = functools.partial(_masked_product_lines if p.ranges else _general_product_lines, p)
        args = [p.left, *([p.source[0]] if p.source else []), p.runs[0][0]]
        how = "added to" if p.accumulate else "stored into"
        where = (f"A read in place from {p.source[0]}, B from {p.left}" if p.source
                 else f"A and B from {p.left}")
        head = (f"{name}: {sign}A B, ({p.m} x {p.k}) by ({p.k} x {p.columns}), {where}, {how} "
                f"rows {p.row0}.. of {args[-1]}" + (f", {p.ops()['mul'] // p.k} entries (a mask)" if p.ranges
                                                    else ""))
    else:
        lines = functools.partial(_product_vector_lines, p)
        args = [p.left] + list(dict.fromkeys(r[0] for r in p.runs))
        head = (f"{name} = {sign}{p.left} B, ({p.m} x {p.m}) by ({p.m} x {p.columns}), B read back from the "
                "outputs")
    head += "".join(f"; also {o}" for o in also)
    n_const = 2 if p.k and p.source else 1          # the factors' arrays are read only
    written = args[n_const:]
    args = list(dict.fromkeys(args))      # A read in place from the output the product writes: one pointer
    params = ", ".join(f"double *{o}" if o in written else f"const double *{o}" for o in args)
    ind = "    "
    body = (["#if (defined(__GNUC__) || defined(__clang__)) && !defined(SOADYN_NO_SIMD)",
             "#if defined(__AVX512F__)"]
            + [ind + x for x in lines(8)] + ["#elif defined(__AVX__)"]
            + [ind + x for x in lines(4)] + ["#else"]
            + [ind + x for x in lines(2)] + ["#endif", "#else"]
            + [ind + x for x in lines(1)] + ["#endif"])
    text = (f"/* {c_comment(what)}:\n   {head} */\n"
            + ("#if (defined(__GNUC__) || defined(__clang__)) && !defined(SOADYN_NO_SIMD) "
               "&& defined(__AVX__)\n#include <immintrin.h>\n#endif\n" if p.k and p.symmetric else "")
            + "#if defined(__GNUC__) || defined(__clang__)\n__attribute__((noinline))\n#endif\n"
            f"static void {name}({params})\n{{\n" + "".join(f"{x}\n" for x in body) + "}\n")
    return text, [cp.comment(c_comment(what)), Stmt(cp.PRODUCT, name, args=tuple(args))]


def _canonical(p: Product) -> Product:
    """``p`` with its own name and its arrays' names replaced by their positions among the loop
    function's parameters: two products whose loop functions would differ only in those names have the
    same canonical product."""
    arrays = [p.left, *([p.source[0]] if p.k and p.source else []), *(r[0] for r in p.runs)]
    at = {a: f"a{i}" for i, a in enumerate(dict.fromkeys(arrays))}
    return dataclasses.replace(p, name="shared", left=at[p.left],
                               runs=tuple((at[r[0]], *r[1:]) for r in p.runs),
                               source=None if p.source is None else (at[p.source[0]], *p.source[1:]))


def shared_functions(products: list[Product], cname: str) -> tuple[list[str], list[Stmt]]:
    """The definitions and calls of a function's product loops (:func:`product_function`, in order), one
    definition for the products whose loops are the same but for their arrays (:func:`_canonical`: the
    same shape, the same offsets: TALOS's FD derivatives' blocks of ``dq`` and of ``dv``, six pairs), each
    called with its own arrays: ``(definitions, call statements)``.  The loops run one after the other,
    so the second call finds the code just fetched (TALOS: 8,792 of 23,777 bytes of product loops fewer);
    the same operations on the same entries, the same bits."""
    groups: dict[str, list[Product]] = {}
    for p in products:
        groups.setdefault(product_function(_canonical(p), "")[0], []).append(p)
    owner = {id(p): g[0] for g in groups.values() for p in g}
    texts = [product_function(g[0], cname, tuple(o.name for o in g[1:]))[0] for g in groups.values()]
    calls: list[Stmt] = []
    for p in products:
        *head, call = product_function(p, cname)[1]
        calls += [*head, Stmt(cp.PRODUCT, f"{cname}_prod_{owner[id(p)].name}", args=call.args)]
    return texts, calls


def expanded_products(body: list[Stmt], products: list[Product]) -> list[Stmt]:
    """``body`` (the statements, stores included) with its products as expressions, so that every lane
    rounds exactly as the scalar function.  A general product (``k`` > 0): a factor's scratch entry becomes
    a local ``<scratch>_<i>`` (an entry of ``A`` read in place from an output, ``Product.source``, the local
    ``<output>_s<i>`` stored there), and each result entry ``C + s (a_i0 b_0j + ...)`` is stored after the
    statements, summed left to right like the loops (a symmetric product's entry (i, j), i <= j, also at
    (j, i)); an entry that a later product reads in place becomes that local too (its finished value).
    An in-place product (``k`` = 0, ``s A B`` with ``A`` the output ``left`` and ``B`` stored where
    the result goes): the entries of ``A`` are stored and kept as locals ``<left>_s<i>``, those of ``B``
    become locals ``<output>_b<i>`` instead of stores, and each result entry ``s (a_i0 b_0j + ...)`` is stored
    after the statements, summed left to right like the loops."""
    blocks: dict[tuple[str, int], tuple[Product, int, int]] = {}
    inplace: set[tuple[str, int]] = set()       # B of an in-place product: read, then overwritten
    read: set[tuple[str, int]] = set()          # entries of outputs that a product reads (and keeps)
    for p in products:
        if not p.k:
            read |= {(p.left, e) for e in range(p.m * p.m)}
            inplace |= {(name, stride * r + col + j) for name, stride, col, n in p.runs
                        for r in range(p.m) for j in range(n)}
            continue
        name, stride, col, n = p.runs[0]
        for i in range(p.m):
            for j in _row_columns(p, i):
                blocks[name, stride * (p.row0 + i) + col + j] = (p, i, j)
        if p.source:
            read |= {(p.source[0], p.source[1] * r + c) for r in p.source[2] for c in p.source[3]}
    factors = {p.left for p in products if p.k}
    unread = _unread_factors(products)
    rest: dict[tuple[str, int, int], str] = {}
    out = []
    for s in body:
        if s.kind == cp.STORE and (s.target, s.index) in blocks:
            p, i, j = blocks[s.target, s.index]
            rest[p.name, i, j] = s.expr.text
        elif s.kind == cp.STORE and (s.target, s.index) in unread:
            continue                     # a factor of a term the rows skip (Product.terms): no local
        elif s.kind == cp.STORE and s.target in factors:
            out.append(cp.value(f"{s.target}_{s.index}", s.expr))
        elif s.kind == cp.STORE and (s.target, s.index) in inplace:
            out.append(cp.value(f"{s.target}_b{s.index}", s.expr))
        elif s.kind == cp.STORE and (s.target, s.index) in read:
            local = f"{s.target}_s{s.index}"
            out += [cp.value(local, s.expr), cp.store(s.target, s.index, Expr.of(local))]
        else:
            out.append(s)
    defined = {s.target for s in out if s.kind in cp.VALUES}

    def entry(local: str) -> str:
        return local if local in defined else "0"           # an exact zero is not stored

    def left(p: Product, i: int, c: int) -> str:
        if p.source is None:
            return f"{p.left}_{p.k * i + c}"
        src, stride, rows, cols = p.source
        at = stride * rows[i] + cols[c]
        if src in factors:                                      # another product's scratch array
            return entry(f"{src}_{at}")
        return entry(f"{src}_s{at}")
    for p in products:
        if not p.k:
            sign = "-" if p.scale < 0 else ""
            j = 0
            for name, stride, col, n in p.runs:
                for jj in range(n):
                    for i in range(p.m):
                        terms = " + ".join(f"{entry(f'{p.left}_s{p.m * i + c}')}*"
                                           f"{entry(f'{name}_b{stride * c + col + jj}')}" for c in range(p.m))
                        r = f"{p.left}_{p.name}_r{i}_{j}"
                        out += [cp.value(r, Expr.of(terms)),
                                cp.store(name, stride * i + col + jj, Expr.of(f"{sign}{r}"))]
                    j += 1
            continue
        name, stride, col, n = p.runs[0]
        m_, k = p.m, p.k
        boff = 0 if p.source else m_ * k
        bs = p.bstride or n
        counts = row_counts(p)
        for i in range(m_):
            for j in _row_columns(p, i):
                if p.symmetric and j < i:
                    continue
                terms = " + ".join(f"{left(p, i, c)}*{p.left}_{boff + bs * c + j}" for c in range(counts[i]))
                out.append(cp.value(f"{p.left}_r{i}_{j}", Expr.of(terms)))
                sign, op = ("-", "-") if p.scale < 0 else ("", "+")
                for a, b in ((i, j), (j, i)) if p.symmetric and i != j else ((i, j),):
                    value = (f"{rest.get((p.name, i, j), '0')} {op} ({p.left}_r{i}_{j})" if p.accumulate
                             else f"{sign}{p.left}_r{i}_{j}")
                    at = stride * (p.row0 + a) + col + b
                    if name in factors or (name, at) in inplace:     # B of a later product: its local
                        local = f"{name}_{at}" if name in factors else f"{name}_b{at}"
                        out.append(cp.value(local, Expr.of(value)))
                        defined.add(local)
                    elif (name, at) in read:           # a later product reads the finished entry
                        local = f"{name}_s{at}"
                        out += [cp.value(local, Expr.of(value)), cp.store(name, at, Expr.of(local))]
                        defined.add(local)
                    else:
                        out.append(cp.store(name, at, Expr.of(value)))
    return out


def _unread_factors(products: list[Product]) -> set[tuple[str, int]]:
    """The entries of the scratch arrays of the products that skip terms (``Product.terms``) which no
    product reads: the factors of the skipped terms, which :func:`expanded_products` does not make locals
    (an unused local is a warning, an error under ``-Werror``)."""
    skipping = {p.left: p for p in products if p.k and p.terms}
    if not skipping:
        return set()
    read: set[tuple[str, int]] = set()
    for p in products:
        if not p.k:
            continue
        counts = row_counts(p)
        boff, bs = (0 if p.source else p.m * p.k), p.bstride or p.runs[0][3]
        for i in range(p.m):
            for c in range(counts[i]):
                if p.source is None:
                    read.add((p.left, p.k * i + c))
                else:
                    src, stride, rows, cols = p.source
                    read.add((src, stride * rows[i] + cols[c]))
                read |= {(p.left, boff + bs * c + j) for j in _row_columns(p, i)
                         if not (p.symmetric and j < i)}
    size = {name: p.m * p.k + p.k * (p.bstride or p.runs[0][3]) for name, p in skipping.items()}  # A, then B
    return {(name, e) for name in skipping for e in range(size[name]) if (name, e) not in read}


def _row_columns(p: Product, i: int) -> range:
    """The columns of row ``i`` of a general product's block that it computes (``Product.ranges``)."""
    return range(*p.ranges[i]) if p.ranges else range(p.runs[0][3])


def product_entries(products: list[Product]) -> dict[str, list[int]]:
    """Output -> the entries (row-major indices, in the loops' order) that product loops compute and store
    last: a general product's block rows (those of its mask, :func:`_row_columns`; a symmetric one's
    upper triangle: the entries below it are copies), an in-place product's rows of each run.  Not the
    entries a masked product stores into a later product's factors (a scratch array, not an output)."""
    out: dict[str, list[int]] = {}
    factors = {p.left for p in products if p.k}
    for p in products:
        if p.k:
            name, stride, col, _ = p.runs[0]
            if name in factors:
                continue
            out.setdefault(name, []).extend(stride * (p.row0 + i) + col + j for i in range(p.m)
                                            for j in _row_columns(p, i) if not (p.symmetric and j < i))
        else:
            for name, stride, col, count in p.runs:
                out.setdefault(name, []).extend(stride * i + col + j for i in range(p.m)
                                                for j in range(count))
    return out


def overwritten_entries(products: list[Product]) -> set[tuple[str, int]]:
    """(output, index) of the entries that a general product stores (not adds to): what the statements
    would store there before the product is overwritten, so they store nothing there (B1 + Z1's
    forward-dynamics derivatives: the zeros of 864 entries of ``da_dq`` and ``da_dv`` that the products
    ``M^-1 (-dtau/dx)`` of the legs' and the arm's columns write)."""
    out: set[tuple[str, int]] = set()
    for p in products:
        if p.k and not p.accumulate:
            name, stride, col, _ = p.runs[0]
            out |= {(name, stride * (p.row0 + i) + col + j) for i in range(p.m) for j in _row_columns(p, i)}
    return out


def mirrored_entries(products: list[Product]) -> set[tuple[str, int]]:
    """(output, index) of the entries below the diagonal of a symmetric general product's block: its loop
    copies the entries above the diagonal there (:func:`_general_product_lines`), so the statements do not
    store them (465 stores per call of the four-arm robot's M^-1; the SIMD batch's expressions,
    :func:`expanded_products`, store both triangles themselves)."""
    out: set[tuple[str, int]] = set()
    for p in products:
        if p.k and p.symmetric:
            name, stride, col, _ = p.runs[0]
            out |= {(name, stride * (p.row0 + a) + col + b) for a in range(p.m) for b in range(a)}
    return out
