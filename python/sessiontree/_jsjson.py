"""JavaScript value semantics that Pi's output depends on, for parsed-JSON Python values.

Pi is written in TypeScript; the numbers it reports (token estimates, fingerprints,
message timestamps) come from three JavaScript primitives that Python does not share:

* ``JSON.stringify`` -> :func:`js_stringify` (key order kept, JS number formatting,
  lone surrogates escaped as ``\\udXXX``, integer-like keys first like a JS object);
* ``string.length`` -> :func:`js_len` (UTF-16 code units); the default ``Array.prototype.sort()``
  order of strings -> :func:`js_utf16_key`; ``string.slice(0, n)`` kept whole-character ->
  :func:`js_utf16_prefix`;
* ``Object.entries(x)`` -> :func:`js_object_entries`;
* ``new Date(x).getTime()`` -> :func:`js_date_parse` (ISO-8601 parsing, ``NaN`` on garbage;
  strings go to the Rust core's parser, the one home of the rule);
* ``string.trim()`` -> :func:`js_trim`;
* truthiness (``if (x)``, ``!x``) -> :func:`js_truthy`;
* property access ``obj.key`` (``undefined`` when missing, ``TypeError`` on null/undefined)
  -> :func:`js_get`.

Values are what :func:`json.loads` produces: ``dict`` (insertion order = file order),
``list``, ``str``, ``int``, ``float``, ``bool`` and ``None``.

    >>> js_stringify({"a": 1.0, "b": [1e21, 1.5e-7, "\\ud800"]})
    '{"a":1,"b":[1e+21,1.5e-7,"\\\\ud800"]}'
    >>> js_len("😀")
    2
    >>> js_date_parse("2026-01-16T03:12:09.462Z")
    1768533129462.0
"""

from __future__ import annotations

import math
import re
from types import ModuleType
from typing import Any

try:  # the C implementation json.encoder uses, without loading the json package (its decoder, scanner)
    from _json import encode_basestring as _encode_str  # non-ASCII kept raw
except ImportError:  # pragma: no cover - an interpreter without the _json accelerator
    from json.encoder import encode_basestring as _encode_str

from . import _core

_orjson: ModuleType | None
try:  # C-speed fast path; the pure-Python writer below is always correct on its own.
    import orjson as _orjson
except ImportError:  # pragma: no cover - orjson is a hard dependency, but stay importable
    _orjson = None

__all__ = [
    "JS_UNDEFINED",
    "js_field",
    "entry_id",
    "entry_type",
    "message_role",
    "js_stringify",
    "js_stringify_bytes",
    "js_stringify_len",
    "js_len",
    "js_utf16_key",
    "js_utf16_prefix",
    "js_object_entries",
    "js_number_to_string",
    "js_to_string",
    "js_date_parse",
    "js_trim",
    "js_truthy",
    "js_get",
    "js_usage_number",
    "js_whole_numbers",
    "JS_WHITESPACE",
]


class _Undefined:
    """JavaScript ``undefined``: the value of a missing property (distinct from ``None`` = null)."""

    __slots__ = ()

    def __repr__(self) -> str:
        return "JS_UNDEFINED"

    def __bool__(self) -> bool:
        return False


JS_UNDEFINED: Any = _Undefined()


# ==== Truthiness and property access ==========================================


def js_truthy(value: Any) -> bool:
    """JavaScript ``Boolean(value)`` for a parsed-JSON value.

    Falsy: ``undefined``, ``null``, ``false``, ``0``, ``-0``, ``NaN`` and ``""``. Everything
    else is truthy, including ``"0"``, ``" "``, ``[]`` and ``{}`` (unlike Python's ``bool``).

        >>> [js_truthy(v) for v in (0, -0.0, float("nan"), "", None, JS_UNDEFINED, False)]
        [False, False, False, False, False, False, False]
        >>> [js_truthy(v) for v in ("0", [], {}, 1, -1.5, True)]
        [True, True, True, True, True, True]
    """
    if value is None or value is JS_UNDEFINED or value is False:
        return False
    if isinstance(value, (int, float)):
        return value == value and value != 0  # NaN and +-0 are falsy
    if isinstance(value, str):
        return value != ""
    return True


