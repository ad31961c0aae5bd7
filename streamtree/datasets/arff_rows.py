"""The data rows of an ARFF file (:mod:`streamtree.datasets.arff`): dense rows split into
their fields, sparse rows ``{index value, ...}`` read into whole rows, instance weights.

A field is ``(text, quoted)``: quoted values keep what the quotes hold (``,``, ``}``, ``%``)
with their escapes read; a ``%`` outside quotes starts a comment.
"""

from __future__ import annotations

from streamtree.exceptions import FormatError

__all__ = ["ESCAPES", "parse_sparse", "quoted_value", "split_row", "take_weight"]

#: What an escape in a quoted value stands for (``\\n``, ``\\'``...).
ESCAPES = {"n": "\n", "t": "\t", "r": "\r", "'": "'", '"': '"', "\\": "\\", "%": "%"}


def _blanks_end(line: str, i: int) -> int:
    """The index of the first character at or after ``i`` that is not a space or a tab."""
    while i < len(line) and line[i] in " \t":
        i += 1
    return i


def split_row(line: str, lineno: int) -> list[tuple[str, bool]]:
    """Fields of a dense data row as ``(text, quoted)``, whitespace around fields removed.

    A ``%`` outside quotes starts a comment. The fast path (no quotes, no comment) is a plain
    ``str.split``.
    """
    if "'" not in line and '"' not in line and "%" not in line:
        return [(f.strip(), False) for f in line.split(",")]
    fields: list[tuple[str, bool]] = []
    i, n = 0, len(line)
    while True:
        i = _blanks_end(line, i)
        if i < n and line[i] in "'\"":
            text, j = quoted_value(line, i, lineno)
            fields.append((text, True))
            j = _blanks_end(line, j)
            if j < n and line[j] == "%":
                return fields
            if j < n and line[j] != ",":
                raise FormatError(f"line {lineno}: text after a quoted value: {line[j:]!r}")
            if j >= n:
                return fields
            i = j + 1
        else:
            j = i
            while j < n and line[j] not in ",%":
                j += 1
            fields.append((line[i:j].strip(), False))
            if j >= n or line[j] == "%":
                return fields
            i = j + 1


def quoted_value(line: str, i: int, lineno: int) -> tuple[str, int]:
    """The quoted value starting at ``line[i]`` (a quote), its escapes read, and the index
    after its closing quote."""
    quote, j, buf = line[i], i + 1, []
    while j < len(line) and line[j] != quote:
        if line[j] == "\\" and j + 1 < len(line):
            buf.append(ESCAPES.get(line[j + 1], line[j + 1]))
            j += 2
        else:
            buf.append(line[j])
            j += 1
    if j >= len(line):
        raise FormatError(f"line {lineno}: unterminated quote in data row")
    return "".join(buf), j + 1


def parse_sparse(
    line: str, lineno: int, n_attr: int, omitted: list[tuple[str, bool]]
) -> tuple[list[tuple[str, bool]], str | None]:
    """A sparse row ``{index value, ...} {weight}``; an attribute it leaves out has value 0 as
    Weka stores it: ``omitted[i]`` (0 for a number, the first declared value of a nominal one).
    Values are read as in a dense row: quoted ones may hold ``,`` ``}`` ``%`` and escapes, an
    index and its value are separated by spaces or tabs, and a ``%`` outside quotes after the
    row starts a comment."""
    row: list[tuple[str, bool]] = list(omitted)
    i, n = line.index("{") + 1, len(line)
    while True:
        i = _blanks_end(line, i)
        if i < n and line[i] == "}":
            break
        j = i
        while j < n and line[j] not in " \t,}":
            j += 1
        index_text, i = line[i:j], j
        i = _blanks_end(line, i)
        if i < n and line[i] in "'\"":
            value, i = quoted_value(line, i, lineno)
            quoted = True
        else:
            j = i
            while j < n and line[j] not in ",}":
                j += 1
            value, quoted, i = line[i:j].strip(), False, j
        try:
            idx = int(index_text)
        except ValueError:
            raise FormatError(f"line {lineno}: sparse entry {index_text!r} has no integer index") from None
        if not 0 <= idx < n_attr:
            raise FormatError(f"line {lineno}: sparse index {idx} outside 0..{n_attr - 1}")
        row[idx] = (value, quoted)
        i = _blanks_end(line, i)
        if i < n and line[i] == ",":
            i += 1
        elif i >= n or line[i] != "}":
            raise FormatError(f"line {lineno}: sparse row without its closing '}}'")
    weight = line[i + 1 :].partition("%")[0].strip().lstrip(",").strip()
    if weight.startswith("{") and weight.endswith("}"):
        weight = weight[1:-1].strip()
    return row, weight or None


def take_weight(fields: list[tuple[str, bool]]) -> str | None:
    """Strip a trailing instance weight ``{w}`` from a dense row."""
    last, quoted = fields[-1]
    if not quoted and last.startswith("{") and last.endswith("}"):
        fields.pop()
        return last[1:-1].strip()
    return None
