#!/usr/bin/env python3
"""A CycloneDX 1.5 SBOM (JSON) of the cell image, from the files in its mounted root file system.

hack/release.sh mounts the image (`buildah mount`) and runs this on it. Nothing in the image is
executed: the Debian packages come from dpkg's own database (var/lib/dpkg/status), the Python
packages from the venv's `*.dist-info/METADATA` (what `pip list` reads), Mahimahi from its install
folder (built from the vendored source, third_party/mahimahi/) and the emulator's Rust crates from
emulator/Cargo.lock, which `cargo build --locked` built it with. Package URLs (purl) name each.

Why not syft: building it from the Go module proxy takes hundreds of modules and many minutes on a
small machine, for the same two package databases this reads; its output would be CycloneDX too.
"""

from __future__ import annotations

import argparse
import email.parser
import json
import re
import sys
import tomllib
import uuid
from collections import Counter
from datetime import UTC, datetime
from pathlib import Path
from urllib.parse import quote

MAHIMAHI_URL = "https://github.com/ravinet/mahimahi"


def dpkg_packages(root: Path) -> list[dict]:
    """Installed Debian packages: one stanza per package in dpkg's status file."""
    components = []
    for stanza in (root / "var/lib/dpkg/status").read_text().split("\n\n"):
        fields = dict(re.findall(r"^([A-Za-z-]+): ?(.*)$", stanza, flags=re.M))
        if not fields.get("Status", "").endswith(" installed"):
            continue
        name, version, arch = fields["Package"], fields["Version"], fields.get("Architecture", "all")
        components.append({"type": "library", "name": name, "version": version,
                           "purl": f"pkg:deb/debian/{name}@{quote(version, safe='')}?arch={arch}&distro=debian-12",
                           "properties": [{"name": "ccsweep:source", "value": "dpkg"}]})
    return components


def python_packages(root: Path) -> list[dict]:
    """Packages in the image's venvs (and the system's site-packages), from their METADATA."""
    components = []
    for metadata in sorted(root.glob("opt/ccsweep/venv/lib/python3*/site-packages/*.dist-info/METADATA")):
        headers = email.parser.Parser().parsestr(metadata.read_text(errors="replace"), headersonly=True)
        name, version = headers["Name"], headers["Version"]
        component = {"type": "library", "name": name, "version": version,
                     "purl": f"pkg:pypi/{name.lower().replace('_', '-')}@{version}",
                     "properties": [{"name": "ccsweep:source", "value": "python"}]}
        licence = headers.get("License-Expression") or headers.get("License")
        if licence and len(licence) < 100:
            component["licenses"] = [{"expression": licence}] if headers.get("License-Expression") else \
                [{"license": {"name": licence}}]
        components.append(component)
    return components


def mahimahi(root: Path) -> list[dict]:
    """Mahimahi as the image installs it: /opt/ccsweep/mahimahi-<commit>."""
    return [{"type": "application", "name": "mahimahi", "version": folder.name.removeprefix("mahimahi-"),
             "purl": f"pkg:github/ravinet/mahimahi@{folder.name.removeprefix('mahimahi-')}",
             "licenses": [{"license": {"id": "GPL-3.0-only"}}],
             "externalReferences": [{"type": "vcs", "url": MAHIMAHI_URL}],
             "properties": [{"name": "ccsweep:source", "value": "mahimahi"}]}
            for folder in sorted((root / "opt/ccsweep").glob("mahimahi-*")) if folder.is_dir()]


def cargo_crates(lock: Path) -> list[dict]:
    """The emulator's crates, as Cargo.lock pins them (ccsweep-link itself included)."""
    packages = tomllib.loads(lock.read_text()).get("package", [])
    return [{"type": "library", "name": p["name"], "version": p["version"],
             "purl": f"pkg:cargo/{p['name']}@{p['version']}",
             "properties": [{"name": "ccsweep:source", "value": "cargo"}]}
            for p in packages]


def sbom(root: Path, image: str, digest: str, version: str, cargo_lock: Path) -> dict:
    components = dpkg_packages(root) + python_packages(root) + mahimahi(root) + cargo_crates(cargo_lock)
    seen = set()
    for component in components:  # bom-refs are unique; a purl may repeat across sources
        ref = component["purl"]
        while ref in seen:
            ref += "#dup"
        seen.add(ref)
        component["bom-ref"] = ref
    return {
        "bomFormat": "CycloneDX", "specVersion": "1.5", "serialNumber": f"urn:uuid:{uuid.uuid4()}", "version": 1,
        "metadata": {
            "timestamp": datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
            "tools": {"components": [{"type": "application", "name": "ccsweep hack/sbom.py", "version": version}]},
            "component": {"type": "container", "name": image.rsplit(":", 1)[0], "version": version,
                          "bom-ref": f"{image}@{digest}" if digest else image,
                          "hashes": [{"alg": "SHA-256", "content": digest.removeprefix("sha256:")}] if digest else []},
        },
        "components": components,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--root", type=Path, required=True, help="the image's mounted root file system")
    parser.add_argument("--image", required=True, help="the image's name, REPOSITORY:TAG")
    parser.add_argument("--digest", default="", help="its manifest digest, sha256:...")
    parser.add_argument("--version", required=True, help="the build identity, VERSION-gCOMMIT")
    parser.add_argument("--cargo-lock", type=Path, required=True, help="emulator/Cargo.lock of the same commit")
    parser.add_argument("--out", type=Path, required=True, help="the SBOM file to write")
    args = parser.parse_args(argv)
    if not (args.root / "var/lib/dpkg/status").is_file():
        print(f"hack/sbom.py: --root {args.root}: no var/lib/dpkg/status (not a Debian image's root)", file=sys.stderr)
        return 2
    document = sbom(args.root, args.image, args.digest, args.version, args.cargo_lock)
    args.out.write_text(json.dumps(document, indent=1) + "\n")
    kinds = Counter(component["properties"][0]["value"] for component in document["components"])
    print(f"hack/sbom.py: {args.out}: " + ", ".join(f"{n} {k}" for k, n in kinds.items()), file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
