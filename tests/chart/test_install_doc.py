"""docs/install.md's commands and values, as written there, render a valid installation.

The page is the one documented install path; tests/e2e/test_helm_operator.py runs its `helm
install` (and its namespace label) on the test cluster. Here, offline: its command renders with
its values (and its optional monitoring values), every manifest passes its schema, and the page
agrees with the pinned Argo release and with the other docs on the Pod Security level and the
S3 endpoint's form.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml

from ccsweep.buildinfo import build_identity
from support.chartlib import CHART, IMAGE_TAG_COMMAND, INSTALL_DOC, KUBE_VERSION, REPO, install_doc, run_helm
from support.versions import ARGO_WORKFLOWS_VERSION
from test_chart import by_kind, validation_errors

pytestmark = pytest.mark.tools  # Helm (bin/helm)


def render_doc_install(tmp_path: Path, *extra_values: str) -> list[dict]:
    """`helm template` with the arguments of the page's `helm install`, its values file in place."""
    doc = install_doc()
    files = {"ccsweep-values.yaml": doc.values}
    args = []
    for arg in doc.helm_install[1:]:  # after `install`
        if arg in files:
            (tmp_path / arg).write_text(files[arg])
            arg = str(tmp_path / arg)
        elif arg == "charts/ccsweep":
            arg = str(REPO / arg)
        args.append(arg.replace(IMAGE_TAG_COMMAND, build_identity()))  # `make image-tag` in this clone
    for i, text in enumerate(extra_values):
        (tmp_path / f"extra-{i}.yaml").write_text(text)
        args += ["-f", str(tmp_path / f"extra-{i}.yaml")]
    wait = [a for a in args if a in ("--wait", "--timeout", "5m")]
    assert wait == ["--wait", "--timeout", "5m"]  # template takes neither: the page's install waits
    args = [a for a in args if a not in wait]
    out = run_helm("template", *args, "--kube-version", KUBE_VERSION).stdout
    return [d for d in yaml.safe_load_all(out) if d]


def test_the_documented_install_renders_valid_manifests(tmp_path: Path):
    doc = install_doc()
    assert doc.helm_install[:3] == ["install", "ccsweep", "charts/ccsweep"] and (REPO / "charts/ccsweep").is_dir()
    docs = render_doc_install(tmp_path)
    for manifest in docs:
        assert validation_errors(manifest) == [], f"{manifest['kind']}/{manifest['metadata']['name']}"
    operator = by_kind(docs, "Deployment")["ccsweep-operator"]["spec"]["template"]["spec"]["containers"][0]
    # What `make image REGISTRY=...` pushes: the tag is this build's identity, as step 5 passes it.
    assert operator["image"] == f"registry.example.org/ccsweep/cell:{build_identity()}"
    assert {e["name"]: e.get("value") for e in operator["env"]}["CCSWEEP_STORE"] == "s3://ccsweep/results"
    assert not by_kind(docs, "Secret")  # the page creates the Secret itself, keys never in values


def test_the_documented_monitoring_values_render_for_the_prometheus_operator(tmp_path: Path):
    docs = render_doc_install(tmp_path, install_doc().monitoring_values)
    for kind in ("ServiceMonitor", "PrometheusRule"):
        (manifest,) = by_kind(docs, kind).values()
        assert validation_errors(manifest) == [], kind


def test_the_page_names_the_pinned_argo_release_and_image_target():
    commands = install_doc().commands
    argo = [c for c in commands if c[:2] == ["kubectl", "apply"] and any("argo-workflows" in a for a in c)]
    assert argo and argo[0][-1].endswith("/download/$ARGO_WORKFLOWS_VERSION/install.yaml")
    assert [".", "./versions.env"] in commands and ARGO_WORKFLOWS_VERSION.startswith("v3.7.")
    assert ["make", "image", "REGISTRY=registry.example.org"] in commands


def test_every_doc_agrees_on_the_pod_security_level_and_the_s3_endpoint_form():
    assert install_doc().label_namespace[-1] == "pod-security.kubernetes.io/enforce=privileged"
    texts = {p: p.read_text() for p in [*(REPO / "docs").glob("*.md"), CHART / "README.md", REPO / "README.md"]}
    for path, text in texts.items():
        for level in re.findall(r"pod-security\.kubernetes\.io/enforce[=:]\s*`?(\w+)", text):
            assert level == "privileged", path
        # A Secret's endpoint line in a doc is a URL with its scheme.
        for endpoint in re.findall(r"endpoint=(?!\.\.\.)(\S+?)[,\s]", text):  # ... is a placeholder
            assert re.fullmatch(r"https?://[^/\s]+", endpoint), f"{path}: endpoint={endpoint}"
    assert "docs/install.md" in (CHART / "README.md").read_text() and INSTALL_DOC.is_file()
    for doc in ("helm.md", "kubernetes.md"):
        assert "install.md" in texts[REPO / "docs" / doc], doc