def js_get(obj: Any, key: str, error: type = TypeError) -> Any:
    """JavaScript ``obj[key]`` for a parsed-JSON value; :data:`JS_UNDEFINED` when missing.

    Objects (dicts) give the property; strings and arrays have a ``length`` (UTF-16 code
    units for strings); other properties of primitives and arrays are ``undefined``. On
    ``null`` / ``undefined`` JavaScript throws: ``error`` is raised with V8's text,
    ``"TypeError: Cannot read properties of null (reading 'key')"`` (callers pass the
    :class:`sessiontree.errors.PiError` subclass of their module).
    """
    if isinstance(obj, dict):
        return obj.get(key, JS_UNDEFINED)
    if obj is None or obj is JS_UNDEFINED:
        what = "null" if obj is None else "undefined"
        raise error(f"TypeError: Cannot read properties of {what} (reading '{key}')")
    if key == "length":
        if isinstance(obj, str):
            return js_len(obj)
        if isinstance(obj, list):
            return len(obj)
    return JS_UNDEFINED


# ==== Entry accessors (one missing-value rule) ==================================


def js_field(value: Any, key: str) -> Any:
    """``value?.[key]`` for a parsed entry or message, as Pi's code reads a field it does not
    validate: the property when ``value`` is an object (dict) that has it, else
    :data:`JS_UNDEFINED`. A missing field is ``undefined``, never ``None`` (JSON ``null`` stays
    ``None``): Pi's ``undefined !== null``, so ids, types and roles keep the difference."""
    return value.get(key, JS_UNDEFINED) if isinstance(value, dict) else JS_UNDEFINED


def entry_id(entry: Any) -> Any:
    """``entry.id`` (:func:`js_field`): :data:`JS_UNDEFINED` when missing."""
    return js_field(entry, "id")


def entry_type(entry: Any) -> Any:
    """``entry.type`` (:func:`js_field`): :data:`JS_UNDEFINED` when missing."""
    return js_field(entry, "type")


def message_role(message: Any) -> Any:
    """``message.role`` when it is a string, else :data:`JS_UNDEFINED`: a role of another type
    (an object from a hostile file) equals no role name in Pi, and must not reach a set lookup."""
    role = js_field(message, "role")
    return role if isinstance(role, str) else JS_UNDEFINED


# ==== JSON.stringify ==========================================================

# The fast writer is orjson's text made JSON.stringify's by the Rust core's linear pass
# (_core.js_text, the one home of the JS number text: ryu_js): `1.0` -> `1`, `-0.0` -> `0`,
# `1e+16` -> `10000000000000000`, integers beyond 2**53 rounded to a double. Values orjson
# cannot write (lone surrogates, ints beyond 64 bits, non-str keys, JS_UNDEFINED) and objects
# with array-index keys (`{"1":`, which a JS object enumerates first in ascending order) take
# the pure-Python writer, whose numbers come from js_number_to_string (tests/core/
# test_append_bytes_js_exact.py checks the two against each other).
# Patterns as text, compiled by `re` on first use (its cache keeps them): a light import.
_SURROGATE = "[\ud800-\udfff]"
_SURROGATE_PAIR_OR_LONE = "[\ud800-\udbff][\udc00-\udfff]|[\ud800-\udfff]"
_ARRAY_INDEX_MAX = 2**32 - 2
_MAX_SAFE = 2**53


def js_usage_number(value: Any) -> int | float:
    """What a parsed-JSON usage field adds in Pi's sums (``x + usage.input``, ``total +=
    cost.total``, e.g. ``calculateContextTokens``, ``getSessionStats``): numbers as they are (NaN
    and infinities included), ``null`` 0, booleans 0/1, a missing field (:data:`JS_UNDEFINED`)
    and anything else NaN.

    JavaScript would concatenate a string operand (``1 + "2"`` is ``"12"``); Pi's usage fields
    are numbers or null, and this model counts any other value as NaN
    (tests/pi_rules/test_js_usage_number.py pins every case).
    """
    if value is None:
        return 0
    if isinstance(value, bool):
        return int(value)
    if isinstance(value, (int, float)):
        return value
    return math.nan


