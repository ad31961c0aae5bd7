"""Reading benchmark datasets (ARFF, as the HGS paper's UCI collection is distributed)."""

from streamtree.datasets.arff import ArffDataset, Attribute, parse_arff, read_arff

__all__ = ["ArffDataset", "Attribute", "parse_arff", "read_arff"]
