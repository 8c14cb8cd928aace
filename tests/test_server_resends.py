"""A resent commit against the server's memory of answers: forgotten ones, and while it drains.

The server runs in this process (Starlette's test client drives its ASGI app, lifespan
included), so a test can give it a small memory of answers and start its shutdown at will.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from starlette.testclient import TestClient

import memcommit
from memcommit.server.http import MemoryServer


def put(commit_id: str, mid: str) -> dict[str, Any]:
    return {"id": commit_id, "ops": [["put", mid, "text", "note", None, "working", None, [], []]]}


def post(client: TestClient, *commits: dict[str, Any], retry_of: str | None = None) -> Any:
    body = json.dumps({"commits": list(commits), "retry_of": retry_of})
    return client.post("/v1/commit", content=body)


@pytest.fixture
def server(tmp_path: Path) -> MemoryServer:
    """A server that remembers the answers of its newest 3 commits."""
    return MemoryServer(tmp_path / "memory.db", remember=3)


def writes_of(server: MemoryServer, mid: str) -> int:
    """How many records of memory `mid` the server's log holds (once the server stopped)."""
    with memcommit.open(server.path, read_only=True) as store:
        return len(store.history(mid))


def test_a_resend_whose_answer_was_forgotten_is_unknown_not_applied_again(
    server: MemoryServer,
) -> None:
    with TestClient(server.app) as client:
        first = post(client, put("c-lost", "lost"))
        assert first.status_code == 200 and first.json()["results"][0]["ok"]
        # A resend of a commit this server start never saw, before it forgot any answer: it
        # is known never to have arrived, so it runs.
        fresh = post(client, put("c-fresh", "fresh"), retry_of=server.boot)
        assert fresh.json()["results"][0]["ok"]
        for i in range(3):  # other clients' commits push c-lost's answer out of the 3 kept
            assert post(client, put(f"c-other-{i}", f"other-{i}")).json()["results"][0]["ok"]
        again = post(client, put("c-lost", "lost"), retry_of=server.boot)
        assert again.status_code == 200
        result = again.json()["results"][0]
        assert result["ok"] is False and result["error"]["class"] == "CommitOutcomeUnknown"
        assert "forgotten" in result["error"]["message"]
        # From then on a resend not remembered is unknown, even of one that never arrived.
        never = post(client, put("c-never", "never"), retry_of=server.boot).json()["results"]
        assert never[0]["error"]["class"] == "CommitOutcomeUnknown"
        # A first attempt still runs, and a remembered answer is still given.
        assert post(client, put("c-new", "new")).json()["results"][0]["ok"]
        remembered = post(client, put("c-other-2", "other-2"), retry_of=server.boot)
        assert remembered.json()["results"][0]["ok"]
    assert writes_of(server, "lost") == 1
    assert writes_of(server, "never") == 0
    assert writes_of(server, "other-2") == 1


def test_a_resend_while_the_server_drains_gets_its_answer(server: MemoryServer) -> None:
    with TestClient(server.app) as client:
        first = post(client, put("c-answered", "answered"))
        assert first.status_code == 200
        client.portal.call(server.begin_shutdown)  # as SIGTERM does: the server drains
        again = post(client, put("c-answered", "answered"), retry_of=server.boot)
        assert again.status_code == 200 and again.json() == first.json()
        # A commit the server has not seen gets 503, alone or beside a resend; nothing runs.
        refused = post(client, put("c-answered", "answered"), put("c-late", "late"))
        assert refused.status_code == 503 and refused.json()["error"]["code"] == "stopping"
        assert post(client, put("c-late", "late")).status_code == 503
    assert writes_of(server, "answered") == 1
    assert writes_of(server, "late") == 0
