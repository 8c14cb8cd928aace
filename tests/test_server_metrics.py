"""``/v1/metrics``: a well-formed Prometheus exposition whatever clients ask, values exact.

The server runs in this process (Starlette's test client drives its ASGI app).
"""

from __future__ import annotations

import re
from pathlib import Path

from starlette.testclient import TestClient

from memcommit.prometheus import labels
from memcommit.server.http import MemoryServer
from memcommit.server.metrics import Metrics
from memcommit.server.writer import Identity

TOKEN = "a-test-token-that-is-long-enough"

# A sample line of the text format: a name, labels whose values escape \ " and line feeds,
# and a value.
_LABEL = r'[a-zA-Z_][a-zA-Z0-9_]*="(?:[^"\\\n]|\\[\\"n])*"'
_SAMPLE = re.compile(
    rf"memcommit_[a-z_]+(?:\{{{_LABEL}(?:,{_LABEL})*\}})? "
    r"(?:[+-]?[0-9]+(?:\.[0-9]+)?(?:e[+-]?[0-9]+)?|[+-]Inf|NaN)"
)


def check_exposition(text: str) -> list[str]:
    """The sample lines of `text`, each checked against the format."""
    samples = []
    for line in text.splitlines():
        if line.startswith("# HELP memcommit_") or line.startswith("# TYPE memcommit_"):
            continue
        assert _SAMPLE.fullmatch(line), f"not a sample line: {line!r}"
        samples.append(line)
    return samples


def test_paths_are_counted_by_route_and_escaped(tmp_path: Path) -> None:
    server = MemoryServer(tmp_path / "memory.db", token=TOKEN)
    auth = {"Authorization": f"Bearer {TOKEN}"}
    with TestClient(server.app) as client:
        # Paths the server has no route for, with and without the token: a quote, a
        # backslash and a line feed that would forge a sample; then many different ones.
        for path in ("/v1/a%22b", "/v1/back%5Cslash", "/v1/%0Afake_metric%201", "/nope"):
            assert client.get(path, headers=auth).status_code == 404
        for i in range(50):
            assert client.get(f"/v1/unknown-{i}").status_code == 401
        assert client.get("/v1/info").status_code == 401
        assert client.get("/v1/info", headers=auth).status_code == 200
        text = client.get("/v1/metrics", headers=auth).text
    samples = check_exposition(text)
    assert not any("fake_metric" in line for line in samples)
    requests = [line for line in samples if line.startswith("memcommit_http_requests_total")]
    paths = {re.search(r'path="([^"]*)"', line).group(1) for line in requests}  # type: ignore[union-attr]
    assert paths == {"other", "/v1/info"}
    assert 'memcommit_http_requests_total{path="other",status="401"} 50' in requests
    assert 'memcommit_http_requests_total{path="other",status="404"} 4' in requests


def test_values_are_written_exactly() -> None:
    metrics = Metrics()
    metrics.observe(0.1234567891)
    started = 1796666876.025234
    text = metrics.text(up=True, ident=Identity("s", 3, 1_234_567), writer=None, started=started)
    samples = check_exposition(text)
    assert "memcommit_lsn 1234567" in samples
    assert "memcommit_generation 3" in samples
    assert f"memcommit_start_time_seconds {started!r}" in samples
    assert "memcommit_commit_seconds_sum 0.1234567891" in samples
    assert "memcommit_commit_seconds_count 1" in samples
    assert 'memcommit_commit_seconds_bucket{le="+Inf"} 1' in samples


def test_label_values_are_escaped() -> None:
    assert labels(path='a"b\\c\nd', status=200) == '{path="a\\"b\\\\c\\nd",status="200"}'
