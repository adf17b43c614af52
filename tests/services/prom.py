"""Reading a real Prometheus over its HTTP API, as Grafana does: instant, range and label-values queries."""

from __future__ import annotations

import json
import time
import urllib.error
import urllib.parse
import urllib.request
from typing import Any

from servers import Server


def api(prometheus: Server, path: str, **params: Any) -> Any:
    """GET /api/v1/<path>; the `data` of a successful answer (a PromQL error fails the test with its message)."""
    url = f"{prometheus.url}/api/v1/{path}?" + urllib.parse.urlencode(params, doseq=True)
    try:
        body = json.loads(urllib.request.urlopen(url, timeout=10).read())
    except urllib.error.HTTPError as exc:  # 400/422: a query Prometheus cannot parse or run
        body = json.loads(exc.read())
    assert body["status"] == "success", f"{params}: {body.get('errorType')}: {body.get('error')}"
    return body["data"]


def query(prometheus: Server, expr: str, at: float | None = None) -> list[dict[str, Any]]:
    return api(prometheus, "query", query=expr, **({"time": at} if at is not None else {}))["result"]


def query_range(prometheus: Server, expr: str, start: float, end: float, step: float = 2) -> list[dict[str, Any]]:
    return api(prometheus, "query_range", query=expr, start=start, end=end, step=step)["result"]


def label_values(prometheus: Server, label: str, match: str, start: float, end: float) -> list[str]:
    """What Grafana's `label_values(match, label)` variable query lists."""
    return api(prometheus, f"label/{label}/values", **{"match[]": match, "start": start, "end": end})


def wait_for(prometheus: Server, expr: str, timeout: float = 20) -> list[dict[str, Any]]:
    deadline = time.monotonic() + timeout
    while True:
        result = query(prometheus, expr)
        if result or time.monotonic() > deadline:
            return result
        time.sleep(0.5)
