"""Bounded, strict YAML loading for robot files.

A robot file is data from anywhere, so reading it must take bounded time and memory and must not guess:

* **Bounded**: at most :data:`MAX_BYTES` bytes, nesting at most :data:`MAX_DEPTH` levels, and at most
  :data:`MAX_NODES` values *after alias expansion* (a 650-byte "billion laughs" file of nested aliases
  expands to 10^9 values; it is refused after reading its events, before anything is built).  The limits
  are checked on PyYAML's event stream, whose parser keeps an explicit stack (no recursion), so deep
  nesting gives a clean error instead of a ``RecursionError``.
* **Strict YAML 1.2 core schema**: plain scalars resolve to ``null`` (``~``, ``null``, empty), booleans
  (``true``/``false``), decimal integers without leading zeros and decimal floats (``1.5``, ``1e-3``,
  ``.5``).  YAML 1.1 forms that PyYAML would reinterpret (``010`` -> 8, ``1:30`` -> 90, ``0x10``,
  ``0b11``, ``1_000``, ``yes``/``no``, dates) stay strings, so the schema refuses them where a number is
  expected; :func:`yaml11_hint` says what YAML 1.1 would have read.
* No explicit tags (``!!python/...``, ``!!binary``, ``!!set``, even ``!!float``), no duplicate keys,
  mapping keys must be strings.

Errors are :class:`SafeYamlError` with the line and a message that never formats an unbounded value.
"""

from __future__ import annotations

import re
from typing import Any

import yaml

from soadyn.model.names import brief

MAX_BYTES = 8 * 1024 * 1024
MAX_DEPTH = 64
MAX_NODES = 500_000


class SafeYamlError(ValueError):
    """A YAML document is malformed or over the limits: ``where`` (``line 3, column 5`` or ``""``) and
    ``problem`` (with the fix)."""

    def __init__(self, where: str, problem: str) -> None:
        self.where = where
        self.problem = problem
        super().__init__(f"{where}: {problem}" if where else problem)


def _at(mark: Any) -> str:
    return f"line {mark.line + 1}, column {mark.column + 1}" if mark is not None else ""


_INT = re.compile(r"^[-+]?(?:0|[1-9][0-9]*)$")
_FLOAT = re.compile(r"^[-+]?(?:\.[0-9]+|(?:0|[1-9][0-9]*)(?:\.[0-9]*)?)(?:[eE][-+]?[0-9]+)?$")
_SPECIAL = re.compile(r"^(?:[-+]?\.(?:inf|Inf|INF)|\.(?:nan|NaN|NAN))$")
_NULL = re.compile(r"^(?:~|null|Null|NULL|)$")
_BOOL = re.compile(r"^(?:true|True|TRUE|false|False|FALSE)$")


class _Resolver(yaml.resolver.BaseResolver):
    """The YAML 1.2 core schema's implicit types only (see the module docstring)."""


_Resolver.yaml_implicit_resolvers = {}
_Resolver.add_implicit_resolver("tag:yaml.org,2002:null", _NULL, ["~", "n", "N", ""])
_Resolver.add_implicit_resolver("tag:yaml.org,2002:bool", _BOOL, list("tTfF"))
_Resolver.add_implicit_resolver("tag:yaml.org,2002:int", _INT, list("-+0123456789"))
_Resolver.add_implicit_resolver("tag:yaml.org,2002:float", _FLOAT, list("-+0123456789."))
_Resolver.add_implicit_resolver("tag:yaml.org,2002:float", _SPECIAL, list("-+."))


class _Constructor(yaml.constructor.SafeConstructor):
    """SafeConstructor with strict ints, string keys and no duplicate keys."""


def _construct_int(loader: _Constructor, node: yaml.ScalarNode) -> int:
    text = loader.construct_scalar(node)  # only plain decimal forms reach here (_INT)
    if len(text) > 40:
        raise SafeYamlError(_at(node.start_mark), f"a {len(text)}-digit integer; no quantity of a robot "
                            "file needs more than a few digits, check the value")
    return int(text)


