"""tune's history against a server answering like Prometheus' /api/v1/query_range: the panic window's query is
fetched beside each metric's, and one Prometheus refuses (a 400, as for a query it will not run) costs only
the panic values, never the history."""

from __future__ import annotations

import json
import urllib.parse
from http.server import BaseHTTPRequestHandler

from autoscaler.cli.tune import fetch_history
from autoscaler.config.rules import parse_rules
from plumbing.prometheus.config import endpoint_from_url
from plumbing.prometheus.session import EndpointSession
from tests.support import QuietHandler, http_server

RULES = """\
rules:
  - name: web
    target: {kind: Deployment, namespace: ml, name: web}
    maxReplicas: 10
    metrics: [{name: rps, query: 'sum(rate(r[1m]))', type: Total, target: 10}]
"""


def handler(refuse_short: bool) -> type[BaseHTTPRequestHandler]:
    class Answer(QuietHandler):
        def do_GET(self) -> None:
            params = urllib.parse.parse_qs(urllib.parse.urlsplit(self.path).query)
            query, start, end = params["query"][0], float(params["start"][0]), float(params["end"][0])
            short = "[30s]" in query
            if short and refuse_short:
                status, body = 400, {"status": "error", "errorType": "bad_data", "error": "refused"}
            else:
                values = [[t, "7" if short else "5"] for t in range(int(start), int(end) + 1, 60)]
                status, body = 200, {"status": "success", "data": {"resultType": "matrix", "result": [
                    {"metric": {}, "values": values}]}}
            self.answer(status, json.dumps(body).encode())

    return Answer


def history(refuse_short: bool) -> list[tuple[float | None, float | None]]:
    rule = parse_rules(RULES, "rules.yaml").rules[0]
    with http_server(handler(refuse_short)) as url, EndpointSession(endpoint_from_url(url)) as session:
        steps = fetch_history(rule, session, 600.0, 780.0, 60.0)
    return [(s.observations[0].value, s.observations[0].panic_value) for s in steps]


def test_the_panic_windows_values_come_with_the_history() -> None:
    assert history(refuse_short=False) == [(5.0, 7.0)] * 4


def test_a_refused_short_query_costs_only_the_panic_values() -> None:
    assert history(refuse_short=True) == [(5.0, None)] * 4
