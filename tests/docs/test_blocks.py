"""The docs' checker itself: a wrong answer, in either kind of block, makes it report a failure
(so the examples' tests cannot pass vacuously), and a command it cannot run is refused."""

from __future__ import annotations

from typing import Any

import pytest

from tests.docs.blocks import REPO, Block, calls, parse_curl, run_console, run_python, shell_answers

PAGE = REPO / "docs" / "index.md"


def block(lang: str, body: str) -> Block:
    return Block(PAGE, 1, lang, body)


def test_a_python_block_with_a_wrong_answer_fails_and_a_right_one_passes() -> None:
    assert run_python([block("python", ">>> 1 + 1\n2")]) == []
    assert run_python([block("python", ">>> 1 + 1\n3")])
    assert run_python([block("python", "print(1 + 1)  # 2")])  # not a doctest: refused


def test_python_blocks_of_a_page_share_their_names() -> None:
    assert run_python([block("python", ">>> x = 41"), block("python", ">>> x + 1\n42")]) == []


class Answers:
    """A stand-in for the service: answers every request with one body."""

    def __init__(self, status: int, text: str) -> None:
        self.status_code, self.text, self.seen = status, text, []

    def request(self, method: str, url: str, **kwargs: Any) -> Answers:
        self.seen.append((method, url, kwargs))
        return self


def test_a_console_block_with_a_wrong_answer_fails_and_a_right_one_passes() -> None:
    session = block("console", '$ curl -s localhost:8000/learn --json \'{"a": 1}\'\n{"learned":1,"seq":1}')
    assert run_console(Answers(200, '{"learned":1,"seq":1}'), [session]) == []
    assert run_console(Answers(200, '{"learned":1,"seq":2}'), [session])
    assert run_console(Answers(200, '{"learned":1,"seq":1,"more":true}'), [session])
    elided = block("console", '$ curl -s localhost:8000/health\n{"status":"ok",...}')
    assert run_console(Answers(200, '{"status":"ok","seq":{}}'), [elided]) == []


def test_a_command_shown_without_an_answer_must_succeed() -> None:
    quiet = block("console", "$ curl -s -X DELETE localhost:8000/models/a")
    assert run_console(Answers(204, ""), [quiet]) == []
    assert run_console(Answers(404, '{"detail":"Model not found."}'), [quiet])


def test_curl_commands_are_read_as_a_shell_would() -> None:
    session = block(
        "console",
        "$ curl -s localhost:8000/learn -H 'Content-Type: application/json' \\\n"
        '    -d \'{"events": [1,\n                2]}\'\n{"learned":2,"seq":2}',
    )
    (call,) = calls(session)
    assert (call.method, call.path, call.headers) == ("POST", "/learn", {"Content-Type": "application/json"})
    assert call.body == '{"events": [1,\n                2]}' and call.want == '{"learned":2,"seq":2}'
    assert parse_curl("curl -s -X PUT 'localhost:8000/models/m?x=1'", "here")[:2] == ("PUT", "/models/m?x=1")
    for command in ("curl -k localhost:8000/x", "curl -s example.com/x", "wget localhost:8000/x"):
        with pytest.raises(ValueError):
            parse_curl(command, "here")


def test_an_answer_in_a_shell_block_is_found() -> None:
    assert shell_answers(block("sh", 'curl -s localhost:8000/health   # {"status":"ok"}'))
    assert shell_answers(block("sh", 'make serve\n{"learned":1}'))
    assert not shell_answers(block("sh", "make serve PORT=8080   # another port"))
