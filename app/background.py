"""A task of the service's own that runs on the event loop until it is stopped."""

from __future__ import annotations

import asyncio
from abc import ABC, abstractmethod

__all__ = ["LoopTask"]


class LoopTask(ABC):
    """A background coroutine (:meth:`run`) started on the running loop and cancelled by :meth:`stop`.

    Subclasses set :attr:`task_name` (the asyncio task's name, seen in tracebacks and debuggers).
    """

    task_name = "task"
    _task: asyncio.Task[None] | None = None

    @abstractmethod
    async def run(self) -> None:
        """The work; it runs until cancelled."""

    def start(self) -> None:
        """Start :meth:`run` as a task on the running loop."""
        self._task = asyncio.get_running_loop().create_task(self.run(), name=self.task_name)

    async def stop(self) -> None:
        """Cancel the task and wait for it to end (a no-op when not started)."""
        if self._task is not None:
            self._task.cancel()
            try:
                await self._task
            except asyncio.CancelledError:
                pass
            self._task = None
