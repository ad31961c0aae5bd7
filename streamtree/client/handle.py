"""What a client and a remote model are when copied: handles to a service, not its state."""

from __future__ import annotations

from typing import Any, Self

__all__ = ["Handle"]


class Handle:
    """A connection to a service, or to a model on it.

    It does not pickle or deep-copy: what it stands for (the model, learned on the service)
    would not travel with it, its connections cannot, and its token should not. ``copy.copy``
    gives another handle to the same service or model.
    """

    def _remade_by(self) -> str:
        """How another process gets the same handle (for the refusal's message)."""
        raise NotImplementedError

    def __reduce_ex__(self, protocol: Any) -> Any:
        raise TypeError(
            f"{self!r} is a handle to a streamtree service, not a copy of its state: it does not "
            f"pickle or deep-copy. In another process, make one with {self._remade_by()}"
        )

    def __copy__(self) -> Self:
        other = object.__new__(type(self))
        other.__dict__.update(self.__dict__)
        return other
