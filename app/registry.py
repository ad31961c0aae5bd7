"""The set of hosted models: loaded at start, created and deleted over HTTP, closed at stop.

The service always starts: a model that cannot be rebuilt from the store is hosted
unavailable (503 saying why, :mod:`app.recovery`) and the others serve. The registry knows
nothing of the deployment: the node (:class:`app.node.Node`) hands it callables that say
whether this instance writes and that report a fenced commit, a change of health and the
log's end of a stored model.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable
from typing import Any

import orjson

from streamtree.exceptions import ConfigError, StreamtreeError

from .exceptions import ConfigConflict, Conflict, NotWriter, SourceGone, StoreUnavailable, TooManyModels
from .forks import ForkHost, differences, followers, source_of
from .hosting import ModelHost
from .learning import FORK_FIELD, SERVICE_FIELDS, restore, split_config
from .recovery import placeholder, reason_of
from .settings import Settings
from .storage import LeaseLost, ModelExists, StorageError, StoredModel
from .storage.thread import StoreThread
from .telemetry import Telemetry
from .validation import Limits, check_costs, check_names, field_error

__all__ = ["DEFAULT_MODEL", "Registry"]

log = logging.getLogger("streamtree.app")

DEFAULT_MODEL = "default"


def _canonical(config: dict[str, Any]) -> tuple[dict[str, Any], str]:
    """The config as stored (JSON text, sorted keys) and as read back from it."""
    text = orjson.dumps(config, option=orjson.OPT_SORT_KEYS).decode()
    return orjson.loads(text), text


def default_model_cls() -> Any:
    """``streamtree.estimators.ESTIMATORS`` (a tree or a forest from one config), imported
    when first needed."""
    from streamtree.estimators import ESTIMATORS

    return ESTIMATORS


def config_of(model_cls: Any, model: Any) -> dict[str, Any]:
    """A model's complete config, as ``model_cls`` rebuilds it."""
    describe = getattr(model_cls, "config_of", None)
    return describe(model) if describe is not None else dict(model.get_config())


def param_names(model_cls: Any, config: dict[str, Any]) -> frozenset[str]:
    """The parameters ``config`` may hold (for its estimator, when ``model_cls`` has several)."""
    names = getattr(model_cls, "param_names", None)
    return frozenset(names(config)) if names is not None else frozenset(model_cls().get_config())


