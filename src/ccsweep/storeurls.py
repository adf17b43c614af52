"""What the path of a store URL (or a Pushgateway address) may hold: one rule, wherever it comes from.

A store URL reaches ccsweep as a CLI option, a Workflow parameter or a Sweep's `run.store`, and
the chart's allowlists are matched against it segment by segment (podspec.endpoint_allowed). A
`..` segment would leave an allowed prefix on a file store and name another prefix's keys on S3
(where a server may or may not resolve it), an empty segment (`//`) or a `.` one names the same
place by another spelling, and a percent sign (`%2e%2e`, `%2f`) is an encoded one of those that a
server may decode after the match. So none is taken, on any path.
"""

from __future__ import annotations

#: What the one-line refusal says is allowed.
ALLOWED_SEGMENTS = "segments without '.', '..', '//' or '%'"


def path_problem(url: str) -> str | None:
    """Why `url` may not name a store or a Pushgateway (one line, without the URL), or None.

    Its path is what follows `scheme://` (or the whole of a plain path, less a leading './', the
    way a person names a folder here), less one leading '/' (an absolute path's root) and one
    trailing '/'.
    """
    if "%" in url:
        return f"a '%' (an encoded character such as %2e%2e or %2f) is not allowed: {ALLOWED_SEGMENTS}"
    _, scheme, rest = url.partition("://")
    path = (rest if scheme else url.removeprefix("./")).removeprefix("/").removesuffix("/")
    segments = path.split("/")
    if "" in segments:
        return f"an empty segment ('//') is not allowed: {ALLOWED_SEGMENTS}"
    if "." in segments or ".." in segments:
        return f"a '.' or '..' segment is not allowed: {ALLOWED_SEGMENTS}"
    return None
