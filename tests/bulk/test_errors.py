"""Every bad input of ``streamtree learn`` and ``streamtree predict`` ends the command with one
line naming the problem (exit status 1), before anything is learned."""

from __future__ import annotations

import gzip
from pathlib import Path

import pandas as pd
import pytest

from streamtree.bulk import learn, predict
from tests.app.test_process import free_port
from tests.bulk.conftest import TOKEN, Service, cli, fresh_name, logged, table, write


def fails(module: object, argv: list[str]) -> str:
    """The one line the command ends with (exit status 1: a SystemExit with a message)."""
    with pytest.raises(SystemExit) as ended:
        module.main(argv)  # type: ignore[attr-defined]
    line = ended.value.code
    assert isinstance(line, str), f"exit status {line!r}, not 1 with a message"
    assert "\n" not in line and len(line) < 600, line
    return line


@pytest.fixture
def csv(tmp_path: Path) -> Path:
    return write(table(20), tmp_path / "rows.csv")


def args(service: Service, path: Path | str, name: str, *more: str, token: str = TOKEN) -> list[str]:
    return [str(path), "--model", name, "--url", service.url, "--token", token, "--no-progress", *more]


def test_file_errors(service: Service, tmp_path: Path, csv: Path) -> None:
    name = fresh_name()
    line = fails(learn, args(service, tmp_path / "nope.csv", name, "--label", "y"))
    assert line == f"streamtree learn: no such file: {tmp_path / 'nope.csv'}"
    (tmp_path / "rows.xlsx").write_text("a,y\n")
    line = fails(learn, args(service, tmp_path / "rows.xlsx", name, "--label", "y"))
    assert "cannot tell the format of" in line and "--format" in line
    line = fails(learn, args(service, "-", name, "--label", "y"))
    assert "standard input (-) needs --format" in line
    line = fails(learn, args(service, csv, name, "--label", "label"))
    assert "--label: no column 'label' in" in line and "'rid', 'a', 'b', 'c', 'k', 's', 'flag', 'y'" in line
    line = fails(learn, args(service, csv, name, "--label", "y", "--batch-size", "0"))
    assert "--batch-size" in line and "an integer >= 1" in line
    (tmp_path / "empty.csv").write_text("")
    assert "is empty" in fails(learn, args(service, tmp_path / "empty.csv", name, "--label", "y"))
    (tmp_path / "bad.gz.csv").write_bytes(gzip.compress(b"a,y\n1,2\n")[:15])
    assert "not readable" in fails(learn, args(service, tmp_path / "bad.gz.csv", name, "--label", "y"))


def test_bad_rows_name_the_row_and_column(service: Service, client: object, tmp_path: Path) -> None:
    name = fresh_name()
    client.model(name).create()  # type: ignore[attr-defined]
    path = tmp_path / "rows.jsonl"
    path.write_text('{"a": 1, "y": "yes"}\n\n{"a": [1, 2], "y": "no"}\n')
    line = fails(learn, args(service, path, name, "--label", "y"))
    assert (
        line
        == "streamtree learn: row 3, column 'a': a feature value is a number, string, boolean or missing, not list [1, 2]"
    )
    path.write_text('{"a": 1, "y": 0.5}\n')
    assert "row 1, column 'y': a label is a string, integer or boolean, not float 0.5" in fails(
        learn, args(service, path, name, "--label", "y")
    )
    path.write_text('{"a": 1, "y": "yes"}\n{"a": 2}\n')
    assert "row 2: no label in column 'y'" in fails(learn, args(service, path, name, "--label", "y"))
    path.write_text('{"a": 1, "y": "yes"}\nnot json\n')
    assert "row 2 of" in fails(learn, args(service, path, name, "--label", "y"))
    csv = tmp_path / "inf.csv"
    csv.write_text("a,y\n1,yes\ninf,no\n")
    assert "row 2, column 'a': feature values are finite numbers, not inf" in fails(
        learn, args(service, csv, name, "--label", "y")
    )
    csv.write_text("a,y\n1,1\n2,1.5\n")  # a float label column: the fraction named, not row 1's 1 (read as 1.0)
    assert "row 2, column 'y': a label is a string, integer or boolean, not float 1.5" in fails(
        learn, args(service, csv, name, "--label", "y")
    )
    long = tmp_path / "long.csv"
    long.write_text("a,y\n" + "x" * 100_000 + ",yes\n")
    line = fails(learn, args(service, long, name, "--label", "y"))
    assert "row 1, column 'a': the service refused it:" in line
    assert logged(client, name) == []  # type: ignore[arg-type]


