"""MOA (Java) beside our models, through CapyMOA in its own virtual environment.

CapyMOA pins an older pandas than ours, so it lives in ``.venv-moa`` (``make
.venv-moa/bin/.installed``) and is reached only through :mod:`bench.moa_worker`, run by that
venv's Python in a subprocess. Data crosses as files in a temporary directory: the stream is
written once as ARFF (:func:`write_arff`), the worker answers in JSON. The worker runs with a
temporary directory as its working directory and with ``python -P`` (no script directory on
``sys.path``): CapyMOA imports MOA's Java package ``moa`` through JPype, which a folder or
module named ``moa`` on the path (this file, for one) would shadow.

Class labels: MOA needs a nominal class attribute with every value declared before the first
instance, so the ARFF declares the labels of the *whole* stream (in order of first
appearance). That is knowledge the bench has and an online learner would not; MOA's
predictions give the not-yet-seen labels no mass, and every model is scored on the labels the
stream has shown so far (:mod:`bench.scoring`), so the declaration changes no score.

Peers (:data:`MOA_PEERS`): MOA's ``HoeffdingTree``, ``HoeffdingAdaptiveTree``,
``AdaptiveRandomForest`` and ``StreamingRandomPatches`` at MOA's defaults except the ensemble
size (``-s 10``), with MOA's default random seed.
"""

from __future__ import annotations

import json
import math
import numbers
import resource
import subprocess
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
MOA_VENV = ROOT / ".venv-moa"
MOA_PYTHON = MOA_VENV / "bin" / "python"
WORKER = Path(__file__).resolve().parent / "moa_worker.py"

#: Our name -> (MOA class, CLI options): MOA's defaults, ensembles of 10.
MOA_PEERS: dict[str, tuple[str, str]] = {
    "moa-HT": ("moa.classifiers.trees.HoeffdingTree", ""),
    "moa-HAT": ("moa.classifiers.trees.HoeffdingAdaptiveTree", ""),
    "moa-ARF-10": ("moa.classifiers.meta.AdaptiveRandomForest", "-s 10"),
    "moa-SRP-10": ("moa.classifiers.meta.StreamingRandomPatches", "-s 10"),
}


def available() -> bool:
    """Whether ``.venv-moa`` holds CapyMOA (its install marker) and its jar."""
    return (MOA_VENV / "bin" / ".installed").exists() and MOA_PYTHON.exists() and moa_jar() is not None


def moa_jar() -> Path | None:
    """MOA's jar as the CapyMOA wheel ships it, or None when ``.venv-moa`` is absent."""
    found = sorted(MOA_VENV.glob("lib/python3*/site-packages/capymoa/jar/moa.jar"))
    return found[0] if found else None


def _arff_value(value: Any) -> str:
    if value is None:
        return "?"
    if isinstance(value, str):
        return "'" + value.replace("\\", "\\\\").replace("'", "\\'") + "'"
    number = float(value)
    if math.isnan(number):
        return "?"
    return repr(number)


def write_arff(data: Sequence[tuple[dict, Any]], path: Path, relation: str = "stream") -> list[Any]:
    """Write ``(x, y)`` examples as an ARFF file and return the class labels in declared order.

    Features are the keys of every ``x`` in order of first appearance, named ``a0, a1, ...``;
    numbers (bools as 0/1) are ``numeric``, strings ``nominal`` with every value of the stream
    declared; an absent key or a NaN is ARFF's missing value ``?``. Numbers are written with
    ``repr``, the shortest text that reads back to the same double, so MOA learns on the very
    values our models learn on. The class is the last attribute, nominal, labels ``c0, c1, ...``
    standing for the returned labels (the whole stream's, in order of first appearance).
    """
    if not data:
        raise ValueError("data: expected at least one (x, y) example, got none")
    keys = list(dict.fromkeys(k for x, _ in data for k in x))
    labels = list(dict.fromkeys(y for _, y in data))
    index = {label: i for i, label in enumerate(labels)}
    nominal: dict[Any, list[str]] = {}
    for x, _ in data:
        for k, v in x.items():
            if isinstance(v, str):
                nominal.setdefault(k, []).append(v)
            elif v is not None and not isinstance(v, numbers.Number):
                raise ValueError(f"feature {k!r}: expected a number, a string or None, got {type(v).__name__}")
    for k, values in nominal.items():
        if any(not isinstance(x.get(k), (str, type(None))) for x, _ in data):
            raise ValueError(f"feature {k!r}: expected one type across the stream, got strings and numbers")
        nominal[k] = list(dict.fromkeys(values))
    with path.open("w") as f:
        f.write(f"@relation {relation}\n")
        for i, k in enumerate(keys):
            kind = "{" + ",".join(_arff_value(v) for v in nominal[k]) + "}" if k in nominal else "numeric"
            f.write(f"@attribute a{i} {kind}\n")
        f.write("@attribute class {" + ",".join(f"c{i}" for i in range(len(labels))) + "}\n@data\n")
        for x, y in data:
            f.write(",".join(_arff_value(x.get(k)) for k in keys) + f",c{index[y]}\n")
    return labels


