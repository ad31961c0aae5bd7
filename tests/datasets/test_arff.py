"""The ARFF reader: one test per quirk found in the HGS paper's files, then every shared file."""

from __future__ import annotations

import csv
import math
import re
from pathlib import Path

import numpy as np
import pytest

from streamtree.datasets import parse_arff, read_arff
from streamtree.exceptions import ConfigError, FormatError

REPO = Path(__file__).resolve().parents[2]
SHARED = REPO.parent / "shared" / "datasets" / "hgs-paper"


def test_quoted_attribute_names_with_spaces_and_integer_type() -> None:  # abalone
    ds = parse_arff(
        "@relation abalone\n@attribute 'Whole weight' real\n@attribute 'Class_Rings' integer\n"
        "@attribute 'Sex' { M, F, I}\n@data\n0.5,15,M\n0.25,7,I\n"
    )
    assert ds.feature_names == ("Whole weight", "Class_Rings")
    assert [a.kind for a in ds.attributes] == ["numeric", "numeric"]
    assert ds.classes == ("M", "F", "I")  # spaces inside the braces are not part of values
    assert ds.y.tolist() == [0, 2]
    assert ds.X.tolist() == [[0.5, 15.0], [0.25, 7.0]]


def test_comma_between_name_and_type_and_tab_separators() -> None:  # audiology
    ds = parse_arff("@relation a\n@attribute\tage_gt_60,{f,t}\n@attribute\tair\t{mild,severe}\n@data\nt,severe\n")
    assert ds.feature_names == ("age_gt_60",)
    assert ds.attributes[0].values == ("f", "t")
    assert ds.X.tolist() == [[1.0]] and ds.y.tolist() == [1]


@pytest.mark.parametrize("eol", ["\n", "\r\n", "\r", "\r\r\n"], ids=["lf", "crlf", "cr", "crcrlf"])
def test_any_line_ending(eol: str) -> None:  # audiology (\r\r\n), page-blocks (\r\n), ...
    text = eol.join(["@relation r", "@attribute x numeric", "@attribute c {a,b}", "@data", "1,a", "2,b", ""])
    ds = parse_arff(text)
    assert ds.X[:, 0].tolist() == [1.0, 2.0] and ds.y.tolist() == [0, 1]


def test_comment_lines_and_blank_lines_between_and_after_rows() -> None:  # annealing, chess, ...
    ds = parse_arff(
        "% header comment\n@relation r\n\n@attribute x numeric % trailing comment\n"
        "@attribute c {a,b}\n@data\n%\n1,a\n\n% Instances from somewhere.\n2,b % note\n%\n"
    )
    assert ds.n_instances == 2 and ds.y.tolist() == [0, 1]


def test_lines_holding_only_a_comma_are_not_rows() -> None:  # bupa, page-blocks, soybean-large
    ds = parse_arff("@relation r\n@attribute x numeric\n@attribute c {1,2}\n@data\n85,1\n,\n86,2\n,\n")
    assert ds.X[:, 0].tolist() == [85.0, 86.0] and ds.y.tolist() == [0, 1]


def test_bare_question_mark_is_missing_but_quoted_one_is_a_value() -> None:  # dresses-sales
    ds = parse_arff(
        "@relation r\n@attribute v {'?',low,high}\n@attribute w numeric\n@attribute c {1,2}\n@data\n"
        "'?',?,1\n?,4.6,2\nlow, ? ,1\n"
    )
    assert ds.attributes[0].values == ("?", "low", "high")
    x = ds.X
    assert x[0, 0] == 0.0 and math.isnan(x[0, 1])
    assert math.isnan(x[1, 0]) and x[1, 1] == 4.6
    assert x[2, 0] == 1.0 and math.isnan(x[2, 1])


def test_missing_class_is_minus_one_and_labelled_drops_it() -> None:
    ds = parse_arff("@relation r\n@attribute x numeric\n@attribute c {a,b}\n@data\n1,a\n2,?\n3,b\n")
    assert ds.y.tolist() == [0, -1, 1]
    assert ds.labelled().X[:, 0].tolist() == [1.0, 3.0]


def test_quoted_nominal_values_and_quoted_data() -> None:  # breast-tissue-6class
    ds = parse_arff(
        "@relation r\n@attribute name {'light blue',\"dark, red\"}\n@attribute Class {'1','2'}\n@data\n"
        "'light blue','2'\n\"dark, red\" , '1'\n"
    )
    assert ds.attributes[0].values == ("light blue", "dark, red")
    assert ds.classes == ("1", "2")
    assert ds.X[:, 0].tolist() == [0.0, 1.0] and ds.y.tolist() == [1, 0]


def test_escaped_quote_inside_a_quoted_value() -> None:
    ds = parse_arff("@relation r\n@attribute s {'it\\'s',plain}\n@attribute c {a}\n@data\n'it\\'s',a\n")
    assert ds.attributes[0].values == ("it's", "plain") and ds.X.tolist() == [[0.0]]


