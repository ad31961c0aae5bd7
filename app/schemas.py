"""Request and response bodies of the HTTP API (pydantic models with ``Field`` constraints).

Structure and types are checked here; limits that are settings (batch size, features per
event, string lengths, labels per model) are checked by :mod:`app.validation`.
"""

from __future__ import annotations

from typing import Annotated, Any, NotRequired, Self

from pydantic import BaseModel, ConfigDict, Field, SkipValidation, WithJsonSchema, model_validator
from typing_extensions import TypedDict

from streamtree.client.encoding import INT_BOUND  # the wire format's integers, one definition

__all__ = [
    "MODEL_NAME",
    "Costs",
    "DecideBatchResult",
    "DecideBody",
    "DecideResult",
    "Event",
    "FeatureValue",
    "Features",
    "Health",
    "INT_BOUND",
    "IdInstance",
    "Label",
    "LearnBody",
    "LoggedEvent",
    "LoggedEvents",
    "LearnResult",
    "ModelInfo",
    "PredictBody",
    "PredictResult",
    "label_key",
]


# Feature values, labels and ids are validated by app.validation in one pass over each event
# (types, finiteness, integer range, string length), which gives one clear message per field;
# a pydantic union would report one error per member. The JSON schema still says what is
# accepted, for /docs and for schema-driven clients and tests.
#: A model's name: letters, digits, '_', '.', '-', at most 64, starting with a letter or digit.
MODEL_NAME = r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}"

_NUMBER = {"type": "number"}
_INT = {"type": "integer", "minimum": -INT_BOUND, "maximum": INT_BOUND - 1}

FeatureValue = Annotated[
    Any,
    WithJsonSchema(
        {
            "anyOf": [_NUMBER, {"type": "string"}, {"type": "boolean"}, {"type": "null"}],
            "description": "A finite number (numeric feature), a string or boolean (nominal), or null (missing).",
        }
    ),
]
Features = Annotated[
    dict[str, FeatureValue],
    Field(description="Feature name to value; flat (no nested objects or arrays)."),
]
Label = Annotated[
    Any,
    WithJsonSchema(
        {
            "anyOf": [{"type": "string"}, _INT, {"type": "boolean"}],
            "description": "A class label: string, integer or boolean; one type per model.",
        }
    ),
]
EventId = Annotated[
    Any,
    WithJsonSchema(
        {"anyOf": [{"type": "string"}, _INT], "description": "Correlates a prediction with its label arriving later."}
    ),
]
# Costs are checked by app.validation.check_costs (with the library's checks), which names
# the decision and label of a bad cost; the schema says what is accepted.
Costs = Annotated[
    Any,
    WithJsonSchema(
        {
            "type": "object",
            "minProperties": 1,
            "additionalProperties": {"type": "object", "minProperties": 1, "additionalProperties": {"type": "number"}},
            "description": "Decision to {label: cost}: what each decision costs when each label turns out true "
            "(negative for a gain). Finite numbers of magnitude at most 1e300; every decision needs a "
            "cost for every label the model has seen (labels as in `probabilities`).",
            "examples": [{"approve": {"fraud": 1000, "ok": 0}, "challenge": {"fraud": 90, "ok": 90}}],
        }
    ),
]


MinSeq = Annotated[
    int | None,
    Field(
        strict=True,
        ge=0,
        le=INT_BOUND - 1,
        description="Read your writes: wait (a few seconds at most, `min_seq_timeout_seconds`) until this "
        "instance has applied the model's event `min_seq` (a learn's `seq`); 503 past the bound.",
    ),
]


class _Body(BaseModel):
    model_config = ConfigDict(extra="forbid")


class Event(TypedDict):
    """One labelled event, or (``id`` + ``label`` without features) a delayed label.

    A typed dict rather than a model: a batch holds thousands, and validating each into a
    model instance would cost more than learning it. In a batch, its structure (an object of
    these keys, ``label`` present, ``features`` an object) is checked by
    :func:`app.validation.check_event`, and that it has ``features`` or an ``id`` with the
    limits.
    """

    __pydantic_config__ = ConfigDict(extra="forbid")  # type: ignore[misc]

    features: NotRequired[Features | None]
    label: Label
    id: NotRequired[EventId | None]