def test_service_errors(service: Service, csv: Path, tmp_path: Path) -> None:
    name = fresh_name()
    line = fails(learn, args(service, csv, name, "--label", "y"))
    assert (
        line
        == f"streamtree learn: no model {name!r} at {service.url} (create it with --create CONFIG.json; {{}} for the default config)"
    )
    (tmp_path / "other.json").write_text('{"seed": 7}')
    (tmp_path / "bad.json").write_text('{"n_models": 3}')
    (tmp_path / "tree.json").write_text("{}")
    assert fails(learn, args(service, csv, name, "--label", "y", "--create", str(tmp_path / "nope.json"))).startswith(
        "streamtree learn: --create: cannot read"
    )
    learn.main(args(service, csv, name, "--label", "y", "--create", str(tmp_path / "tree.json")))
    line = fails(learn, args(service, csv, name, "--label", "y", "--create", str(tmp_path / "other.json")))
    assert line.startswith(f"streamtree learn: model {name!r}: 409")
    line = fails(learn, args(service, csv, fresh_name(), "--label", "y", "--create", str(tmp_path / "bad.json")))
    assert line.startswith(
        "streamtree learn: --create: the service refused the config: 422 body.n_models: Unknown parameter"
    )
    line = fails(learn, args(service, csv, name, "--label", "y", token="wrong-key-0123456789"))
    assert line.startswith(f"streamtree learn: the service at {service.url} refused the API key (403")
    assert line.endswith("pass --token or set STREAMTREE_TOKEN")
    down = f"http://127.0.0.1:{free_port()}"
    line = fails(learn, [str(csv), "--model", name, "--label", "y", "--url", down, "--retries", "0", "--no-progress"])
    assert line.startswith(f"streamtree learn: no answer from the service at {down} (is it running?")
    line = fails(predict, args(service, csv, fresh_name(), "--out", str(tmp_path / "p.csv")))
    assert line.startswith("streamtree predict: no model") and "--create" not in line
    line = fails(predict, args(service, csv, name, "--out", str(tmp_path / "p.xlsx")))
    assert "--out: cannot tell the format" in line


def test_a_chunk_over_the_services_max_batch_says_to_lower_batch_size(service: Service, tmp_path: Path) -> None:
    path = write(table(10_001, seed=7), tmp_path / "rows.csv")  # the service's max_batch: 10,000
    name = fresh_name()
    create = str(Path(__file__).parent / "default.json")
    line = fails(learn, args(service, path, name, "--label", "y", "--batch-size", "10001", "--create", create))
    assert line.startswith("streamtree learn: the service at") and line.endswith(": lower --batch-size"), line
    assert "at most 10000 items, not 10001" in line
    line = fails(predict, args(service, path, name, "--out", str(tmp_path / "p.csv"), "--batch-size", "10001"))
    assert line.startswith("streamtree predict: the service at") and ": lower --batch-size (0 rows before it" in line
    # a chunk within max_batch but over the body's 4 MiB: the same hint (a bare 413 before)
    wide = pd.DataFrame({f"c{j}": [f"x{i:029d}" for i in range(3000)] for j in range(60)} | {"y": ["no"] * 3000})
    line = fails(learn, args(service, write(wide, tmp_path / "wide.csv"), name, "--label", "y", "--batch-size", "3000"))
    assert line.endswith(": lower --batch-size"), line
    # one row over the body limit on its own: lowering --batch-size (1 already) cannot help
    huge = pd.DataFrame({"a": ["x" * (5 * 2**20)], "y": ["no"]})
    line = fails(learn, args(service, write(huge, tmp_path / "huge.csv"), name, "--label", "y", "--batch-size", "1"))
    assert line.startswith("streamtree learn: row 1 alone is over the body limit of the service at"), line
    assert "--batch-size" not in line and ".;" not in line