def test_keywords_are_case_insensitive() -> None:
    ds = parse_arff("@RELATION r\n@ATTRIBUTE x REAL\n@Attribute y Numeric\n@attribute c {a,b}\n@DATA\n1,2,b\n")
    assert ds.X.tolist() == [[1.0, 2.0]] and ds.y.tolist() == [1]


def test_utf8_comments_and_latin1_files(tmp_path: Path) -> None:  # bank-marketing-full, blogger
    text = "% Guimar\u00e3es, managers\u2019\n@relation r\n@attribute x numeric\n@attribute c {a,b}\n@data\n1,b\n"
    (tmp_path / "utf8.arff").write_bytes(("\ufeff" + text).encode("utf-8"))
    (tmp_path / "latin.arff").write_bytes(text.replace("\u2019", "'").encode("latin-1"))
    for name in ("utf8", "latin"):
        ds = read_arff(tmp_path / f"{name}.arff")
        assert ds.name == name and ds.y.tolist() == [1]


def test_dotted_file_names_keep_their_dots(tmp_path: Path) -> None:  # splice-c4.5.arff
    path = tmp_path / "splice-c4.5.arff"
    path.write_text("@relation r\n@attribute c {a}\n@data\na\n")
    assert read_arff(path).name == "splice-c4.5"


def test_sparse_rows_and_instance_weights() -> None:
    ds = parse_arff(
        "@relation r\n@attribute x numeric\n@attribute y numeric\n@attribute c {a,b}\n@data\n"
        "{1 3.5, 2 b}\n1,2,a,{0.5}\n{0 2, 2 a}, {2}\n"
    )
    assert ds.X.tolist() == [[0.0, 3.5], [1.0, 2.0], [2.0, 0.0]]
    assert ds.y.tolist() == [1, 0, 0] and ds.weights.tolist() == [1.0, 0.5, 2.0]


def test_string_and_date_attributes() -> None:
    ds = parse_arff(
        "@relation r\n@attribute s string\n@attribute d date 'yyyy-MM-dd'\n@attribute c {a}\n@data\n"
        "'hello world',1970-01-02,a\nbye,?,a\n'hello world',1970-01-01,a\n"
    )
    assert ds.attributes[0].values == ("hello world", "bye")
    assert ds.X[:, 0].tolist() == [0.0, 1.0, 0.0]
    assert ds.X[0, 1] == 86400.0 and math.isnan(ds.X[1, 1]) and ds.X[2, 1] == 0.0


def test_class_attribute_by_name_or_index() -> None:
    text = "@relation r\n@attribute c {a,b}\n@attribute x numeric\n@data\nb,1\n"
    for which in ("c", 0, -2):
        ds = parse_arff(text, class_attribute=which)
        assert ds.classes == ("a", "b") and ds.feature_names == ("x",) and ds.y.tolist() == [1]


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("@relation r\n@attribute c {a,b}\n@data\nz\n", r"line 4: value 'z' is not declared"),
        ("@relation r\n@attribute x numeric\n@attribute c {a}\n@data\n1,a\n1\n", r"line 6: 1 values for 2"),
        ("@relation r\n@attribute x numeric\n@attribute c {a}\n@data\nabc,a\n", r"line 5: .*numeric"),
        ("@relation r\n@attribute x blob\n@data\n", r"line 2: .*type 'blob'"),
        ("@relation r\n@attribute c {a,b\n@data\n", r"no closing"),
        ("@relation r\n@attribute c {a,b}\n", r"no @data"),
        ("@relation r\n@attribute c {a}\n@data\n'a,\n", r"unterminated quote"),
    ],
    ids=["undeclared-nominal", "short-row", "bad-number", "unknown-type", "unclosed-brace", "no-data", "open-quote"],
)
def test_malformed_files_raise_format_error_with_the_line(text: str, message: str) -> None:
    with pytest.raises(FormatError, match=message):
        parse_arff(text)


def test_numeric_or_unknown_class_attribute_is_a_config_error() -> None:
    text = "@relation r\n@attribute c {a}\n@attribute x numeric\n@data\na,1\n"
    with pytest.raises(ConfigError, match="nominal attribute"):
        parse_arff(text)
    with pytest.raises(ConfigError, match="'class_attribute'.*Got 'nope'"):
        parse_arff(text, class_attribute="nope")


def _declared_attributes(path: Path) -> int:
    text = path.read_bytes().decode("latin-1")
    return len(re.findall(r"^[ \t]*@attribute", text, flags=re.IGNORECASE | re.MULTILINE))