def js_whole_numbers(value: Any) -> Any:
    """``value`` with whole-number floats as ints, in dicts too (JavaScript writes ``0``, not ``0.0``)."""
    if isinstance(value, float) and value.is_integer() and abs(value) < 2**53:
        return int(value)
    if isinstance(value, dict):
        return {k: js_whole_numbers(v) for k, v in value.items()}
    return value


def js_number_to_string(x: float | int) -> str:
    """JavaScript ``Number.prototype.toString()`` of a number (``String(x)``).

    ``NaN``/``Infinity`` give ``"NaN"``/``"Infinity"``/``"-Infinity"`` (JSON.stringify writes
    ``null`` for those instead; :func:`js_stringify` handles that). Python ints are first
    rounded to the nearest double, as ``JSON.parse`` would have done.

        >>> [js_number_to_string(v) for v in (1.0, 1e21, 1.5e-7, 1e-6, 2**64, -0.0)]
        ['1', '1e+21', '1.5e-7', '0.000001', '18446744073709552000', '0']
    """
    if isinstance(x, bool):
        return "1" if x else "0"
    if isinstance(x, int):
        if -_MAX_SAFE <= x <= _MAX_SAFE:
            return str(x)
        try:
            x = float(x)
        except OverflowError:
            return "Infinity" if x > 0 else "-Infinity"
    if x != x:
        return "NaN"
    if x in (math.inf, -math.inf):
        return "Infinity" if x > 0 else "-Infinity"
    if x == 0:
        return "0"
    sign = "-" if x < 0 else ""
    r = repr(abs(x))  # shortest round-trip digits, like ECMAScript Number::toString
    mant, _, exp = r.partition("e")
    ip, _, fp = mant.partition(".")
    all_digits = ip + fp
    # value = 0.<all_digits> * 10**n; every leading zero dropped moves the point left
    stripped = all_digits.lstrip("0")
    n = len(ip) + (int(exp) if exp else 0) - (len(all_digits) - len(stripped))
    digits = stripped.rstrip("0") or "0"
    k = len(digits)
    if k <= n <= 21:
        return sign + digits + "0" * (n - k)
    if 0 < n <= 21:
        return sign + digits[:n] + "." + digits[n:]
    if -6 < n <= 0:
        return sign + "0." + "0" * (-n) + digits
    e = n - 1
    es = ("+" if e >= 0 else "-") + str(abs(e))
    if k == 1:
        return sign + digits + "e" + es
    return sign + digits[0] + "." + digits[1:] + "e" + es


def _is_array_index(key: str) -> bool:
    if not key or not key.isdigit() or not key.isascii():
        return False
    if key[0] == "0" and len(key) > 1:
        return False
    return len(key) <= 10 and int(key) <= _ARRAY_INDEX_MAX


def _js_key_order(d: dict[str, Any]) -> list[Any]:
    """Keys of ``d`` in JS enumeration order: array-index keys ascending, then the rest."""
    keys = list(d)
    idx = [k for k in keys if isinstance(k, str) and _is_array_index(k)]
    if not idx:
        return keys
    idx.sort(key=int)
    return idx + [k for k in keys if not (isinstance(k, str) and _is_array_index(k))]


def _members(d: dict[str, Any]) -> Any:
    for k in _js_key_order(d):
        v = d[k]
        if v is not JS_UNDEFINED:  # JSON.stringify drops undefined-valued keys
            yield k, v


