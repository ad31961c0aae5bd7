"""The service's composition root: one node, built at start, owns every long-lived part.

A :class:`Node` holds the store (and its thread), the :class:`~app.registry.Registry` of
hosted models, the :class:`~app.cluster.Cluster` role (the writer's lease), the
:class:`~app.replication.Follower` that applies the log on a replica, and the
:class:`~app.recovery.Recovery` of models that could not be rebuilt. The parts do not know
one another: each gets the callables it needs (is this instance the writer? a commit was
fenced, a model's health changed, the log's end of a model was read) from the node, which
alone wires them together and opens and closes them in order.
"""

from __future__ import annotations

from typing import Any

from .cluster import Cluster
from .forks import Forks
from .recovery import Recovery
from .registry import DEFAULT_MODEL, Registry
from .replication import Follower
from .settings import Settings
from .storage import EventStore, StorageError, open_store
from .storage.thread import StoreThread
from .telemetry import Telemetry

__all__ = ["Node", "open_owned_store"]


def open_owned_store(settings: Settings) -> EventStore:
    """Open the store the settings name and take it for this server (one server per SQLite
    database; a PostgreSQL one is shared through the writer's lease).

    Raises
    ------
    StorageError
        It cannot be opened (unreachable, not a streamtree database, held by another server).
    """
    store = open_store(settings.database_url or settings.data_dir, settings.sync)
    store.own()  # a refusal lets go of the store
    try:
        store.models()  # every model's record and log end: a corrupt database stops here
    except StorageError:
        store.close()
        raise
    return store


class Node:
    """One instance of the service: its store, models, role and follower.

    Parameters
    ----------
    settings
        Service settings (the store's URL or data directory, limits, lease timing).
    telemetry
        Prometheus metrics; the models and the role are reported at each scrape.
    model_cls
        Builds models from configs (see :class:`~app.registry.Registry`).
    store
        The store, opened by :func:`open_owned_store` (``streamtree serve`` opens it before the
        server starts, so an error is one line); opened by :meth:`open` when omitted.

    Attributes
    ----------
    registry, cluster, follower, recovery, forks
        The parts, built here and wired by callables (none holds another); ``forks`` makes the
        forks learn their sources' events while this instance is the writer (:mod:`app.forks`).
    ready
        True once :meth:`open` has loaded every model, until :meth:`close` starts.
    """

    def __init__(
        self, settings: Settings, telemetry: Telemetry, model_cls: Any = None, store: EventStore | None = None
    ) -> None:
        self.settings = settings
        self._store = store
        self.telemetry = telemetry
        self.registry = Registry(
            settings,
            telemetry,
            model_cls,
            writable=self.is_writer,
            on_fenced=self.demote,
            on_health_changed=self.health_changed,
            notice=self.notice,
        )
        self.follower = Follower(self.registry, is_writer=self.is_writer)
        self.cluster = Cluster(settings, self.follower, unavailable=self.registry.unavailable, hosts=self.registry.all)
        self.recovery = Recovery(self.registry.all)
        self.forks = Forks(
            self.registry.all, self.registry.get, lambda: self.registry.db, self.is_writer, self.demote, settings
        )
        self.ready = False
        self._db: StoreThread | None = None
        telemetry.watch_cluster(self.cluster)

    # the callables the parts get: each asks or tells the part that knows
    def is_writer(self) -> bool:
        """Whether this instance is the writer now (:attr:`app.cluster.Cluster.is_writer`)."""
        return self.cluster.is_writer

    def demote(self) -> None:
        """A write was refused by the fence: stop writing (:meth:`app.cluster.Cluster.demote`)."""
        self.cluster.demote()

    def health_changed(self) -> None:
        """A model became unavailable or available again (:meth:`app.cluster.Cluster.health_changed`)."""
        self.cluster.health_changed()

    def notice(self, model: str, seq: int) -> None:
        """The log holds ``model``'s events up to ``seq`` (:meth:`app.replication.Follower.notice`)."""
        self.follower.notice(model, seq)

    @property
    def db(self) -> StoreThread:
        """The store and its thread (after :meth:`open`)."""
        assert self._db is not None, "Node.open() was not called"
        return self._db

    async def open(self) -> None:
        """Open the store, take the writer's role if free, restore every model (snapshot +
        replay); the writer creates ``default`` on the store's first start."""
        store = self._store if self._store is not None else open_owned_store(self.settings)
        self._store = None  # closed with the node: a second open() opens it again
        self._db = StoreThread(store)
        await self.cluster.open(store)
        await self.registry.open(self._db)
        self.recovery.start()
        self.forks.start()
        self.cluster.start()
        # the claim stores `default` with it: a start that fails before hosting it (or a crash)
        # leaves it in the store, where the next start finds it
        if (
            self.cluster.is_writer
            and await self.db.run(store.claim_first_start, DEFAULT_MODEL, self.registry.build_config({})[1])
            and self.registry.get(DEFAULT_MODEL) is None
        ):
            await self.registry.create(DEFAULT_MODEL, {})  # hosts the model the claim stored
        self.ready = True

    async def close(self) -> None:
        """Stop retrying and following, finish queued writes (the writer snapshots every
        model), hand the lease over, close the store."""
        self.ready = False
        await self.recovery.stop()
        await self.forks.stop()  # after the page under way: a fork's model is never ahead of its log
        await self.follower.stop()
        await self.registry.close(snapshot=self.cluster.is_writer)
        await self.cluster.close()  # hands the lease over once the writes are done
        if self._db is not None:
            self._db.close()
            self._db = None