@pytest.mark.skipif(not SHARED.is_dir(), reason=f"the paper's datasets are not at {SHARED}")
def test_every_shared_paper_dataset_parses_with_the_papers_instance_counts() -> None:
    with open(SHARED / "paper_results.csv", newline="") as fh:
        instances = {row["dataset"]: int(row["instances"]) for row in csv.DictReader(fh)}
    files = sorted(SHARED.glob("*.arff"))
    assert len(files) >= 130
    for path in files:
        ds = read_arff(path)
        # the CSV truncates names at the first dot (splice-c4.5 -> splice-c4)
        key = ds.name if ds.name in instances else ds.name.split(".")[0]
        assert ds.n_instances == instances[key], ds.name
        assert ds.X.shape == (ds.n_instances, _declared_attributes(path) - 1), ds.name
        assert len(ds.classes) >= 2 and ds.y.min() >= 0 and ds.y.max() < len(ds.classes), ds.name
        nominal = ds.nominal_mask
        codes = ds.X[:, nominal]
        assert np.all(np.isnan(codes) | (codes == np.floor(codes))), ds.name
        for j in np.flatnonzero(nominal):
            col = ds.X[:, j]
            assert np.nanmax(col, initial=0) < len(ds.attributes[j].values), (ds.name, j)


def test_text_after_data_or_after_a_type_is_refused_not_dropped() -> None:
    # the row on the @data line was dropped without a word; words after a type were ignored
    with pytest.raises(FormatError, match=r"line 4: text after @data"):
        parse_arff("@relation r\n@attribute a real\n@attribute c {x,y}\n@data 1,x\n2,y\n")
    for declaration in ("@attribute a real {x,y}", "@attribute c {x,y} z", "@attribute s string extra"):
        with pytest.raises(FormatError, match="has text after its type"):
            parse_arff(f"@relation r\n{declaration}\n@attribute k {{p,q}}\n@data\n")


def test_a_sparse_rows_omitted_nominal_value_is_the_first_declared() -> None:
    # Weka stores an omitted value as 0: for a nominal attribute, its first value (it was the
    # text "0": refused, or the value "0" where one was declared)
    for values in ("{yes,no}", "{1,0}"):
        ds = parse_arff(
            f"@relation r\n@attribute x real\n@attribute c {values}\n@data\n{{0 1.5}}\n{{0 2, 1 {values[1:-1].split(',')[1]}}}\n"
        )
        assert ds.y.tolist() == [0, 1] and ds.X.tolist() == [[1.5], [2.0]]


def test_a_sparse_rows_values_are_read_as_a_dense_rows() -> None:
    # values split at every ',' and the row cut at the first '}', quotes aside: a quoted ',' or
    # '}' broke the row, an escape kept its backslash (one string, two codes), a comment or a
    # tab was refused
    header = "@relation r\n@attribute s string\n@attribute c {a,b}\n@data\n"
    rows = "'it\\'s',a\n{0 'it\\'s', 1 b}\n{0 'x,y', 1 b}\n{0 'x}y',1 b} {2.5} % a comment\n{0\t'x,y'}\n"
    ds = parse_arff(header + rows)
    assert ds.attributes[0].values == ("it's", "x,y", "x}y")
    assert ds.X[:, 0].tolist() == [0.0, 0.0, 1.0, 2.0, 1.0] and ds.y.tolist() == [0, 1, 1, 1, 0]
    assert ds.weights is not None and ds.weights.tolist() == [1.0, 1.0, 1.0, 2.5, 1.0]
    with pytest.raises(FormatError, match="line 5: sparse row without its closing"):
        parse_arff(header + "{0 x, 1 a\n")


@pytest.mark.parametrize("spelling", ["nan", "NaN", "inf", "-Infinity", "1e400", "1_000", "١٢", "0x1p3", "1.5d", ""])
def test_a_number_is_a_finite_decimal_as_weka_reads_it(spelling: str) -> None:
    # Python's float() read these (nan as a missing value the file never wrote as ?, 1_000 as
    # 1000, Arabic-Indic digits as 12); a number in an ARFF file is a Java decimal literal
    header = "@relation r\n@attribute x numeric\n@attribute c {a}\n@data\n"
    with pytest.raises(
        FormatError, match=rf"line 6: attribute 'x' is numeric but the value is {re.escape(repr(spelling))}"
    ):
        parse_arff(header + f"1,a\n'{spelling}',a\n")
    ds = parse_arff(header + "+1.,a\n.5,a\n-2E-3,a\n?,a\n7,a\n")
    assert ds.X[:, 0].tolist()[:3] == [1.0, 0.5, -0.002] and math.isnan(ds.X[3, 0]) and ds.X[4, 0] == 7.0


@pytest.mark.parametrize("weight", ["nan", "inf", "-2", "1_0"])
def test_an_instance_weight_is_a_finite_number_of_zero_or_more(weight: str) -> None:
    header = "@relation r\n@attribute x numeric\n@attribute c {a}\n@data\n"
    with pytest.raises(FormatError, match=rf"line 5: the instance weight is '{re.escape(weight)}'"):
        parse_arff(header + f"1,a,{{{weight}}}\n")
    assert parse_arff(header + "1,a,{0}\n{0 2},{1.5}\n").weights.tolist() == [0.0, 1.5]


def test_an_attribute_name_declared_twice_is_refused() -> None:
    # Weka refuses it; the names zipped with a row would drop one column
    with pytest.raises(FormatError, match=r"line 4: attribute name 'a' repeats line 2"):
        parse_arff("@relation r\n@attribute a numeric\n@attribute c {x}\n@attribute a {p,q}\n@data\n")