class IdInstance(TypedDict):
    """An instance of a batch prediction sent with an id, to be labelled later.

    Told apart from a features object by its ``features`` being an object (a feature value
    never is); checked, with the features objects of the batch, by
    :func:`app.validation.check_instances`.
    """

    __pydantic_config__ = ConfigDict(extra="forbid")  # type: ignore[misc]

    features: Features
    id: EventId | None


# An instance of a batch: its features, or its features and an id. The items are checked by
# app.validation.check_instances in the same pass as their values, as the events of a learn
# batch are (the schema still describes them).
Instances = Annotated[
    list[SkipValidation[Features | IdInstance]] | None,
    Field(
        min_length=1,
        description="The batch: each instance a features object, or "
        '`{"features": {...}, "id": ...}` to label it later by its id (as a single prediction\'s `id`).',
    ),
]


class LearnBody(_Body):
    """One event (``features``/``label``/``id``) or a batch (``events``)."""

    features: Features | None = None
    label: Label | None = None
    id: EventId | None = None
    # Each event's structure is checked by app.validation.check_event in the same pass as its
    # values (the schema still describes it): pydantic's own pass over a batch cost about as
    # much as encoding its events for the model (docs/decisions/request-path.md).
    events: list[SkipValidation[Event]] | None = Field(default=None, min_length=1)

    model_config = ConfigDict(
        extra="forbid",
        json_schema_extra={
            "examples": [
                {"features": {"colour": "red", "size": 3.5}, "label": "yes"},
                {"events": [{"features": {"size": 1.0}, "label": "no"}, {"id": "req-7", "label": "yes"}]},
            ]
        },
    )

    @model_validator(mode="after")
    def _one_or_many(self) -> Self:
        single = self.features is not None or self.label is not None or self.id is not None
        if self.events is not None:
            if single:
                raise ValueError("send either one event (features, label, id) or 'events', not both")
        elif self.label is None:
            raise ValueError("a single event needs a 'label' (or send 'events')")
        elif self.features is None and self.id is None:
            raise ValueError("an event needs 'features', or an 'id' of an earlier prediction")
        return self


class LearnResult(BaseModel):
    """Sent once the request's events are durable."""

    learned: int = Field(description="Number of events learned.")
    seq: int = Field(description="Sequence number of the request's last event (0: none).")


class PredictBody(_Body):
    """One instance (``features``, optional ``id``) or a batch (``instances``, each with an
    optional id); optionally ``min_seq``."""

    features: Features | None = None
    id: EventId | None = None
    instances: Instances = None
    min_seq: MinSeq = None

    model_config = ConfigDict(
        extra="forbid",
        json_schema_extra={
            "examples": [
                {"features": {"colour": "red", "size": 3.5}, "id": "req-7"},
                {"instances": [{"size": 1.0}, {"size": 9.0}]},
                {"instances": [{"features": {"size": 1.0}, "id": "req-8"}, {"size": 9.0}]},
            ]
        },
    )

    @model_validator(mode="after")
    def _one_or_many(self) -> Self:
        if (self.features is None) == (self.instances is None):
            raise ValueError("send exactly one of 'features' or 'instances'")
        if self.instances is not None and self.id is not None:
            raise ValueError(
                "'id' goes with a single 'features' object; in 'instances', "
                'give each instance its own id: {"features": {...}, "id": ...}'
            )
        return self


class PredictResult(BaseModel):
    """Class probabilities keyed by label (booleans as ``"true"``/``"false"``), and the seq they were computed at."""

    probabilities: dict[str, float] | list[dict[str, float]]
    seq: int = Field(
        description="The model's last applied event on this instance when it predicted: every "
        "instance of a deployment at this seq predicts the same, bit for bit."
    )