def _construct_float(loader: _Constructor, node: yaml.ScalarNode) -> float:
    text = loader.construct_scalar(node).lower()
    if text.lstrip("+-") == ".inf":
        return float("-inf") if text.startswith("-") else float("inf")
    if text == ".nan":
        return float("nan")
    return float(text)


def _construct_mapping(loader: _Constructor, node: yaml.MappingNode, deep: bool = False) -> dict:
    loader.flatten_mapping(node)
    out: dict = {}
    first: dict[str, yaml.Node] = {}
    for key_node, value_node in node.value:
        key = loader.construct_object(key_node, deep=deep)
        if not isinstance(key, str):
            raise SafeYamlError(_at(key_node.start_mark),
                                f"mapping key {brief(key, 30)} is not a name; keys of a robot file are "
                                "names such as 'mass' (write the key as text)")
        if key in first:
            raise SafeYamlError(_at(key_node.start_mark),
                                f"duplicate key {brief(key, 40)} (first at line "
                                f"{first[key].start_mark.line + 1}); remove one of them")
        first[key] = key_node
        out[key] = loader.construct_object(value_node, deep=deep)
    return out


_Constructor.add_constructor("tag:yaml.org,2002:int", _construct_int)
_Constructor.add_constructor("tag:yaml.org,2002:float", _construct_float)
_Constructor.add_constructor("tag:yaml.org,2002:map", _construct_mapping)


class StrictLoader(yaml.reader.Reader, yaml.scanner.Scanner, yaml.parser.Parser, yaml.composer.Composer,
                   _Constructor, _Resolver):
    """Pure-Python loader of the strict schema."""

    def __init__(self, stream: str) -> None:
        yaml.reader.Reader.__init__(self, stream)
        yaml.scanner.Scanner.__init__(self)
        yaml.parser.Parser.__init__(self)
        yaml.composer.Composer.__init__(self)
        _Constructor.__init__(self)
        _Resolver.__init__(self)


if yaml.__with_libyaml__:
    class _CLoader(yaml.cyaml.CParser, _Constructor, _Resolver):  # libyaml's parser: ~20x faster
        def __init__(self, stream: str) -> None:
            yaml.cyaml.CParser.__init__(self, stream)
            _Constructor.__init__(self)
            _Resolver.__init__(self)

    FAST_LOADER: type = _CLoader
else:  # pragma: no cover
    FAST_LOADER = StrictLoader


def _check_events(text: str) -> None:
    """Depth, expanded size and tags, from the event stream (bounded work per event)."""
    size: dict[str, int] = {}          # anchor -> expanded size of its node
    stack: list[list] = []             # [anchor, count] of the open collections
    total = 0
    docs = 0
    for ev in yaml.parse(text, Loader=FAST_LOADER):
        if isinstance(ev, yaml.DocumentStartEvent):
            docs += 1
            if docs > 1:
                raise SafeYamlError(_at(ev.start_mark), "a second YAML document ('---'); a robot file "
                                    "holds one document, remove the separator or split the file")
        tag = getattr(ev, "tag", None)
        if tag is not None and tag != "!":
            raise SafeYamlError(_at(ev.start_mark), f"explicit YAML tag {brief(tag, 40)} is not allowed in "
                                "a robot file; remove the tag (plain values only)")
        if isinstance(ev, (yaml.SequenceStartEvent, yaml.MappingStartEvent)):
            stack.append([ev.anchor, 1])
            if len(stack) > MAX_DEPTH:
                raise SafeYamlError(_at(ev.start_mark), f"nested deeper than {MAX_DEPTH} levels; a robot "
                                    "file needs a handful, remove the extra nesting")
            continue
        if isinstance(ev, (yaml.SequenceEndEvent, yaml.MappingEndEvent)):
            anchor, n = stack.pop()
            if anchor is not None:
                size[anchor] = n
            if stack:
                stack[-1][1] += n
            total = max(total, n)
        elif isinstance(ev, yaml.ScalarEvent):
            if ev.anchor is not None:
                size[ev.anchor] = 1
            n = 1
            if stack:
                stack[-1][1] += 1
        elif isinstance(ev, yaml.AliasEvent):
            n = size.get(ev.anchor, 1)
            if stack:
                stack[-1][1] += n
        else:
            continue
        if (stack and stack[-1][1] > MAX_NODES) or total > MAX_NODES or n > MAX_NODES:
            raise SafeYamlError(_at(ev.start_mark), f"the document expands to more than {MAX_NODES} "
                                "values (aliases '*name' of aliases multiply); write the values out "
                                "or use fewer aliases")


