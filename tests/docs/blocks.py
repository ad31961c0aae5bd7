"""The code blocks of the README and the documentation site, and how to run the ones that
show an answer.

Two kinds of block show answers, and both are run by ``tests/docs/test_examples.py``:

- ``python`` blocks are doctests (``>>>`` lines and the answers under them). The blocks of one
  page share their names, in page order, as a reader's session would.
- ``console`` blocks are curl sessions against the service: ``$ curl ...`` lines (a trailing
  ``\\`` continues a command on the next line), each followed by the body the service answers
  (doctest's ``...`` stands for any text) or by nothing, which means "any success (2xx)".
  ``# `` lines are comments. The blocks of one page run in order against one fresh service.

Shell blocks (``sh``) hold commands only: an answer shown there could not be checked.
"""

from __future__ import annotations

import doctest
import re
import shlex
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

REPO = Path(__file__).resolve().parents[2]
DOCS = REPO / "docs"

FENCE = re.compile(r"^(?P<indent> *)```(?P<lang>[\w+-]*)[^\n]*\n(?P<body>.*?)^(?P=indent)``` *$", re.M | re.S)
CHECK = doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE


@dataclass(frozen=True)
class Block:
    """One fenced code block: its page, the line its fence opens on, language and text."""

    page: Path
    line: int
    lang: str
    body: str

    @property
    def where(self) -> str:
        return f"{self.page.relative_to(REPO)}:{self.line}"


def pages() -> list[Path]:
    """The README and every page of the site (``docs/**/*.md``), in a stable order."""
    return [REPO / "README.md", *sorted(DOCS.rglob("*.md"))]


def blocks(page: Path) -> Iterator[Block]:
    """The fenced code blocks of ``page``, in order (indented ones, in lists, included)."""
    text = page.read_text()
    for m in FENCE.finditer(text):
        indent = len(m["indent"])
        body = "\n".join(line[indent:] for line in m["body"].splitlines())
        yield Block(page, text.count("\n", 0, m.start()) + 1, m["lang"], body)


# -- python: doctests --------------------------------------------------------------------------
def run_python(page_blocks: list[Block]) -> list[str]:
    """Run a page's python blocks as one doctest session; the failure reports (empty: all pass)."""
    globs: dict[str, Any] = {"__name__": "__docs__"}
    parser = doctest.DocTestParser()
    failures: list[str] = []
    for block in page_blocks:
        if ">>>" not in block.body:
            failures.append(f"{block.where}: a python block is a doctest (>>> lines and their answers)")
            continue
        test = parser.get_doctest(block.body, globs, block.where, str(block.page), block.line)
        runner = doctest.DocTestRunner(optionflags=CHECK)
        out: list[str] = []
        runner.run(test, out=out.append, clear_globs=False)
        globs = test.globs  # the next block goes on with this one's names (a DocTest copies them)
        if runner.failures:
            failures.append("".join(out))
    return failures


# -- console: curl sessions against the service ------------------------------------------------
@dataclass(frozen=True)
class Call:
    """One ``curl`` of a console block and the answer shown under it (None: none shown)."""

    where: str
    command: str
    method: str
    path: str
    headers: dict[str, str]
    body: str | None
    want: str | None


URL = re.compile(r"^(?:https?://)?(?:localhost|127\.0\.0\.1)(?::\d+)?(?P<path>/.*)$")


def parse_curl(command: str, where: str) -> tuple[str, str, dict[str, str], str | None]:
    """``(method, path, headers, body)`` of a curl command line; ValueError for anything a
    session here does not use (so a block cannot show a command the test does not run)."""
    words = shlex.split(command)
    if not words or words[0] != "curl":
        raise ValueError(f"{where}: a console block runs curl only, got {command!r}")
    method: str | None = None
    headers: dict[str, str] = {}
    body: str | None = None
    path: str | None = None
    i = 1
    while i < len(words):
        word = words[i]
        if word in ("-s", "--silent"):
            pass
        elif word in ("-X", "--request"):
            i += 1
            method = words[i]
        elif word in ("-H", "--header"):
            i += 1
            name, _, value = words[i].partition(":")
            headers[name.strip()] = value.strip()
        elif word in ("-d", "--data", "--data-raw"):
            i += 1
            body = words[i]
        elif word == "--json":
            i += 1
            body = words[i]
            headers.setdefault("Content-Type", "application/json")
            headers.setdefault("Accept", "application/json")
        elif word.startswith("-"):
            raise ValueError(f"{where}: curl option {word} is not understood by the docs test")
        else:
            m = URL.match(word)
            if m is None or path is not None:
                raise ValueError(f"{where}: a console block calls the local service once per command, got {word!r}")
            path = m["path"]
        i += 1
    if path is None:
        raise ValueError(f"{where}: no URL in {command!r}")
    return method or ("POST" if body is not None else "GET"), path, headers, body


def calls(block: Block) -> list[Call]:
    """The curl commands of a console block with the answers shown under them."""
    out: list[Call] = []
    lines = block.body.splitlines()
    i = 0
    while i < len(lines):
        line = lines[i]
        if not line.strip() or line.startswith("#"):
            i += 1
            continue
        if not line.startswith("$ "):
            raise ValueError(
                f"{block.page.relative_to(REPO)}:{block.line + 1 + i}: an answer without a command: {line!r}"
            )
        where = f"{block.page.relative_to(REPO)}:{block.line + 1 + i}"
        command = line[2:]
        while command.endswith("\\") or not _complete(command):  # a continued line, or an open quote
            i += 1
            if i == len(lines):
                raise ValueError(f"{where}: the command does not end: {command!r}")
            command = command[:-1] + " " + lines[i].strip() if command.endswith("\\") else command + "\n" + lines[i]
        i += 1
        want: list[str] = []
        while i < len(lines) and lines[i].strip() and not lines[i].startswith(("$ ", "#")):
            want.append(lines[i])
            i += 1
        method, path, headers, body = parse_curl(command, where)
        out.append(Call(where, command, method, path, headers, body, "\n".join(want) if want else None))
    return out


def _complete(command: str) -> bool:
    """Whether a command line is whole: its quotes closed, as a shell would read it."""
    try:
        shlex.split(command)
    except ValueError:
        return False
    return True


class Client(Protocol):
    def request(self, method: str, url: str, **kwargs: Any) -> Any: ...


def run_console(client: Client, page_blocks: list[Block]) -> list[str]:
    """Run a page's console blocks in order against ``client``; the failure reports."""
    checker = doctest.OutputChecker()
    failures: list[str] = []
    for block in page_blocks:
        for call in calls(block):
            content = call.body.encode() if call.body is not None else None
            r = client.request(call.method, call.path, content=content, headers=call.headers)
            if call.want is None:
                if r.status_code >= 300:
                    failures.append(f"{call.where}: {call.command}\n  answered {r.status_code} {r.text}")
            elif not checker.check_output(call.want + "\n", r.text + "\n", CHECK):
                failures.append(f"{call.where}: {call.command}\n  shown:    {call.want}\n  answered: {r.text}")
    return failures


ANSWER_IN_SHELL = re.compile(r'^\s*(\{"|\[\{|\[")|#\s*(\{"|\[\{|\[")')


def shell_answers(block: Block) -> list[str]:
    """Lines of a shell block that look like an answer (JSON), which nothing would check."""
    return [
        f"{block.where}+{i + 1}: {line.strip()}"
        for i, line in enumerate(block.body.splitlines())
        if ANSWER_IN_SHELL.search(line)
    ]