class DecideBody(_Body):
    """One instance (``features``, optional ``id``) or a batch (``instances``, each with an
    optional id), and the ``costs``."""

    features: Features | None = None
    id: EventId | None = None
    instances: Instances = None
    costs: Costs

    model_config = ConfigDict(
        extra="forbid",
        json_schema_extra={
            "examples": [
                {
                    "features": {"amount": 1000, "country": "NZ"},
                    "costs": {"approve": {"fraud": 1000, "ok": 0}, "challenge": {"fraud": 90, "ok": 90}},
                },
                {
                    "instances": [{"amount": 1000}, {"amount": 20}],
                    "costs": {"approve": {"fraud": 1000, "ok": 0}, "challenge": {"fraud": 90, "ok": 90}},
                },
            ]
        },
    )

    @model_validator(mode="after")
    def _one_or_many(self) -> Self:
        if (self.features is None) == (self.instances is None):
            raise ValueError("send exactly one of 'features' or 'instances'")
        if self.instances is not None and self.id is not None:
            raise ValueError(
                "'id' goes with a single 'features' object; in 'instances', "
                'give each instance its own id: {"features": {...}, "id": ...}'
            )
        return self


class DecideResult(BaseModel):
    """The decision of least expected cost for one instance."""

    decision: str = Field(description="The decision of least expected cost (on a tie, the first in `costs`).")
    expected_costs: dict[str, float] = Field(description="Each decision's expected cost, in the order of `costs`.")
    probabilities: dict[str, float] = Field(description="The probabilities decided from, as `/predict_proba`.")
    seq: int = Field(description="The model's last applied event on this instance, as `/predict_proba`'s.")


class DecideBatchResult(BaseModel):
    """The decisions for a batch: row ``i`` of each list is instance ``i``'s."""

    decisions: list[str]
    expected_costs: list[dict[str, float]]
    probabilities: list[dict[str, float]]
    seq: int = Field(description="The model's last applied event on this instance, as `/predict_proba`'s.")


class ExplainBody(_Body):
    """The instance to explain."""

    features: Features


class ModelInfo(BaseModel):
    """A model: its complete config, a summary of its tree and its last sequence number."""

    name: str
    config: dict[str, Any]
    summary: dict[str, Any]
    seq: int = Field(description="Number of events learned and logged (last sequence number).")
    labels: list[str] = Field(
        default_factory=list,
        description="The model's labels as the keys of its probabilities (booleans as "
        '`"true"`/`"false"`, integers in decimal, exact however large), in the order of `summary.classes`.',
    )


class Health(BaseModel):
    """Liveness (``ok`` once models are loaded), this instance's role and each model's applied seq."""

    status: str
    role: str = Field(
        description="`writer` (learns and logs events) or `replica` (follows the log, forwards "
        "writes to the writer); a single instance on SQLite is the writer."
    )
    seq: dict[str, int] = Field(description="Model name to the last event applied on this instance.")
    unavailable: dict[str, str] | None = Field(
        default=None,
        description="Only when some model cannot be restored: model name to the reason. Such a model "
        "answers 503 with the reason and is retried in the background; the others serve.",
    )


class LoggedEvent(BaseModel):
    """One event of a model's log: its number, and the features and label it was learned with."""

    seq: int = Field(description="The event's sequence number.")
    features: Features
    label: Label


class LoggedEvents(BaseModel):
    """A page of a model's event log, in ``seq`` order."""

    events: list[LoggedEvent]


def label_key(label: Any) -> str:
    """The JSON object key of a label: booleans as ``true``/``false``, integers in decimal."""
    if label is True:
        return "true"
    if label is False:
        return "false"
    return str(label)


class ForkProgress(BaseModel):
    """How far a fork is (:mod:`app.forks`): the events it learned of the model it follows."""

    model_config = ConfigDict(populate_by_name=True, serialize_by_alias=True)

    source: str = Field(alias="from", description="The model it follows.")
    seq: int = Field(description="The source's events learned (the fork's last seq).")
    source_seq: int | None = Field(description="The source's last seq on this instance.")
    state: str = Field(
        description="`replaying` (catching up with the source's log), `following` (learning each new "
        "event of the source as it is logged) or `stopped` (an event it could not learn: see `error`)."
    )
    error: str | None = Field(default=None, description="Why it stopped, if it did.")


class ForkedModelInfo(ModelInfo):
    """A model, and for a fork how far it is (``fork``; absent for an ordinary model)."""

    fork: ForkProgress | None = None


class ForkedModelList(BaseModel):
    """All models, forks with their progress."""

    models: list[ForkedModelInfo]