_FLOW_TOKEN = re.compile(r"[\[\]{}\"'\n]|(?:^|(?<=[ \t]))#", re.M)


def _check_flow_depth(text: str) -> None:
    """Nesting of flow collections (``[[[...``) counted on the raw text, quotes and comments skipped:
    PyYAML's scanner looks ahead across a whole flow collection (quadratic in its depth), so a deep one
    must be refused before the scanner sees it."""
    depth = 0
    quote = ""
    comment = False
    line = 1
    for m in _FLOW_TOKEN.finditer(text):
        t = m.group()
        if t == "\n":
            line += 1
            comment = False
            continue
        if comment:
            continue
        if quote:
            if t == quote:
                quote = ""
            continue
        if t in "\"'":
            quote = t
        elif t == "#":
            comment = True
        elif t in "[{":
            depth += 1
            if depth > MAX_DEPTH:
                raise SafeYamlError(f"line {line}", f"nested deeper than {MAX_DEPTH} levels; a robot "
                                    "file needs a handful, remove the extra nesting")
        else:
            depth = max(0, depth - 1)


def load(raw: bytes) -> Any:
    """Parse one robot-file YAML document under the limits and the strict schema of this module."""
    if len(raw) > MAX_BYTES:
        raise SafeYamlError("", f"the file has {len(raw)} bytes, more than the limit of {MAX_BYTES}; a "
                            "robot file is a few kB to a few MB")
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError as e:
        raise SafeYamlError("", f"not UTF-8 text (byte {e.start}); a robot file must be a UTF-8 YAML "
                            "file") from None
    try:
        _check_flow_depth(text)
        _check_events(text)
        return yaml.load(text, Loader=FAST_LOADER)  # noqa: S506 - a SafeConstructor with the strict schema
    except SafeYamlError:
        raise
    except yaml.MarkedYAMLError as e:
        mark = e.problem_mark or e.context_mark
        problem = brief(str(e.problem), 160)[1:-1] + (f" ({brief(str(e.context), 80)[1:-1]})"
                                                      if e.context else "")
        raise SafeYamlError(_at(mark), f"YAML syntax error: {problem}; fix the YAML syntax") from None
    except yaml.YAMLError as e:
        raise SafeYamlError("", f"YAML error: {brief(str(e), 160)[1:-1]}; fix the YAML syntax") from None
    except RecursionError:  # pragma: no cover - MAX_DEPTH keeps the composer far from the limit
        raise SafeYamlError("", f"nested too deeply; keep the nesting under {MAX_DEPTH} levels") from None


_YAML11_NUMBER = re.compile(
    r"^[-+]?(?:0[0-9_]+(?:\.[0-9_]*)?|0x[0-9a-fA-F_]+|0o?[0-7_]+|0b[01_]+|[0-9][0-9_]*(?::[0-5]?[0-9])+"
    r"(?:\.[0-9_]*)?|[0-9][0-9_]*_[0-9_]*(?:\.[0-9_]*)?(?:[eE][-+]?[0-9]+)?|\.[0-9_]+_[0-9_]*)$")


def yaml11_hint(value: Any) -> str:
    """For a string that YAML 1.1 (PyYAML's default) would have read as a number: ``"; '010' is not a
    plain decimal number (YAML 1.1 would read 8), write the decimal value"``; else ``""``."""
    if not isinstance(value, str) or len(value) > 40 or not _YAML11_NUMBER.match(value.strip()):
        return ""
    try:
        old = yaml.safe_load(value)
    except yaml.YAMLError:  # pragma: no cover
        return ""
    reading = f" (YAML 1.1 would read {old!r})" if isinstance(old, (int, float)) else ""
    return (f"; {value!r} is not a plain decimal number{reading}: robot files follow YAML 1.2, write the "
            "decimal value, e.g. 10 or 0.5")