def test_the_console_script_exits_1_with_one_line(service: Service, csv: Path) -> None:
    done = cli(service, "learn", str(csv), "--model", fresh_name(), "--label", "y")
    assert done.returncode == 1
    assert done.stderr.decode().splitlines() == [
        f"streamtree learn: no model {done.args[4]!r} at {service.url} "
        "(create it with --create CONFIG.json; {} for the default config)"
    ]
    done = cli(service, "predict", str(csv), "--model", "m")
    assert done.returncode == 1
    assert done.stderr.decode().splitlines() == [
        "streamtree predict: the following arguments are required: --out (see streamtree predict --help)"
    ]


def test_predict_refuses_to_write_over_its_own_input(service: Service, client: object, tmp_path: Path) -> None:
    # the output was opened for writing while the input was still being read in chunks: a
    # large file was cut to the rows read so far, and the command said it succeeded
    name = fresh_name()
    client.model(name).create()  # type: ignore[attr-defined]
    client.model(name).learn_batch([{"features": {"a": 1.0}, "label": "yes"}])  # type: ignore[attr-defined]
    path = write(table(50), tmp_path / "rows.csv")
    before = path.read_bytes()
    for out in (path, tmp_path / "." / "rows.csv"):
        line = fails(predict, args(service, path, name, "--out", str(out), "--label", "y"))
        assert "is the input file" in line
    assert path.read_bytes() == before


def test_integers_beyond_64_bits_and_parquet_columns_named_twice_are_refused(
    service: Service, client: object, tmp_path: Path
) -> None:
    name = fresh_name()
    client.model(name).create()  # type: ignore[attr-defined]
    path = tmp_path / "big.csv"
    path.write_text("y,a\nyes,1\nno,99999999999999999999999\n")
    line = fails(learn, args(service, path, name, "--label", "y"))
    assert line.endswith("row 2, column 'a': integers are within 64 bits, not 99999999999999999999999")
    path.write_text("a,y\n1,5\n2,99999999999999999999999\n")
    assert "row 2, column 'y': integers are within 64 bits" in fails(learn, args(service, path, name, "--label", "y"))
    # JSON lines: orjson read these as floats (1e+23), learned as such
    lines = tmp_path / "big.jsonl"
    for text, where in [
        (
            '{"a": 1, "y": "yes"}\n{"a": 99999999999999999999999, "id": "12345678901234567890123", "y": "no"}\n',
            "row 2, column 'a'",
        ),
        ('{"a": 1, "y": "yes"}\n{"a": 9223372036854775808, "y": "no"}\n', "row 2, column 'a'"),
        ('{"a": -9223372036854775809, "y": "no"}\n', "row 1, column 'a'"),  # 19 digits, below -2**63
        ('{"a": 1, "y": 99999999999999999999999}\n', "row 1, column 'y'"),
    ]:
        lines.write_text(text)
        assert f"{where}: integers are within 64 bits" in fails(learn, args(service, lines, name, "--label", "y"))
    lines.write_text('{"a": 1e400, "b": 99999999999999999999999, "y": "no"}\n')  # still not JSON (an infinity)
    assert "row 1 of" in fails(learn, args(service, lines, name, "--label", "y"))
    pa, pq = pytest.importorskip("pyarrow"), pytest.importorskip("pyarrow.parquet")
    twice = tmp_path / "twice.parquet"
    pq.write_table(pa.table([[1, 2], [3.0, 4.0], ["yes", "no"]], names=["a", "a", "y"]), twice)
    assert "the column 'a' more than once" in fails(learn, args(service, twice, name, "--label", "y"))
    assert logged(client, name) == []  # type: ignore[arg-type]