def _slow(value: Any, out: list[Any]) -> None:
    """Pure-Python JSON.stringify writer (appends pieces to ``out``).

    Iterative: nesting depth costs a list slot per level, never a Python frame (content
    nested thousands deep is valid JSON that Pi serializes)."""
    # open containers: [iterator over members or items, is_object, first]
    frames: list[Any] = []
    v = value
    while True:
        t = type(v)
        if t is str:
            out.append(_encode_str(v))
        elif v is None or v is JS_UNDEFINED:
            out.append("null")
        elif v is True:
            out.append("true")
        elif v is False:
            out.append("false")
        elif isinstance(v, (int, float)):
            if isinstance(v, float) and (v != v or v in (math.inf, -math.inf)):
                out.append("null")
            else:
                n = js_number_to_string(v)
                out.append("null" if n in ("Infinity", "-Infinity") else n)
        elif isinstance(v, dict):
            out.append("{")
            frames.append([_members(v), True, True])
        elif isinstance(v, (list, tuple)):
            out.append("[")
            frames.append([iter(v), False, True])
        elif isinstance(v, str):  # str subclass
            out.append(_encode_str(str(v)))
        else:
            raise TypeError(f"js_stringify: not a JSON value: {type(v).__name__}")
        # the next value to write, closing finished containers
        while frames:
            f = frames[-1]
            nxt = next(f[0], _END)
            if nxt is _END:
                out.append("}" if f[1] else "]")
                frames.pop()
                continue
            if not f[2]:
                out.append(",")
            f[2] = False
            if f[1]:
                k, nxt = nxt
                out.append(_encode_str(k if isinstance(k, str) else js_to_string(k)))
                out.append(":")
            v = nxt
            break
        else:
            return


_END: Any = object()


def _fix_surrogates(s: str) -> str:
    def repl(m: re.Match[str]) -> str:
        g = m.group()
        if len(g) == 2:  # a high+low pair is one valid UTF-16 character to JS
            return chr(0x10000 + ((ord(g[0]) - 0xD800) << 10) + (ord(g[1]) - 0xDC00))
        return "\\u%04x" % ord(g)

    return re.sub(_SURROGATE_PAIR_OR_LONE, repl, s)


def _slow_str(value: Any) -> str:
    out: list[Any] = []
    _slow(value, out)
    s = "".join(out)
    if re.search(_SURROGATE, s):
        s = _fix_surrogates(s)
    return s


def _fast(value: Any) -> bytes | None:
    """orjson output made JS-identical, or None when only the pure-Python writer will do."""
    if _orjson is None:
        return None
    try:
        out = _orjson.dumps(value)
    except TypeError:  # lone surrogate, int beyond 64 bits, non-str key, JS_UNDEFINED...
        return None
    return _core.js_text(out)


def js_stringify_bytes(value: Any) -> bytes:
    """UTF-8 bytes of :func:`js_stringify` (what Pi's fingerprints hash)."""
    out = _fast(value)
    return out if out is not None else _slow_str(value).encode("utf-8")


def js_stringify(value: Any) -> str:
    """JavaScript ``JSON.stringify(value)`` for a parsed-JSON Python value.

    No whitespace; dict keys in insertion order except array-index keys (``"0"``, ``"17"``),
    which come first in ascending order as in any JS object; numbers formatted like JS
    (``1.0`` -> ``1``, ``1e21`` -> ``1e+21``, ``1.5e-7`` -> ``1.5e-7``, ints beyond 2**53
    rounded to a double); ``NaN``/``inf`` -> ``null``; strings escape only ``"``, ``\\``
    and control characters below U+0020 (``\\b \\f \\n \\r \\t``, others ``\\u00xx``), lone
    surrogates become ``\\udxxx``; everything else is written raw. Dict values equal to
    :data:`JS_UNDEFINED` are omitted, like undefined-valued properties.

    Raises ``TypeError`` for values JSON cannot hold (sets, objects, ...).

        >>> js_stringify({"b": "é\\n", "2": 0.5, "1": [True, None]})
        '{"1":[true,null],"2":0.5,"b":"é\\\\n"}'
    """
    out = _fast(value)
    return out.decode("utf-8") if out is not None else _slow_str(value)


# ==== UTF-16 lengths ==========================================================

_UTF8_CONT = bytes(range(0x80, 0xC0))
_UTF8_LEAD4 = bytes(range(0xF0, 0xF8))


