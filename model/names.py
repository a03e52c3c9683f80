"""Names are data, never code: one escaping (or validation) function per place a name can reach.

A robot file may name its robot, bodies, joints and frames with any string (quotes, backslashes, comment
terminators, newlines, NUL, control, bidi and non-BMP characters, 10,000 characters...).  Every such
string reaches generated text only through exactly one of these functions, chosen by the target:

=========================  ==================  ========================================================
target                     function            guarantee
=========================  ==================  ========================================================
C identifier               :func:`c_identifier`  ``[A-Za-z_][A-Za-z0-9_]*``, at most ~60 characters, no C
                                               keyword; generated (a hash keeps long names distinct),
                                               never the name verbatim
C block comment            :func:`c_comment`   printable ASCII without backslash, ``*/``, ``/*`` or
                                               ``??`` (trigraphs); other characters as ``<U+XXXX>``
C string literal           :func:`c_string`    printable ASCII between quotes, everything else as octal
                                               escapes of the UTF-8 bytes; ``?`` escaped
Python string literal      :func:`py_literal`  ``ascii()``: ASCII, round-trips exactly (non-BMP too)
Python docstring text      :func:`py_doc`      ASCII, no quote or backslash sequence that ends the string
module / file name         :func:`module_name`  an identifier of at most 64 characters that shadows no
                                               standard-library or built-in module and does not start
                                               with ``_``; file names are ``<module>.<ext>``
terminal output            :func:`terminal`    no control, format (bidi), separator or surrogate
                                               characters (escaped as ``\\xNN``, ``\\uNNNN``); bounded
message value              :func:`brief`       a ``repr`` cut to a bounded length
=========================  ==================  ========================================================

This module imports nothing else of soadyn, so the model (error messages) and code generation share it.
"""

from __future__ import annotations

import hashlib
import keyword
import re
import sys
import unicodedata

C_KEYWORDS = frozenset(
    "auto break case char const continue default do double else enum extern float for goto if inline int "
    "long register restrict return short signed sizeof static struct switch typedef union unsigned void "
    "volatile while _Bool _Complex _Imaginary".split()
)

#: longest identifier fragment derived from a name (longer names are cut and get a hash suffix)
IDENT_MAX = 48
#: longest module (and file stem) name
MODULE_MAX = 64


def _digest(text: str, n: int = 8) -> str:
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:n]


def c_identifier(name: str, max_len: int = IDENT_MAX) -> str:
    """A C (and Python) identifier generated from an arbitrary name.

    Non-ASCII-word characters become ``_``; a leading digit gets ``_`` in front; a C or Python keyword
    gets ``_`` appended.  When the name is longer than ``max_len`` characters the result is cut and
    ``_<8 hex digits of its sha256>`` appended, so distinct long names stay distinct.  The output
    alphabet is ``[A-Za-z0-9_]`` whatever the input.
    """
    name = str(name)
    s = re.sub(r"[^A-Za-z0-9_]", "_", name)
    if len(s) > max_len:
        s = s[:max_len] + "_" + _digest(name)
    if not s or s[0].isdigit():
        s = "_" + s
    if s in C_KEYWORDS or keyword.iskeyword(s):
        s = s + "_"
    return s


def module_name(robot_name: str) -> str:
    """The Python module (and directory/file stem) name of a robot's compiled module.

    An identifier (:func:`c_identifier`, at most :data:`MODULE_MAX` characters), never starting with
    ``_`` (``__init__`` becomes ``robot_init__``), with ``_robot`` appended when it would shadow a
    standard-library or built-in module (``json`` -> ``json_robot``).  Deterministic: it does not depend
    on what else is installed (the loader, :func:`soadyn.codegen.load.load`, never registers a module
    under a name that another importable module already uses).
    """
    s = c_identifier(robot_name, MODULE_MAX - 16)
    if s.startswith("_"):
        s = "robot_" + s.lstrip("_")
    if s in getattr(sys, "stdlib_module_names", ()) or s in sys.builtin_module_names:
        s = f"{s}_robot"
    return s


def _uplus(ch: str) -> str:
    return f"<U+{ord(ch):04X}>"