@pytest.mark.parametrize(
    "text, says",
    [
        ("y,a,y\nyes,1,no\n", "has the column 'y' more than once"),  # pandas learned "y.1" as a feature
        ("y,,b\nyes,1,2\n", "column 2 of the header has no name"),  # pandas named it "Unnamed: 1"
        ("y,a\nyes,1,3\n", "a loss of data"),  # pandas took "yes" for an index, learning {"y": 1, "a": 3}
    ],
)
def test_a_csv_whose_columns_cannot_be_told_apart_is_refused(
    service: Service, client: object, tmp_path: Path, text: str, says: str
) -> None:
    name = fresh_name()
    client.model(name).create()  # type: ignore[attr-defined]
    path = tmp_path / "rows.csv"
    path.write_text(text)
    assert says in fails(learn, args(service, path, name, "--label", "y"))
    assert logged(client, name) == []  # type: ignore[arg-type]


def test_a_url_that_is_no_streamtree_service_is_one_line(tmp_path: Path, csv: Path) -> None:
    # a web page answering 200 to every path: a JSONDecodeError traceback before
    import http.server
    import threading

    class Page(http.server.BaseHTTPRequestHandler):
        def log_message(self, *args: object) -> None:
            pass

        def answer(self) -> None:
            self.rfile.read(int(self.headers.get("content-length") or 0))
            self.send_response(200)
            self.send_header("content-type", "text/html")
            self.end_headers()
            self.wfile.write(b"<html>sign in</html>")

        do_GET = do_POST = do_PUT = answer

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Page)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{server.server_address[1]}"
    try:
        for module, more in ((learn, ["--label", "y"]), (predict, ["--out", str(tmp_path / "o.csv")])):
            line = fails(module, [str(csv), "--model", "m", "--url", url, "--no-progress", *more])
            assert "did not answer as a streamtree service does" in line and "<html>sign in</html>" in line
    finally:
        server.shutdown()


@pytest.mark.parametrize("url", ["http://host:abc", "http://[::1", "http://host:99999", "http://a b/"])
def test_a_malformed_url_is_one_line(csv: Path, url: str) -> None:
    line = fails(learn, [str(csv), "--model", "m", "--label", "y", "--url", url, "--no-progress"])
    assert "url: an http:// or https:// URL" in line and repr(url) in line


@pytest.mark.parametrize("token, kind", [("SECRET-PART-1\nSECRET-PART-2", "a line break"), ("SECRET-PÄRT-1", "U+00C4")])
def test_a_token_no_header_can_carry_is_refused_without_showing_it(csv: Path, token: str, kind: str) -> None:
    # it went out to the network, failed there, and the line showed the whole key, blaming the connection
    line = fails(learn, ["--label", "y", "--model", "m", "--url", "http://127.0.0.1:1", "--token", token, str(csv)])
    assert kind in line and "SECRET" not in line


def test_credentials_in_the_url_are_not_shown(csv: Path) -> None:
    line = fails(learn, ["--label", "y", "--model", "m", "--url", "http://admin:hunter2pass@127.0.0.1:1", str(csv)])
    assert "hunter2pass" not in line and "admin" not in line and "http://***@127.0.0.1:1" in line


@pytest.mark.parametrize("option, value", [("--in-flight", "17"), ("--batch-size", "100001")])
def test_options_that_would_hold_the_file_in_memory_are_bounded(csv: Path, option: str, value: str) -> None:
    # a mistyped --batch-size read the whole file before the service refused it
    line = fails(learn, ["--label", "y", "--model", "m", option, value, str(csv)])
    assert f"argument {option}: an integer from 1 to" in line
