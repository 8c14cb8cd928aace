"""Threads that run for a set number of seconds, for the throughput benches.

``benches/roles.py`` and ``benches/server.py`` both measure what their threads did in a
fixed time: start them, wait until each is ready, let them run, stop them, and divide by the
time that actually passed.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence


def run_for(
    seconds: float,
    threads: Sequence[threading.Thread],
    go: Callable[[], object],
    stop: threading.Event,
) -> float:
    """Start `threads`, call `go` (it returns when they are all ready), let them run for
    `seconds`, then set `stop` and join them. Returns the seconds from `go` to the end."""
    for thread in threads:
        thread.start()
    go()
    began = time.perf_counter()
    time.sleep(seconds)
    stop.set()
    for thread in threads:
        thread.join()
    return time.perf_counter() - began