class Registry:
    """All models of the service, each owned by one :class:`~app.hosting.ModelHost`.

    Parameters
    ----------
    settings
        Service settings (data directory, limits).
    telemetry
        Prometheus metrics; the registry's models are reported at each scrape.
    model_cls
        Builds models from configs (``model_cls(**config)``, ``model_cls.from_bytes``); by
        default :data:`streamtree.estimators.ESTIMATORS`: a tree or, with
        ``"estimator": "forest"``, a forest.
    writable
        Whether this instance is the writer now (always, by default: a store of its own); only
        the writer learns, creates and deletes.
    on_fenced
        Called when the store refused a write because another instance holds the writer's lease.
    on_health_changed
        Called when a model became unavailable or available again.
    notice
        Called with ``(model, seq)`` for each stored model when the set of models is re-read:
        the log holds the model's events up to ``seq``.
    """

    def __init__(
        self,
        settings: Settings,
        telemetry: Telemetry,
        model_cls: Any = None,
        *,
        writable: Callable[[], bool] = lambda: True,
        on_fenced: Callable[[], None] = lambda: None,
        on_health_changed: Callable[[], None] = lambda: None,
        notice: Callable[[str, int], None] = lambda model, seq: None,
    ) -> None:
        self.settings = settings
        self.telemetry = telemetry
        self.model_cls = model_cls if model_cls is not None else default_model_cls()
        self.hosts: dict[str, ModelHost] = {}
        self.generations: dict[str, int] = {}  # the stored generation each hosted model was loaded from
        self.writable = writable
        self.on_fenced = on_fenced
        self.on_health_changed = on_health_changed
        self.notice = notice
        self._db: StoreThread | None = None
        self._admin = asyncio.Lock()
        telemetry.watch_models(lambda: list(self.hosts.values()))

    @property
    def db(self) -> StoreThread:
        """The store and its thread (after :meth:`open`)."""
        assert self._db is not None, "Registry.open() was not called"
        return self._db

    async def open(self, db: StoreThread) -> None:
        """Host every model of the store, each restored from its snapshot and log (the
        store's first start and its ``default`` model are the node's: :meth:`app.node.Node.open`)."""
        self._db = db
        for stored in await db.run(db.store.models):
            await self._load(stored)

    async def _load(self, stored: StoredModel) -> None:
        """Host a stored model, restored from its snapshot and log; unavailable (503 saying
        why, retried by :class:`app.recovery.Recovery`) if it cannot be."""
        try:
            stored_config = orjson.loads(stored.config)
            from_stored = getattr(self.model_cls, "from_stored", None)
            if from_stored is not None:  # parameters added since: the values that rebuild the stored model
                stored_config = from_stored(stored_config)
            restored = await self.db.run(
                restore, self.db.store, stored.name, stored_config, self.model_cls, self.settings
            )
            # complete, as a config created now is: parameters added since it was stored take the
            # values that rebuild it (ESTIMATORS.from_stored), the others their defaults
            config = _canonical(config_of(self.model_cls, restored.model) | split_config(stored_config)[1])[0]
        except Exception as exc:  # the service starts whatever one model's state: this one answers 503
            log.exception(
                "model %r cannot be rebuilt from the store; it is unavailable, the others are served", stored.name
            )
            self._unavailable(stored, reason_of(exc))
            return
        self._host(stored.name, config, restored, stored.generation)
        log.info("model %r restored at seq %d (snapshot at %d)", stored.name, restored.seq, restored.snapshot_seq)

    def _unavailable(self, stored: StoredModel, reason: str) -> None:
        """Host a model that could not be rebuilt: every route answers 503 with ``reason``."""
        config: dict[str, Any] = {}
        try:  # as _load completes it, as far as it goes: a later rebuild starts from this config
            config = orjson.loads(stored.config)
            from_stored = getattr(self.model_cls, "from_stored", None)
            config = from_stored(config) if from_stored is not None else config
        except Exception:  # not even the config: the 503 gives the rebuild's reason all the same
            config = config if isinstance(config, dict) else {}
        restored = placeholder(config, self.model_cls, self.settings)
        if restored.model is not None:
            config = _canonical(config_of(self.model_cls, restored.model) | split_config(config)[1])[0]
        host = self._host(stored.name, config, restored, stored.generation)
        host.recovering, host.unavailable = True, reason
        self.on_health_changed()

    def _host(self, name: str, config: dict[str, Any], restored: Any, generation: int) -> ModelHost:
        args = (name, config, restored, self.model_cls, self.settings, self.db, self.telemetry)
        source = source_of(config)
        host = (
            ModelHost(*args, writable=self.writable)
            if source is None
            else ForkHost(*args, writable=self.writable, source=source)
        )
        host.on_fenced = self.on_fenced
        host.on_unavailable = self.on_health_changed
        self.hosts[name] = host
        self.generations[name] = generation
        return host

    async def _drop(self, name: str) -> None:
        """Stop hosting a model (deleted, here or by the writer); its store rows are not touched."""
        host = self.hosts.pop(name)
        self.generations.pop(name, None)
        await host.close(snapshot=False)
        self.telemetry.forget_model(name)
        self.on_health_changed()

    async def sync_models(self) -> None:
        """Host the stored models this instance does not, and drop those no longer stored (a
        replica following the writer's creations and deletions)."""
        async with self._admin:
            stored = {m.name: m for m in await self.db.run(self.db.store.models)}
            for name in list(self.hosts):
                if name not in stored or stored[name].generation != self.generations.get(name):
                    log.info("model %r deleted by the writer", name)
                    await self._drop(name)
            for name, m in stored.items():
                self.notice(name, m.last_seq)
                if name not in self.hosts:
                    await self._load(m)

    async def close(self, snapshot: bool) -> None:
        """Finish every model's queued writes and, with ``snapshot`` (the writer), snapshot it;
        the store stays open (the node closes it)."""
        for host in list(self.hosts.values()):
            try:
                await host.close(snapshot=snapshot)
            except Exception:
                log.exception("model %r: closing failed", host.name)
        self.hosts.clear()
        self._db = None

    def get(self, name: str) -> ModelHost | None:
        """The model named ``name``, if any."""
        return self.hosts.get(name)

    def all(self) -> list[ModelHost]:
        """Every model, by name."""
        return [self.hosts[k] for k in sorted(self.hosts)]

    def unavailable(self) -> dict[str, str]:
        """The models that could not be rebuilt from the store, and why."""
        return {h.name: h.unavailable for h in self.all() if h.unavailable is not None}

    def build_config(self, config: dict[str, Any]) -> tuple[dict[str, Any], str]:
        """Validate a config with the library and complete it.

        The config holds the model class's parameters and, optionally, the service's
        :data:`~app.learning.SERVICE_FIELDS`: ``costs``, a cost matrix (decision to
        ``{label: cost}``) under which the prequential metrics also score the decisions the
        predictions lead to. ``costs`` is in the complete config only when given (not null).

        Raises
        ------
        InvalidInput
            A parameter is unknown or invalid; the error names it.
        """
        known = param_names(self.model_cls, config) | (frozenset(SERVICE_FIELDS) - {FORK_FIELD})
        unknown = sorted(set(config) - known)
        if unknown:
            raise field_error(
                ("body", unknown[0]),
                f"Unknown parameter {unknown[0][:64]!r}; expected one of {', '.join(sorted(known))}",
                "config_error",
            )
        config, service = split_config(config)
        service = {k: v for k, v in service.items() if v is not None}
        if "costs" in service:  # kept as the floats the metrics use (an integer cost may exceed 64 bits)
            limits = Limits.from_settings(self.settings)
            service["costs"] = check_costs(service["costs"], ("body", "costs"), limits).to_dict()
        # the library checks the rest: a string is no list, ranges, count
        tree = config.get("tree")  # a forest's member parameters
        for params, where in ((config, ("body",)), (tree if isinstance(tree, dict) else {}, ("body", "tree"))):
            names = params.get("nominal_features")
            if isinstance(names, list):
                check_names(names, (*where, "nominal_features"), Limits.from_settings(self.settings))
        try:
            model = self.model_cls(**config)
        except ConfigError as exc:
            param = getattr(exc, "param", None)
            # "variants.1.linear": a list's index is a number, as in pydantic's locations
            parts = [int(p) if p.isdigit() else p for p in param.split(".")] if isinstance(param, str) else []
            loc = ("body", *parts)
            raise field_error(loc, str(exc), "config_error") from None
        except (StreamtreeError, ValueError, TypeError) as exc:
            raise field_error(("body",), str(exc), "config_error") from None
        return _canonical(config_of(self.model_cls, model) | service)

    async def create(self, name: str, config: dict[str, Any], source: str | None = None) -> tuple[ModelHost, bool]:
        """Create a model; return ``(host, created)``; the same config again returns the existing one.

        With ``source``, the model is a fork of that model (:mod:`app.forks`): its config also
        holds ``"from": source``, and it learns the source's logged events, from the first.

        Raises
        ------
        InvalidInput
            The config is invalid.
        Conflict
            A model of that name has a different config (409 naming each parameter that differs).
        SourceGone
            ``source`` is not a hosted model (any more).
        TooManyModels
            No more models may be created.
        """
        full, text = self.build_config(config)
        if source is not None:
            full, text = _canonical(full | {FORK_FIELD: source})
        async with self._admin:
            existing = self.hosts.get(name)
            if existing is not None:
                if existing.config != full:
                    raise _config_conflict(name, existing.config, full)
                return existing, False
            if source is not None and source not in self.hosts:
                raise SourceGone()
            if len(self.hosts) >= self.settings.max_models:
                raise TooManyModels()
            if not self.writable():
                raise NotWriter()
            try:
                await self.db.run(self.db.store.create_model, name, text)
            except ModelExists:  # not in memory but in the store: a delete or a create did not finish
                stored = await self._stored(name)
                if stored is None:
                    raise ConfigConflict() from None
                if stored.config != text:  # hosted as stored, so that a DELETE can resolve the 409
                    await self._load(stored)
                    raise _config_conflict(name, self.hosts[name].config, full) from None
            except LeaseLost:
                self.on_fenced()
                raise NotWriter() from None
            except StorageError:
                raise StoreUnavailable() from None
            try:
                stored = await self._stored(name)
            except StoreUnavailable:
                # the answer says the model was not created: undo the insert if the store lets us
                # (if not, the same PUT again finds and hosts it: ModelExists above)
                with contextlib.suppress(StorageError):
                    await self.db.run(self.db.store.delete_model, name)
                raise
            if stored is None:  # deleted meanwhile, by another instance
                raise StoreUnavailable()
            await self._load(stored)  # unavailable (503 saying why, rebuilt later) if it cannot be restored now
            host = self.hosts[name]
            async with host.apply_lock:  # nothing learned yet: the state at seq 0 is durable
                if host.seq == 0 and host.unavailable is None:
                    await host.writer.snapshots.first()  # with the metrics' settings it is created with
            return host, True

    async def delete(self, name: str) -> bool:
        """Delete a model with its log and snapshots; False if there was none.

        Requests already queued for its writer are finished first; later ones get 404.
        """
        async with self._admin:
            if name not in self.hosts:
                return False
            if forks := followers(list(self.hosts.values()), name):
                names = ", ".join(repr(f) for f in forks)
                raise Conflict(
                    f"Model {name!r} is followed by its forks {names}: delete them first "
                    "(a fork learns only its source's events)",
                    forks=forks,
                )
            if not self.writable():
                raise NotWriter()
            host = self.hosts[name]
            kept = StoredModel(name, _canonical(host.config)[1], host.seq, self.generations.get(name, 0))
            await self._drop(name)  # its queued requests finished first: nothing is logged after the delete
            try:
                await self.db.run(self.db.store.delete_model, name)
            except LeaseLost:  # the model stays in the store: the writer's, and this instance follows it
                self.on_fenced()
                raise NotWriter() from None
            except StorageError:  # the model stays in the store: hosted again from there
                await self._load(kept)
                raise StoreUnavailable() from None
            return True

    async def _stored(self, name: str) -> StoredModel | None:
        """The store's record of model ``name``, None if it has none."""
        try:
            return next((m for m in await self.db.run(self.db.store.models) if m.name == name), None)
        except StorageError:
            raise StoreUnavailable() from None


def _config_conflict(name: str, stored: dict[str, Any], requested: dict[str, Any]) -> Conflict:
    """The 409 of a ``PUT`` whose config differs from the stored one: each differing parameter,
    and how to try the requested config on the model's events instead (a fork)."""
    diff = differences(stored, requested)
    names = list(diff)
    # the message stays short (a tree against a forest differs in every parameter): all are in ``differences``
    listed = ", ".join(names) if len(names) <= 6 else f"{', '.join(names[:5])} and {len(names) - 5} more"
    return Conflict(
        f"A model with this name exists with a different config: {listed} "
        f"{'differs' if len(diff) == 1 else 'differ'}. To try this config on the events of "
        f"{name!r}, create a fork under a new name: PUT /models/{{new name}} with "
        f'{{"config": {{...}}, "{FORK_FIELD}": "{name}"}}',
        differences=diff,
    )