def c_comment(text: object, limit: int = 240) -> str:
    """Text safe inside a C block comment on one line.

    Printable ASCII is kept except ``\\`` (line splices); everything else, and any ``/`` after ``*``,
    ``*`` after ``/`` and ``?`` after ``?`` (trigraphs), is written ``<U+XXXX>``.  Runs of white space
    become one space; more than ``limit`` characters are cut (``...``).
    """
    s = re.sub(r"[ \t]+", " ", str(text)).strip(" ")
    out: list[str] = []
    prev = ""
    for ch in s[:limit]:
        if not (" " <= ch <= "~") or ch == "\\" or (prev, ch) in (("*", "/"), ("/", "*"), ("?", "?")):
            out.append(_uplus(ch))
            prev = ">"
        else:
            out.append(ch)
            prev = ch
    if len(s) > limit:
        out.append(f" ...({len(s)} characters)")
    return "".join(out)


def c_string(text: str) -> str:
    """A C string literal (with the quotes) holding the UTF-8 bytes of ``text`` exactly.

    Printable ASCII other than ``"``, ``\\`` and ``?`` is written as is, every other byte as a
    three-digit octal escape (unambiguous whatever follows).
    """
    out = ['"']
    for b in str(text).encode("utf-8", "surrogatepass"):
        ch = chr(b)
        if 0x20 <= b <= 0x7E and ch not in '"\\?':
            out.append(ch)
        else:
            out.append(f"\\{b:03o}")
    out.append('"')
    return "".join(out)


def py_literal(text: str) -> str:
    """A Python string literal of ``text``: ASCII only, evaluates to ``text`` exactly (non-BMP
    characters as ``\\U0001F600``, not as surrogate pairs)."""
    return ascii(str(text))


def py_doc(text: object, limit: int = 240) -> str:
    """Text safe inside a (non-raw) triple-quoted Python docstring: ASCII, backslashes and quotes
    escaped, at most ``limit`` characters of the input."""
    s = str(text)
    cut = len(s) > limit
    s = s[:limit].encode("unicode_escape").decode("ascii").replace('"', '\\"')
    return s + (f" ...({len(str(text))} characters)" if cut else "")


_UNSAFE_CATEGORIES = frozenset({"Cc", "Cf", "Cs", "Co", "Cn", "Zl", "Zp"})


def terminal(text: object, limit: int | None = None) -> str:
    """``text`` safe to print on a terminal: control, format (bidi overrides), private, unassigned,
    separator and surrogate characters are written as ``\\xNN``/``\\uNNNN``/``\\UNNNNNNNN``; newlines and
    tabs too unless they are plain line breaks of a multi-line text (``\\n`` is kept).  Printable
    characters (emoji included) are kept.  ``limit``: cut after that many characters (``...``)."""
    s = str(text)
    cut = limit is not None and len(s) > limit
    if cut:
        s = s[:limit]
    out = []
    for ch in s:
        if ch == "\n" or (ch.isprintable() and unicodedata.category(ch) not in _UNSAFE_CATEGORIES):
            out.append(ch)
        else:
            o = ord(ch)
            out.append(f"\\x{o:02x}" if o < 0x100 else f"\\u{o:04x}" if o < 0x10000 else f"\\U{o:08x}")
    return "".join(out) + (f"...({len(str(text))} characters)" if cut else "")


def brief(value: object, limit: int = 60) -> str:
    """A bounded, terminal-safe ``repr`` of a value for an error message: strings are cut after
    ``limit`` characters, containers show at most 6 entries and 3 levels, big integers are described by
    their number of digits.  The work done is bounded too, whatever the value."""
    budget = [4 * limit]

    def rec(x: object, depth: int) -> str:
        if budget[0] <= 0:
            return "..."
        if isinstance(x, bool) or x is None or isinstance(x, float):
            r = repr(x)
        elif isinstance(x, int):
            r = repr(x) if x.bit_length() <= 64 else (
                f"<{len(str(abs(x)))}-digit integer>" if x.bit_length() < 20000 else "<huge integer>")
        elif isinstance(x, str):
            r = repr(x[:limit]) + (f"...({len(x)} characters)" if len(x) > limit else "")
        elif isinstance(x, (list, tuple)):
            if depth >= 3:
                return "[...]"
            items = [rec(e, depth + 1) for e in x[:6]]
            r = "[" + ", ".join(items) + (f", ...({len(x)} entries)" if len(x) > 6 else "") + "]"
        elif isinstance(x, dict):
            if depth >= 3:
                return "{...}"
            items = [f"{rec(k, depth + 1)}: {rec(v, depth + 1)}" for k, v in list(x.items())[:6]]
            r = "{" + ", ".join(items) + (f", ...({len(x)} entries)" if len(x) > 6 else "") + "}"
        else:
            r = f"<{type(x).__name__}>"
        budget[0] -= len(r)
        return r

    return terminal(rec(value, 0), 8 * limit)
