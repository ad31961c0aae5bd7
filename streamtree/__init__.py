"""streamtree: calibrated class probabilities from a single online decision tree.

>>> from streamtree import ProbabilityTree
>>> model = ProbabilityTree()
>>> model.learn_one({"x": 1.0}, "a")
>>> model.predict_proba_one({"x": 1.0})
{'a': 1.0}
"""

from streamtree.exceptions import ConfigError, FormatError, InputError, StreamtreeError
from streamtree.tree import ProbabilityTree

__all__ = ["ConfigError", "FormatError", "InputError", "ProbabilityTree", "StreamtreeError"]
__version__ = "0.1.0"
