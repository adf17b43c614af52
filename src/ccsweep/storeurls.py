"""What the path of a store URL (or a Pushgateway address) may hold: one rule, wherever it comes from.

A store URL reaches ccsweep as a CLI option, a Workflow parameter or a Sweep's `run.store`, and
the chart's allowlists are matched against it segment by segment (podspec.endpoint_allowed). A
`..` segment would leave an allowed prefix on a file store and name another prefix's keys on S3
(where a server may or may not resolve it), an empty segment (`//`) or a `.` one names the same
place by another spelling, and a percent sign (`%2e%2e`, `%2f`) is an encoded one of those that a
server may decode after the match. So none is taken, on any path.
"""

from __future__ import annotations

import re

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


#: Set in every workflow pod by its template from the downward API (metadata.namespace): the
#: namespace the pod runs in, which no Workflow parameter can choose. Unset outside a cluster.
NAMESPACE_ENV = "CCSWEEP_NAMESPACE"
#: The folder under a store's base URL that holds one folder per namespace.
NAMESPACES_FOLDER = "namespaces"
#: A Kubernetes namespace name: a DNS-1123 label.
NAMESPACE_NAME = re.compile(r"[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?")


class NamespaceError(ValueError):
    """A namespace that cannot name a store prefix; str() is one line naming it and what is allowed."""


def namespace_store(base: str, namespace: str) -> str:
    """The store of `namespace` under the store URL `base`: `base/namespaces/<namespace>`.

    Workflow pods (from the namespace the downward API gives them) and the operator (from a
    Sweep's namespace) both open this, never `base` itself, so two namespaces sharing a bucket
    never read or write each other's manifests, results or reports. A `base` that already names
    another namespace's folder gets this one's nested inside it, where none of that namespace's
    keys lie (they all start with a store folder such as `sweeps/` or `cells/`).
    """
    return f"{base.rstrip('/')}/{NAMESPACES_FOLDER}/{check_namespace(namespace)}"


def check_namespace(namespace: str) -> str:
    """`namespace` when it is a Kubernetes namespace name (a DNS-1123 label), else NamespaceError."""
    if not NAMESPACE_NAME.fullmatch(namespace):
        raise NamespaceError(f"namespace {namespace[:80]!r} (${NAMESPACE_ENV}): not a Kubernetes namespace name "
                             "(1 to 63 lowercase letters, digits and '-', starting and ending with a letter or digit)")
    return namespace
