"""A reader for Weka's ARFF files, tolerant of the quirks found in real UCI exports.

The grammar follows Weka's own ``ArffLoader`` tokenizer rather than the letter of the ARFF
specification, because that is what the files were written for:

- header tokens are separated by whitespace *or commas* (``@attribute age,{f,t}`` names
  the attribute ``age``); ``%`` starts a comment outside quotes; ``'...'`` and ``"..."`` quote
  names and values (with backslash escapes); ``{`` and ``}`` delimit nominal value lists;
- keywords (``@relation``, ``@attribute``, ``@data``, ``numeric``/``real``/``integer``,
  ``string``, ``date``) are case-insensitive;
- line endings may be ``\\n``, ``\\r\\n``, ``\\r`` or ``\\r\\r\\n``; blank lines and comment
  lines may appear anywhere, including between data rows; the text is UTF-8 (Latin-1 is
  accepted when it is not), with an optional byte-order mark;
- in data rows a bare ``?`` is a missing value, while a *quoted* ``'?'`` is an ordinary
  nominal value (Weka reads it that way, and some files declare ``'?'`` as a category);
  whitespace around fields is ignored; a line holding only commas is blank; sparse rows ``{index value, ...}`` are supported, and
  an instance weight ``,{w}`` after a dense row is read and returned.
- a number is written in decimal (``1``, ``-.5``, ``2E3``) and finite, as is a weight (also 0
  or more); attribute names are unique. Anything else is a :class:`FormatError` naming the line.

Values are encoded as floats: numeric attributes as their value, nominal (and string)
attributes as the index of the value in the attribute's value list, NaN for missing, dates as
seconds since the Unix epoch.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from datetime import UTC
from pathlib import Path
from typing import Literal

import numpy as np

from streamtree.datasets.arff_rows import ESCAPES, parse_sparse, split_row, take_weight
from streamtree.exceptions import ConfigError, FormatError
from streamtree.typing import FloatArray, IntArray

__all__ = ["ArffDataset", "Attribute", "parse_arff", "read_arff"]

Kind = Literal["numeric", "nominal", "string", "date"]

_NUMERIC_TYPES = {"numeric", "real", "integer"}


@dataclass(frozen=True)
class Attribute:
    """One ``@attribute`` declaration.

    ``values`` lists the nominal values in declaration order (for ``string`` attributes, the
    distinct values in order of first appearance); it is empty for numeric and date
    attributes. ``date_format`` is the declared Java date pattern, if any.
    """

    name: str
    kind: Kind
    values: tuple[str, ...] = ()
    date_format: str | None = None


@dataclass(frozen=True)
class ArffDataset:
    """The contents of one ARFF file, split into features and a class attribute.

    Attributes
    ----------
    name
        The ``@relation`` name (``relation``) or, when read from a file, the file's stem.
    relation
        The ``@relation`` name as written.
    attributes
        The feature attributes, in file order, without the class attribute.
    class_attribute
        The class attribute (nominal).
    X
        ``(n, d)`` float array: numeric values, nominal codes, NaN where missing.
    y
        ``(n,)`` int array of class codes into ``classes``; ``-1`` where the class is missing.
    weights
        ``(n,)`` instance weights (1 unless the file gives ``{w}`` after a row).
    """

    name: str
    relation: str
    attributes: tuple[Attribute, ...]
    class_attribute: Attribute
    X: FloatArray
    y: IntArray
    weights: FloatArray = field(repr=False)

    @property
    def classes(self) -> tuple[str, ...]:
        """The class names; ``y`` indexes into them."""
        return self.class_attribute.values

    @property
    def feature_names(self) -> tuple[str, ...]:
        return tuple(a.name for a in self.attributes)

    @property
    def nominal_mask(self) -> np.ndarray:
        """Boolean ``(d,)``: which columns of ``X`` hold nominal (or string) codes."""
        return np.array([a.kind in ("nominal", "string") for a in self.attributes], dtype=bool)

    @property
    def n_instances(self) -> int:
        return int(self.y.shape[0])

    def labelled(self) -> ArffDataset:
        """The instances whose class is known (learners cannot use the others)."""
        keep = self.y >= 0
        return ArffDataset(
            self.name,
            self.relation,
            self.attributes,
            self.class_attribute,
            self.X[keep],
            self.y[keep],
            self.weights[keep],
        )


# ----------------------------------------------------------------------------- tokenizing

_HEADER_TOKEN = re.compile(
    r"""
      (?P<ws>[\s,]+)
    | (?P<comment>%[^\n]*)
    | (?P<brace>[{}])
    | '(?P<sq>(?:[^'\\\n]|\\.)*)'
    | "(?P<dq>(?:[^"\\\n]|\\.)*)"
    | (?P<word>[^\s,{}'"%]+)
    """,
    re.VERBOSE,
)


def _unescape(text: str) -> str:
    if "\\" not in text:
        return text
    return re.sub(r"\\(.)", lambda m: ESCAPES.get(m.group(1), m.group(1)), text)


def _header_tokens(line: str, lineno: int) -> list[tuple[str, bool]]:
    """Tokens of a header line as ``(text, quoted)``; braces are returned as bare tokens."""
    out: list[tuple[str, bool]] = []
    pos = 0
    while pos < len(line):
        m = _HEADER_TOKEN.match(line, pos)
        if m is None:
            raise FormatError(f"line {lineno}: unterminated quote in header: {line.strip()!r}")
        pos = m.end()
        kind = m.lastgroup
        if kind is None or kind in ("ws", "comment"):
            continue
        if kind == "sq" or kind == "dq":
            out.append((_unescape(m.group(kind)), True))
        else:
            out.append((m.group(kind), False))
    return out


def _lines(text: str) -> Iterator[tuple[int, str]]:
    """``(line number, line)`` with any mix of ``\\r\\n``, ``\\r`` and ``\\n`` endings.

    ``\\r\\r\\n`` (seen in the wild) counts as one line end followed by a blank line, which is
    harmless because blank lines are skipped everywhere.
    """
    text = text.replace("\r\n", "\n").replace("\r", "\n")
    yield from enumerate(text.split("\n"), start=1)


# ----------------------------------------------------------------------------- the header


def _nothing_after(tokens: list[tuple[str, bool]], end: int, name: str, lineno: int) -> None:
    """Refuse words after an attribute's type (``@attribute a real {x,y}``): they were ignored."""
    if len(tokens) > end:
        extra = " ".join(text for text, _ in tokens[end:])
        raise FormatError(f"line {lineno}: attribute {name!r} has text after its type: {extra[:60]!r}")


def _parse_attribute(tokens: list[tuple[str, bool]], lineno: int) -> Attribute:
    if len(tokens) < 3:
        raise FormatError(f"line {lineno}: @attribute needs a name and a type")
    name = tokens[1][0]
    type_text, type_quoted = tokens[2]
    if type_text == "{" and not type_quoted:
        close = next((i for i, (text, quoted) in enumerate(tokens) if i > 2 and text == "}" and not quoted), None)
        if close is None:
            raise FormatError(f"line {lineno}: nominal attribute {name!r} has no closing '}}'")
        values = [text for text, _ in tokens[3:close]]
        if len(set(values)) != len(values):
            raise FormatError(f"line {lineno}: nominal attribute {name!r} repeats a value")
        _nothing_after(tokens, close + 1, name, lineno)
        return Attribute(name, "nominal", tuple(values))
    kind = type_text.lower()
    if kind in _NUMERIC_TYPES:
        _nothing_after(tokens, 3, name, lineno)
        return Attribute(name, "numeric")
    if kind == "string":
        _nothing_after(tokens, 3, name, lineno)
        return Attribute(name, "string")
    if kind == "date":
        fmt = tokens[3][0] if len(tokens) > 3 else "yyyy-MM-dd'T'HH:mm:ss"
        _nothing_after(tokens, 4, name, lineno)
        return Attribute(name, "date", date_format=fmt)
    raise FormatError(
        f"line {lineno}: attribute {name!r} has type {type_text!r}; "
        "expected numeric, real, integer, string, date or a {nominal, list}"
    )


# ----------------------------------------------------------------------------- the data

_JAVA_DATE = [
    ("yyyy", "%Y"),
    ("yy", "%y"),
    ("MM", "%m"),
    ("dd", "%d"),
    ("HH", "%H"),
    ("mm", "%M"),
    ("ss", "%S"),
    ("SSS", "%f"),
    ("Z", "%z"),
]


def _java_to_strptime(fmt: str) -> str:
    out = ""
    parts = re.split(r"('[^']*')", fmt)
    for part in parts:
        if part.startswith("'"):
            out += part[1:-1].replace("%", "%%")
            continue
        for java, py in _JAVA_DATE:
            part = part.replace(java, py)
        out += part
    return out


# decimal numbers as Weka reads them (less its NaN and Infinity); Python's float() also takes "nan", "inf",
# "1_000" and non-ASCII digits, which are not numbers in an ARFF file
_NUMBER = re.compile(r"[+-]?(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?")
_NUMBER_CHARS = re.compile(r"[0-9eE.+-]*")


def _number(text: str, what: str, lineno: int) -> float:
    """``text`` read as a finite decimal number, or a :class:`FormatError` naming the line."""
    value = float(text) if _NUMBER.fullmatch(text) else None
    if value is None or not np.isfinite(value):
        raise FormatError(
            f"line {lineno}: {what} {text!r}; expected a finite decimal number such as 1.5 or -2e3 "
            f"(a missing value is written ?)"
        )
    return value


def _encode_column(
    attr: Attribute, raw: Sequence[tuple[str, bool]], first_line: Sequence[int]
) -> tuple[FloatArray, Attribute]:
    """Float codes of one column; returns the (possibly extended) attribute for strings."""
    n = len(raw)
    out = np.full(n, np.nan)
    if attr.kind == "numeric":
        texts = [t for t, q in raw]
        present = [i for i, (t, q) in enumerate(raw) if not (t == "?" and not q)]
        if len(present) == n and _NUMBER_CHARS.fullmatch("".join(texts)):
            try:
                values = np.array(texts, dtype=np.float64)
            except ValueError:
                pass
            else:
                if np.isfinite(values).all():
                    return values, attr
        for i in present:
            out[i] = _number(texts[i], f"attribute {attr.name!r} is numeric but the value is", first_line[i])
        return out, attr
    if attr.kind == "date":
        from datetime import datetime

        pattern = _java_to_strptime(attr.date_format or "")
        for i, (t, q) in enumerate(raw):
            if t == "?" and not q:
                continue
            try:
                stamp = datetime.strptime(t, pattern)
            except ValueError:
                raise FormatError(
                    f"line {first_line[i]}: attribute {attr.name!r} expects dates like {attr.date_format!r}; got {t!r}"
                ) from None
            if stamp.tzinfo is None:
                stamp = stamp.replace(tzinfo=UTC)
            out[i] = stamp.timestamp()
        return out, attr
    index = {v: float(i) for i, v in enumerate(attr.values)}
    growing = attr.kind == "string"
    for i, (t, q) in enumerate(raw):
        if t == "?" and not q:
            continue
        code = index.get(t)
        if code is None:
            if not growing:
                raise FormatError(
                    f"line {first_line[i]}: value {t!r} is not declared for nominal attribute "
                    f"{attr.name!r} (declared: {', '.join(attr.values)})"
                )
            code = index[t] = float(len(index))
        out[i] = code
    if growing:
        attr = Attribute(attr.name, "string", tuple(index))
    return out, attr


# ----------------------------------------------------------------------------- public API


def parse_arff(
    text: str,
    *,
    name: str | None = None,
    class_attribute: int | str = -1,
) -> ArffDataset:
    """Parse the text of an ARFF file.

    Parameters
    ----------
    text
        The file's contents.
    name
        The dataset's name; defaults to the ``@relation`` name.
    class_attribute
        Index (negative counts from the end) or name of the class attribute, which must be
        nominal. Weka's convention, the last attribute, is the default.

    Returns
    -------
    ArffDataset

    Raises
    ------
    FormatError
        The text is not ARFF this reader understands; the message gives the line number.
    ConfigError
        ``class_attribute`` names no attribute, or a non-nominal one.

    Examples
    --------
    >>> ds = parse_arff('''@relation toy
    ... @attribute 'x 1' real
    ... @attribute colour {red, 'light blue'}
    ... @attribute class {yes,no}
    ... @data
    ... 1.5, 'light blue', yes
    ... ?,red,no
    ... ''')
    >>> ds.feature_names, ds.classes
    (('x 1', 'colour'), ('yes', 'no'))
    >>> ds.X.tolist(), ds.y.tolist()
    ([[1.5, 1.0], [nan, 0.0]], [0, 1])
    """
    text = text.removeprefix("\ufeff")
    relation: str | None = None
    attributes: list[Attribute] = []
    declared: dict[str, int] = {}
    lines = _lines(text)
    for lineno, line in lines:
        stripped = line.strip()
        if not stripped or stripped.startswith("%"):
            continue
        tokens = _header_tokens(line, lineno)
        if not tokens:
            continue
        keyword = tokens[0][0].lower()
        if keyword == "@relation":
            relation = tokens[1][0] if len(tokens) > 1 else ""
        elif keyword == "@attribute":
            attribute = _parse_attribute(tokens, lineno)
            if attribute.name in declared:  # Weka refuses it; dict(zip(names, row)) would drop a column
                raise FormatError(
                    f"line {lineno}: attribute name {attribute.name!r} repeats line {declared[attribute.name]}"
                )
            declared[attribute.name] = lineno
            attributes.append(attribute)
        elif keyword == "@data":
            if len(tokens) > 1:  # a row on the @data line itself was dropped without a word
                raise FormatError(f"line {lineno}: text after @data (rows start on the next line): {stripped[:60]!r}")
            break
        else:
            raise FormatError(f"line {lineno}: expected @relation, @attribute or @data; got {stripped[:60]!r}")
    else:
        raise FormatError("no @data section")
    if relation is None:
        raise FormatError("no @relation line before @data")
    if not attributes:
        raise FormatError("no @attribute declarations")
    n_attr = len(attributes)
    # a sparse row's omitted value: 0, which for a nominal attribute is its first value (a
    # quoted text: the value itself, not "0" looked up among the values)
    omitted = [(a.values[0], True) if a.kind == "nominal" and a.values else ("0", False) for a in attributes]

    columns: list[list[tuple[str, bool]]] = [[] for _ in range(n_attr)]
    row_line: list[int] = []
    weights: list[float] = []
    for lineno, line in lines:
        stripped = line.strip()
        # a line of nothing but commas separates rows in some exports (bupa, page-blocks):
        # Weka's tokenizer treats commas as whitespace, so such a line is blank
        if not stripped.strip(", \t") or stripped.startswith("%"):
            continue
        weight: str | None
        if stripped.startswith("{"):
            fields, weight = parse_sparse(stripped, lineno, n_attr, omitted)
        else:
            fields = split_row(line, lineno)
            weight = take_weight(fields) if len(fields) == n_attr + 1 else None
        if len(fields) != n_attr:
            raise FormatError(f"line {lineno}: {len(fields)} values for {n_attr} attributes")
        for col, value in zip(columns, fields):
            col.append(value)
        row_line.append(lineno)
        if weight is None:
            weights.append(1.0)
        else:
            w = _number(weight, "the instance weight is", lineno)
            if w < 0:
                raise FormatError(f"line {lineno}: the instance weight is {weight!r}; expected a weight of 0 or more")
            weights.append(w)

    encoded: list[FloatArray] = []
    for j, attr in enumerate(attributes):
        values, attributes[j] = _encode_column(attr, columns[j], row_line)
        encoded.append(values)

    names = [a.name for a in attributes]
    if isinstance(class_attribute, str):
        if class_attribute not in names:
            raise ConfigError(
                f"The 'class_attribute' parameter must name an attribute ({', '.join(names)}). "
                f"Got {class_attribute!r} instead."
            )
        c = names.index(class_attribute)
    elif isinstance(class_attribute, (int, np.integer)) and -n_attr <= class_attribute < n_attr:
        c = int(class_attribute) % n_attr
    else:
        raise ConfigError(
            f"The 'class_attribute' parameter must be an attribute name or an index in "
            f"[{-n_attr}, {n_attr}). Got {class_attribute!r} instead."
        )
    if attributes[c].kind != "nominal":
        raise ConfigError(
            f"The 'class_attribute' parameter must select a nominal attribute; "
            f"{attributes[c].name!r} is {attributes[c].kind}."
        )
    n = len(row_line)
    features = [j for j in range(n_attr) if j != c]
    X = np.column_stack([encoded[j] for j in features]) if features else np.zeros((n, 0))
    y_float = encoded[c]
    y = np.where(np.isnan(y_float), -1, np.nan_to_num(y_float, nan=-1.0)).astype(np.int64)
    return ArffDataset(
        name=name if name is not None else relation,
        relation=relation,
        attributes=tuple(attributes[j] for j in features),
        class_attribute=attributes[c],
        X=np.ascontiguousarray(X, dtype=np.float64).reshape(n, len(features)),
        y=y,
        weights=np.asarray(weights, dtype=np.float64),
    )


def read_arff(path: str | os.PathLike[str], *, class_attribute: int | str = -1) -> ArffDataset:
    """Read an ARFF file; the dataset is named after the file (``abalone.arff`` -> ``abalone``).

    UTF-8 is tried first, then Latin-1 (which accepts any byte sequence).

    Raises
    ------
    FormatError
        As :func:`parse_arff`, with the file name prefixed to the message.
    """
    path = Path(path)
    raw = path.read_bytes()
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        text = raw.decode("latin-1")
    name = path.name[: -len(".arff")] if path.name.lower().endswith(".arff") else path.stem
    try:
        return parse_arff(text, name=name, class_attribute=class_attribute)
    except FormatError as exc:
        raise FormatError(f"{path.name}: {exc}") from None
