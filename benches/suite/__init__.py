"""The benchmark suite: memcommit beside its peers, and its costs on large generated logs.

Run it with pytest-benchmark (``pip install 'memcommit[bench]'``)::

    make bench                                          # the default size (1m), JSON + tables
    python -m pytest benches/suite --bench-size 1m --benchmark-json out.json
    python -m pytest benches/suite --bench-size 10m --benchmark-json out.json -k compact
    python -m pytest -q benches/suite --benchmark-disable --bench-size tiny   # the smoke run
    python benches/tables.py out.json                   # the Markdown tables
    python benches/tables.py 1m.json 10m.json 50m.json  # and how each figure grows with N

One group per figure, so memcommit and each peer sit side by side in one table:

* ``test_peers``: batch puts, durable commits, open, get; against SQLite (WAL,
  ``synchronous=FULL``), LMDB (the ``lmdb`` package) and RocksDB (the ``rocksdict`` package,
  a maintained binding with wheels on PyPI). A peer whose package does not import is skipped,
  with the reason.
* ``test_langgraph``: memcommit's LangGraph saver and store against LangGraph's
  ``InMemorySaver`` / ``InMemoryStore`` (and ``SqliteSaver`` / ``SqliteStore``).
* ``test_logs``: on the generated log of the size (:mod:`suite.loggen`, built once per size
  into ``benches/.cache`` or ``$MEMCOMMIT_BENCH_CACHE``): its build through the public API,
  log compaction on a fresh copy per round, compaction with retention, the reopen after it,
  verify, snapshot save, the open from a snapshot, by full replay and from the index file,
  each against ``cp`` plus ``sync`` of the same file.
* ``test_calls``: what one call costs on that log, p50 and p99 (``get``, ``find`` by kind and
  task, by tier, by status, ``history``, ``records(after=)`` near the head), and on a run
  queue added to a copy of it (``claim_next``, its first call after open, ``runs.list`` by
  status).

``--bench-size`` (:mod:`suite.sizes`): ``tiny`` (a 20k-record log, for smoke runs), ``1m``,
``10m``, ``50m`` (records in the generated log). The main test command does not collect this
directory (pyproject's ``testpaths``); ``make bench-smoke`` runs it.
"""
