"""Stores in PostgreSQL: many hosts, one store, ``memcommit.open("postgresql://...")``.

A fleet that spans hosts cannot share a log file. With the ``postgres`` extra
(``pip install 'memcommit[postgres]'``), a store can live in a PostgreSQL database the fleet
already runs: ``memcommit.open("postgresql://user@host/db?store=team-a")`` returns a
:class:`~memcommit.MemoryStore` whose commits, guards and role operations hold across every
host that opens the same store, with the same records, checked by the same code, as a log
file. How: :mod:`.engine`. The URL: :mod:`.dsn`. The tables: :mod:`.schema`. Metrics in the
Prometheus format: :func:`metrics` (:mod:`.metrics`).
"""

from __future__ import annotations

from .dsn import Target, is_postgres_url, parse
from .metrics import metrics

# The engine (memcommit.postgres.engine) is not imported here: the store imports this package
# for its URL check, and the engine imports the store's own modules.
__all__ = ["Target", "is_postgres_url", "metrics", "parse"]
