"""The library's one exception family.

Every error streamtree raises on purpose derives from :class:`StreamtreeError`, and also from
the built-in exception a caller would naturally catch (``ValueError`` for bad input), so both
``except StreamtreeError`` and ``except ValueError`` work.
"""

from __future__ import annotations

__all__ = ["StreamtreeError", "ConfigError", "InputError", "FormatError", "DecisionError"]


class StreamtreeError(Exception):
    """Base class of every error raised by streamtree."""


class ConfigError(StreamtreeError, ValueError):
    """A constructor parameter is invalid: names the parameter, what was expected, what was given.

    ``param`` holds the parameter's name.
    """

    def __init__(self, message: str, param: str | None = None) -> None:
        super().__init__(message)
        self.param = param


class InputError(StreamtreeError, ValueError):
    """An example (features or label) cannot be learned or predicted; nothing was changed.

    ``field`` holds the offending feature's name, or ``"label"`` / ``"features"``.
    """

    def __init__(self, message: str, field: object = None) -> None:
        super().__init__(message)
        self.field = field


class FormatError(StreamtreeError, ValueError):
    """Serialised bytes are not a streamtree model this version can read."""


class DecisionError(StreamtreeError, ValueError):
    """Costs or probabilities given to a decision or a cost-sensitive metric are invalid
    (:mod:`streamtree.decision`, :mod:`streamtree.metrics`); the message names what was
    expected and what was given.

    ``param`` holds the parameter's name (``"costs"``, ``"proba"``, ``"classes"`` or ``"y"``),
    ``decision`` and ``label`` the decision and label concerned, where there is one (else ``None``).
    """

    def __init__(self, message: str, param: str, decision: object = None, label: object = None) -> None:
        super().__init__(message)
        self.param = param
        self.decision = decision
        self.label = label
