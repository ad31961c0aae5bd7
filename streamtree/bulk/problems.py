"""What goes wrong in a bulk command, said in one line.

A user's error (a file, a column, a row, an option) is a :class:`BulkError`; the client's
exceptions (the service's answers, a service that does not answer) become one with
:func:`explain`, which names the URL, the model and, for a refused event, the file's row and
column. The commands end with ``SystemExit("streamtree learn: <line>")``: exit status 1.
"""

from __future__ import annotations

from collections.abc import Callable

from streamtree.client.errors import (
    Conflict,
    ConnectionFailed,
    InvalidRequest,
    NotFound,
    ServiceError,
    Unauthorized,
    UnexpectedAnswer,
    shown_url,
)

__all__ = ["BulkError", "explain"]

#: Where a request's events (a learn) or instances (a prediction) are, in a 422's ``loc``.
_BATCH_LOCS = (["body", "events"], ["body", "instances"])


class BulkError(Exception):
    """A user's error, said in one line (the command's name is put before it)."""


def explain(
    e: ServiceError | ConnectionFailed,
    url: str,
    model: str,
    row_of: Callable[[int], str] | None = None,
    creatable: bool = True,
    rows: int | None = None,
) -> BulkError:
    """One line for a client's exception.

    ``row_of(i)`` names the file's row (and its column, if the service named a feature) of
    the ``i``-th event of the request refused, one of ``rows``; ``creatable`` says whether
    ``--create`` is an option of the command.
    """
    url = shown_url(url)
    if isinstance(e, ConnectionFailed):
        return BulkError(f"no answer from the service at {url} (is it running? --url or STREAMTREE_URL): {e}")
    if isinstance(e, UnexpectedAnswer):
        return BulkError(f"{url} did not answer as a streamtree service does (--url or STREAMTREE_URL): {e.message}")
    if isinstance(e, Unauthorized):
        what = "needs an API key" if e.status == 401 else "refused the API key"
        return BulkError(f"the service at {url} {what} ({e.line()}): pass --token or set STREAMTREE_TOKEN")
    if isinstance(e, NotFound):
        hint = " (create it with --create CONFIG.json; {} for the default config)" if creatable else ""
        return BulkError(f"no model {model!r} at {url}{hint}")
    if isinstance(e, Conflict):
        return BulkError(f"model {model!r}: {e.line()}")
    reason = e.message.rstrip(".")
    if e.status == 413:  # the chunk's body is over the service's max_body_bytes
        if rows == 1 and row_of is not None:  # --batch-size cannot help
            return BulkError(
                f"{row_of(0)} alone is over the body limit of the service at {url} ({reason}; its "
                "max_body_bytes): it cannot be sent; shorten its values, or raise the service's limit"
            )
        return BulkError(f"the service at {url} refused a chunk ({reason}; its max_body_bytes): lower --batch-size")
    if isinstance(e, InvalidRequest) and e.loc and list(e.loc) in _BATCH_LOCS:
        if e.errors and e.errors[0].get("type") == "too_long":  # more events than the service's max_batch
            return BulkError(f"the service at {url} refused a chunk ({reason}): lower --batch-size")
    if isinstance(e, InvalidRequest) and row_of is not None and e.loc:
        loc = list(e.loc)
        if len(loc) >= 3 and loc[:2] in _BATCH_LOCS and isinstance(loc[2], int):
            where = row_of(loc[2])
            rest = [str(p) for p in loc[3:]]
            if len(rest) >= 2 and rest[0] == "features":
                where += f", column {rest[1]!r}"
            elif rest == ["label"]:
                where += ", the label"
            return BulkError(f"{where}: the service refused it: {e.message}")
    return BulkError(f"the service at {url} refused the request: {e.line()}")
