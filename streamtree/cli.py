"""The ``streamtree`` console script.

``streamtree serve`` and ``streamtree demo`` run the service and its demo stream; they need
the ``server`` extra (``pip install "./streamtree[server]"`` from a clone), imported only when asked for, so
the library and the client install without it. ``streamtree learn`` and ``streamtree predict``
bulk-learn and score files through the client (:mod:`streamtree.client`).

Each command is a module with ``main(argv) -> None`` (it raises ``SystemExit`` with a one-line
message on a user's error), imported only when that command runs: ``streamtree --help``
starts in milliseconds and a command's dependencies are its own.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Sequence

__all__ = ["COMMANDS", "main"]

#: Command -> (module whose ``main(argv)`` runs it, one line of help).
COMMANDS: dict[str, tuple[str, str]] = {
    "serve": ("streamtree_server.cli", "Run the HTTP service (streamtree serve --help)."),
    "demo": ("streamtree_server.cli", "Post a drifting stream to a running service, to watch on /dashboard."),
    "learn": ("streamtree.bulk.learn", "Learn a CSV, Parquet or JSON-lines file (or stdin) into a model."),
    "predict": ("streamtree.bulk.predict", "Write a model's probabilities (or decisions) for each row of a file."),
}

_SERVER_EXTRA = (
    'The service needs the server extra: install streamtree with it (from a clone: pip install "./streamtree[server]";'
    ' from a wheel: pip install "streamtree-<version>-py3-none-any.whl[server]")'
)


def _usage() -> str:
    width = max(map(len, COMMANDS))
    lines = [f"  {name:<{width}}  {text}" for name, (_, text) in COMMANDS.items()]
    return "usage: streamtree COMMAND [options]\n\ncommands:\n" + "\n".join(lines) + "\n"


def main(argv: Sequence[str] | None = None) -> None:
    """Run the command named by the first argument with the rest."""
    args = list(sys.argv[1:] if argv is None else argv)
    if not args or args[0] in ("-h", "--help"):
        sys.stdout.write(_usage()) if args else sys.stderr.write(_usage())
        raise SystemExit(0 if args else 2)
    command, rest = args[0], args[1:]
    if command not in COMMANDS:
        sys.stderr.write(f"streamtree: unknown command {command!r}\n\n{_usage()}")
        raise SystemExit(2)
    module_name = COMMANDS[command][0]
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        if module_name.startswith("streamtree_server") and not (exc.name or "").startswith("streamtree"):
            # a server dependency (fastapi, uvicorn, ...) is missing: the extra was not installed
            raise SystemExit(f"streamtree {command}: {_SERVER_EXTRA} (missing module {exc.name!r}).") from None
        raise
    # the server's script takes its command as its first argument (it parses serve and demo)
    module.main(args if module_name == "streamtree_server.cli" else rest)