def run_worker(args: list[str], cwd: Path, timeout: float = 3600.0) -> dict[str, Any]:
    """Run :mod:`bench.moa_worker` under ``.venv-moa`` with ``cwd`` as working directory and
    return the JSON it writes to ``cwd / "out.json"``."""
    if not available():
        raise RuntimeError(f"MOA is not installed: run `make .venv-moa/bin/.installed` (expected {MOA_PYTHON})")
    out = cwd / "out.json"
    done = subprocess.run(
        [str(MOA_PYTHON), "-P", str(WORKER), *args, "--out", str(out)],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    if done.returncode != 0:
        raise RuntimeError(f"MOA worker failed ({done.returncode}): {done.stderr[-2000:]}")
    return json.loads(out.read_text())


def prequential(data: Sequence[tuple[dict, Any]], models: Sequence[str]) -> dict[str, dict[str, Any]]:
    """Test-then-train each of ``models`` (names of :data:`MOA_PEERS`) on ``data`` in MOA, one
    worker process for all of them: per model, the prediction before each example's training
    as a dict ``{label: p}`` (empty where MOA had no prediction) and the worker's CPU seconds
    for ``predict_proba`` + ``train`` through CapyMOA."""
    unknown = [m for m in models if m not in MOA_PEERS]
    if unknown:
        raise ValueError(f"models: expected names among {sorted(MOA_PEERS)}, got {unknown}")
    with tempfile.TemporaryDirectory(prefix="moa-") as tmp:
        cwd = Path(tmp)
        labels = write_arff(data, cwd / "stream.arff")
        specs = [f"{m}={MOA_PEERS[m][0]}={MOA_PEERS[m][1]}" for m in models]
        answer = run_worker(["prequential", "--arff", str(cwd / "stream.arff"), "--models", *specs], cwd)
    out = {}
    for m in models:
        result = answer["models"][m]
        if result["n"] != len(data):
            raise RuntimeError(f"{m}: MOA saw {result['n']} examples, expected {len(data)}")
        probas = [dict(zip(labels, row)) if row is not None else {} for row in result["proba"]]
        out[m] = {"proba": probas, "cpu_s": result["cpu_s"], "no_prediction": result["no_prediction"]}
    return out


class Replay:
    """A model that answers with predictions made elsewhere (MOA's, in order) and learns
    nothing itself: what lets :func:`bench.forests.run_one` score MOA like every other model."""

    def __init__(self, probas: list[dict]) -> None:
        self.probas = iter(probas)

    def predict_proba_one(self, x: dict) -> dict:
        return next(self.probas)

    def learn_one(self, x: dict, y: Any) -> None:
        pass


def prequential_task(model: str, arff: Path, n: int) -> str:
    """The ``EvaluatePrequential`` task MOA's own command line runs for ``model`` on ``arff``:
    the whole file, one evaluation at its end."""
    cls, options = MOA_PEERS[model]
    learner = cls.removeprefix("moa.classifiers.")
    learner = f"({learner} {options})" if options else learner
    return f"EvaluatePrequential -l {learner} -s (ArffFileStream -f {arff}) -i {n} -f {n}"


def evaluation_cpu_seconds(csv: str) -> float:
    """MOA's "evaluation time (cpu seconds)" from the learning curve it prints (CSV, header
    first, one row per evaluation): the last row's."""
    lines = [line for line in csv.strip().splitlines() if line.count(",") > 3]
    header = lines[0].split(",")
    column = next(i for i, name in enumerate(header) if name.startswith("evaluation time"))
    if "cpu" not in header[column]:
        raise RuntimeError(f"MOA did not time in CPU seconds: {header[column]!r}")
    return float(lines[-1].split(",")[column])


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def java_prequential(model: str, arff: Path, n: int, cwd: Path) -> dict[str, float]:
    """Run ``moa.DoTask EvaluatePrequential`` with ``java`` on MOA's jar, in a fresh JVM (no
    Python in the loop): MOA's CPU seconds of its prequential loop (the loop thread's CPU time,
    start-up excluded) and the whole JVM's CPU seconds (start-up, JIT and GC threads included)."""
    jar = moa_jar()
    if jar is None:
        raise RuntimeError("MOA is not installed: run `make .venv-moa/bin/.installed`")
    before = _children_cpu()
    done = subprocess.run(
        ["java", "-cp", str(jar), "moa.DoTask", prequential_task(model, arff, n)],
        cwd=cwd,
        capture_output=True,
        text=True,
    )
    if done.returncode != 0:
        raise RuntimeError(f"moa.DoTask failed ({done.returncode}): {done.stderr[-2000:]}")
    return {"cpu_s": evaluation_cpu_seconds(done.stdout), "jvm_cpu_s": _children_cpu() - before}


def java_version() -> str:
    """The first line ``java -version`` prints (to stderr), e.g. ``openjdk version "17.0.15"``."""
    done = subprocess.run(["java", "-version"], capture_output=True, text=True)
    return (done.stderr or done.stdout).splitlines()[0].strip() if done.returncode == 0 else "java not found"