def js_len(s: str) -> int:
    """JavaScript ``s.length``: UTF-16 code units (astral characters count 2, a lone surrogate 1).

    >>> js_len("héllo"), js_len("😀"), js_len("e\\u0301"), js_len("\\ud800")
    (5, 2, 2, 1)
    """
    if s.isascii():
        return len(s)
    return len(s.encode("utf-16-le", "surrogatepass")) >> 1


def js_utf16_key(text: str) -> bytes:
    """Sort key for JavaScript's default ``Array.prototype.sort()`` of strings: UTF-16 code
    unit order, not Python's code-point order. An astral character sorts by its high surrogate
    (U+D800-U+DBFF), so it comes *before* U+E000-U+FFFF characters.

        >>> sorted(["\\uff46", "\\U0001f600"], key=js_utf16_key) == ["\\U0001f600", "\\uff46"]
        True
    """
    return text.encode("utf-16-be", "surrogatepass")


def js_utf16_prefix(text: str, units: int) -> str:
    """Longest prefix of ``text`` spanning at most ``units`` UTF-16 code units (JavaScript
    ``text.slice(0, units)``), except that it never ends inside a surrogate pair: an astral
    character counts 2 units and is kept whole or dropped whole.

        >>> [js_utf16_prefix("a\\U0001f600b", n) for n in (2, 3)] == ["a", "a\\U0001f600"]
        True
    """
    used = 0
    for index, char in enumerate(text):
        used += 2 if ord(char) > 0xFFFF else 1
        if used > units:
            return text[:index]
    return text


def _utf16_len_of_utf8(b: bytes) -> int:
    if b.isascii():
        return len(b)
    chars = len(b.translate(None, _UTF8_CONT))
    astral = len(b) - len(b.translate(None, _UTF8_LEAD4))
    return chars + astral


def js_stringify_len(value: Any) -> int:
    """``JSON.stringify(value).length`` in UTF-16 code units, without building a ``str``."""
    return _utf16_len_of_utf8(js_stringify_bytes(value))


# ==== String(x) ================================================================


def js_to_string(value: Any) -> str:
    """JavaScript ``String(value)`` / template-literal conversion of a parsed-JSON value.

    >>> [js_to_string(v) for v in (None, JS_UNDEFINED, True, 3.0, [1, None, "a"], {})]
    ['null', 'undefined', 'true', '3', '1,,a', '[object Object]']
    """
    if isinstance(value, str):
        return value
    if value is None:
        return "null"
    if value is JS_UNDEFINED:
        return "undefined"
    if value is True:
        return "true"
    if value is False:
        return "false"
    if isinstance(value, (int, float)):
        return js_number_to_string(value)
    if isinstance(value, (list, tuple)):
        # Array.prototype.join, nested arrays joined in place (iteratively: no frame per level)
        parts: list[Any] = []
        frames: list[Any] = [[iter(value), True]]
        while frames:
            f = frames[-1]
            v = next(f[0], _END)
            if v is _END:
                frames.pop()
                continue
            if not f[1]:
                parts.append(",")
            f[1] = False
            if v is None or v is JS_UNDEFINED:
                continue
            if isinstance(v, (list, tuple)) and not isinstance(v, str):
                frames.append([iter(v), True])
            else:
                parts.append(js_to_string(v))
        return "".join(parts)
    return "[object Object]"


# ==== Object.entries ============================================================


def js_object_entries(value: Any, error: type = TypeError) -> list[Any]:
    """JavaScript ``Object.entries(value)`` for a parsed-JSON value, as ``(key, value)`` pairs.

    An object gives its properties in order, an array ``("0", item), ("1", item)...``, a string
    one entry per UTF-16 code unit (an astral character gives its two lone surrogates), other
    primitives ``[]``. On ``null`` / ``undefined`` JavaScript throws: ``error`` is raised with
    V8's text ``"TypeError: Cannot convert undefined or null to object"`` (callers pass the
    :class:`sessiontree.errors.PiError` subclass of their module).

        >>> js_object_entries({"a": 1}), js_object_entries([True]), js_object_entries(7)
        ([('a', 1)], [('0', True)], [])
        >>> js_object_entries("a\\U0001f600") == [("0", "a"), ("1", "\\ud83d"), ("2", "\\ude00")]
        True
    """
    if isinstance(value, dict):
        return list(value.items())
    if isinstance(value, list):
        return [(str(i), v) for i, v in enumerate(value)]
    if isinstance(value, str):  # one entry per UTF-16 code unit
        raw = value.encode("utf-16-be", "surrogatepass")
        return [(str(i), raw[2 * i : 2 * i + 2].decode("utf-16-be", "surrogatepass")) for i in range(len(raw) // 2)]
    if value is None or value is JS_UNDEFINED:
        raise error("TypeError: Cannot convert undefined or null to object")
    return []


# ==== String.prototype.trim ======================================================

#: JavaScript's WhiteSpace + LineTerminator characters (what ``trim()`` removes). Not
#: ``\x1c``-``\x1f`` or ``\x85``, which Python's ``str.strip()`` also removes. The Rust twin is
#: ``jsdate::is_js_whitespace`` (used by its date parser); ``tests/parity/test_parity_js_rules.py`` pins
#: the two sets to each other over every code point.
JS_WHITESPACE = (
    "\t\n\v\f\r \u00a0\u1680\u2000\u2001\u2002\u2003\u2004\u2005\u2006\u2007\u2008\u2009\u200a"
    "\u2028\u2029\u202f\u205f\u3000\ufeff"
)


def js_trim(text: str) -> str:
    """JavaScript ``text.trim()``.

    >>> js_trim("\\u00a0 name\\u3000"), js_trim("\\x1fname\\x85")
    ('name', '\\x1fname\\x85')
    """
    return text.strip(JS_WHITESPACE)


# ==== Number(x) and x + y ======================================================

_DIGITS = frozenset("0123456789")
_RADIX_DIGITS = {
    "x": (16, frozenset("0123456789abcdefABCDEF")),
    "o": (8, frozenset("01234567")),
    "b": (2, frozenset("01")),
}


def _decimal_literal(t: str) -> bool:
    """True when ``t`` (no sign) is a StrUnsignedDecimalLiteral without ``Infinity``: digits,
    an optional ``.`` and digits (at least one digit in all), an optional exponent. One pass."""
    n, i, seen = len(t), 0, 0
    while i < n and t[i] in _DIGITS:
        i += 1
    seen = i
    if i < n and t[i] == ".":
        i += 1
        j = i
        while i < n and t[i] in _DIGITS:
            i += 1
        seen += i - j
    if seen == 0:
        return False
    if i < n and t[i] in "eE":
        i += 1
        if i < n and t[i] in "+-":
            i += 1
        j = i
        while i < n and t[i] in _DIGITS:
            i += 1
        if i == j:
            return False
    return i == n


def js_string_to_number(text: str) -> float:
    """JavaScript ``Number(text)`` for a string (ECMA-262 StringToNumber), in linear time.

    >>> [js_string_to_number(t) for t in ("", " 12 ", "0x10", "1e3", "-Infinity", ".5", "1_0")]
    [0.0, 12.0, 16.0, 1000.0, -inf, 0.5, nan]
    """
    t = js_trim(text)
    if not t:
        return 0.0
    if len(t) > 2 and t[0] == "0" and t[1].lower() in _RADIX_DIGITS:
        base, ok = _RADIX_DIGITS[t[1].lower()]
        body = t[2:]
        if not all(c in ok for c in body):
            return math.nan
        try:
            return float(int(body, base))
        except OverflowError:
            return math.inf
    sign = -1.0 if t[0] == "-" else 1.0
    body = t[1:] if t[0] in "+-" else t
    if body == "Infinity":
        return sign * math.inf
    if not _decimal_literal(body):
        return math.nan
    return float(t)  # validated above: float() reads the same literal (inf past the range)


def js_to_primitive(value: Any, error: type = TypeError) -> Any:
    """JavaScript ``ToPrimitive`` of a parsed-JSON value (default hint): primitives as they
    are, arrays and objects as their ``String()``. An object with its own ``toString`` key
    (never a function in JSON) has no primitive: ``error`` is raised with V8's text, also when
    such an object sits anywhere inside an array (``Array.prototype.join`` converts it).
    Iterative: no frame per nesting level."""
    if isinstance(value, dict):
        if "toString" in value:
            raise error("TypeError: Cannot convert object to primitive value")
        return "[object Object]"
    if isinstance(value, list):
        stack = [value]
        while stack:
            for item in stack.pop():
                if isinstance(item, dict) and "toString" in item:
                    raise error("TypeError: Cannot convert object to primitive value")
                if isinstance(item, list):
                    stack.append(item)
        return js_to_string(value)
    return value


def js_add(left: Any, right: Any, error: type = TypeError) -> Any:
    """JavaScript ``left + right`` for parsed-JSON values: numbers add; when either side's
    primitive (:func:`js_to_primitive`) is a string the two are concatenated as strings;
    ``null``/``false`` count 0, ``true`` 1, ``undefined`` NaN.

    >>> js_add(0, "1"), js_add("01", 4), js_add(0, None), js_add(1, [5]), js_add(0, True)
    ('01', '014', 0, '15', 1)
    """
    if type(left) in (int, float) and type(right) in (int, float):
        return left + right
    a = js_to_primitive(left, error)
    b = js_to_primitive(right, error)
    if isinstance(a, str) or isinstance(b, str):
        return js_to_string(a) + js_to_string(b)
    return _primitive_number(a) + _primitive_number(b)


def _primitive_number(value: Any) -> int | float:
    if value is None or value is False:
        return 0
    if value is True:
        return 1
    if value is JS_UNDEFINED:
        return math.nan
    return value  # type: ignore[no-any-return]


def js_to_number(value: Any, error: type = TypeError) -> float:
    """JavaScript ``Number(value)`` for a parsed-JSON value (via :func:`js_to_primitive`)."""
    p = js_to_primitive(value, error)
    if isinstance(p, str):
        return js_string_to_number(p)
    return float(_primitive_number(p))


# ==== Date.parse ================================================================


def _date_parse_str(text: str) -> float:
    """``Date.parse(text)``: the Rust core's rule (``rust/src/jsdate.rs``), the one home of it."""
    return _core.date_parse(text)


def _time_clip(t: float) -> float:
    if t != t or abs(t) > 8.64e15:
        return math.nan
    return float(math.trunc(t)) + 0.0


def js_date_parse(value: Any = JS_UNDEFINED) -> float:
    """JavaScript ``new Date(value).getTime()`` in epoch milliseconds; ``NaN`` when invalid.

    Strings are parsed as ECMAScript date-time strings (``Date.parse``): ``YYYY``,
    ``YYYY-MM``, ``YYYY-MM-DD`` (UTC), optionally followed by ``THH:mm``, ``:ss``,
    ``.fraction`` (any number of digits, truncated to ms) and ``Z`` or ``±HH:mm``;
    expanded years ``±YYYYYY``; V8's ``T24:00`` and day overflow (Feb 31 -> Mar 3). Of
    V8's lenient fallback only these are accepted: a space or ``t`` for ``T``, ``z`` for
    ``Z``, ``±HHmm`` offsets. Date-times without an offset are taken as UTC
    (JS would use the machine's local zone; Pi's goldens were produced in UTC). Anything
    else is ``NaN``. Non-strings follow ``new Date(x)``: a number is itself (truncated,
    TimeClip-ed), ``None`` (null) is 0, ``True`` is 1, :data:`JS_UNDEFINED` is ``NaN``,
    lists are parsed via their ``String()``, dicts are ``NaN``.

        >>> js_date_parse("2026-01-01"), js_date_parse("2026-01-01T01:00+01:00")
        (1767225600000.0, 1767225600000.0)
        >>> js_date_parse("yesterday")
        nan
    """
    if isinstance(value, str):
        return _date_parse_str(value)
    if value is None or value is False:
        return 0.0
    if value is True:
        return 1.0
    if isinstance(value, (int, float)):
        try:
            return _time_clip(float(value))
        except OverflowError:
            return math.nan
    if isinstance(value, (list, tuple)):
        return _date_parse_str(js_to_string(value))
    return math.nan
