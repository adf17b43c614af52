#!/usr/bin/env python3
"""Turn directories into a one-layer OCI image archive, with no registry and no container tooling.

    mkoci.py --name localhost/ccsweep/cell:dev --out cell.tar --root ROOTFS [--root EXTRA ...]
             [--entrypoint ccsweep] [--cmd '["--help"]'] [--env K=V ...] [--label K=V ...]

Every --root is added at / of the same layer, in order (a later root's files win when the
archive is unpacked), so a cached base rootfs and a small folder of project files make one image
without copying the base. The result loads with `ctr -n k8s.io images import OUT` (or
`docker load`). The layer is hashed while GNU tar writes it (no second pass), and the archive
carries the containerd image-name annotation, so the import tags the image.
"""

from __future__ import annotations

import argparse
import hashlib
import io
import json
import os
import platform
import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path

OCI_INDEX = "application/vnd.oci.image.index.v1+json"
OCI_MANIFEST = "application/vnd.oci.image.manifest.v1+json"
OCI_CONFIG = "application/vnd.oci.image.config.v1+json"
OCI_LAYER = "application/vnd.oci.image.layer.v1.tar"
DEFAULT_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
GOARCH = {"x86_64": "amd64", "aarch64": "arm64"}


def key_values(pairs: list[str]) -> dict[str, str]:
    out = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep:
            raise SystemExit(f"mkoci: expected KEY=VALUE, got {pair!r}")
        out[key] = value
    return out


def argv_list(value: str) -> list[str]:
    """A JSON list of strings, or one word (so `--cmd '["--help"]'` is never taken for an option)."""
    if value.startswith("["):
        parsed = json.loads(value)
        if not isinstance(parsed, list) or not all(isinstance(v, str) for v in parsed):
            raise argparse.ArgumentTypeError("expected a JSON list of strings")
        return parsed
    return [value]


def write_layer(roots: list[Path], dest: Path) -> tuple[str, int]:
    """GNU tar of every root into dest; returns (sha256 hex, size). Owners stay numeric."""
    cmd = ["tar", "--numeric-owner", "--xattrs", "--sort=name", "-cf", "-"]
    for root in roots:
        if not root.is_dir():
            raise SystemExit(f"mkoci: not a directory: {root}")
        cmd += ["-C", str(root), "."]
    digest, size = hashlib.sha256(), 0
    with subprocess.Popen(cmd, stdout=subprocess.PIPE) as tar, dest.open("wb") as out:
        assert tar.stdout is not None
        for chunk in iter(lambda: tar.stdout.read(1 << 20), b""):
            digest.update(chunk)
            out.write(chunk)
            size += len(chunk)
    if tar.returncode != 0:
        raise SystemExit(f"mkoci: tar failed with exit code {tar.returncode}")
    return digest.hexdigest(), size


def image_config(args: argparse.Namespace, layer_sha: str, arch: str) -> dict:
    env = {"PATH": DEFAULT_PATH, **key_values(args.env)}
    config: dict = {"Env": [f"{k}={v}" for k, v in env.items()], "WorkingDir": args.workdir}
    if args.entrypoint:
        config["Entrypoint"] = args.entrypoint
    if args.cmd:
        config["Cmd"] = args.cmd
    if args.label:
        config["Labels"] = key_values(args.label)
    return {
        "architecture": arch,
        "os": "linux",
        "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "config": config,
        "rootfs": {"type": "layers", "diff_ids": [f"sha256:{layer_sha}"]},
        "history": [{"created_by": "images/mkoci.py " + " ".join(str(r) for r in args.root)}],
    }


def descriptor(media_type: str, data: bytes) -> dict:
    return {"mediaType": media_type, "digest": "sha256:" + hashlib.sha256(data).hexdigest(), "size": len(data)}


def add_bytes(archive: tarfile.TarFile, name: str, data: bytes) -> None:
    info = tarfile.TarInfo(name)
    info.size, info.mtime, info.mode = len(data), int(time.time()), 0o644
    archive.addfile(info, io.BytesIO(data))


def build(args: argparse.Namespace) -> str:
    arch = GOARCH.get(platform.machine(), platform.machine())
    out = Path(args.out).resolve()
    out.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=out.parent, prefix=".mkoci-") as tmp:
        layer_path = Path(tmp) / "layer.tar"
        layer_sha, layer_size = write_layer([Path(r) for r in args.root], layer_path)
        config = json.dumps(image_config(args, layer_sha, arch), sort_keys=True).encode()
        manifest = json.dumps({
            "schemaVersion": 2,
            "mediaType": OCI_MANIFEST,
            "config": descriptor(OCI_CONFIG, config),
            "layers": [{"mediaType": OCI_LAYER, "digest": f"sha256:{layer_sha}", "size": layer_size}],
        }, sort_keys=True).encode()
        manifest_desc = descriptor(OCI_MANIFEST, manifest)
        manifest_desc["platform"] = {"architecture": arch, "os": "linux"}
        manifest_desc["annotations"] = {
            "io.containerd.image.name": args.name,
            "org.opencontainers.image.ref.name": args.name.rsplit(":", 1)[-1],
        }
        index = json.dumps({"schemaVersion": 2, "mediaType": OCI_INDEX, "manifests": [manifest_desc]}).encode()
        partial = out.with_name(out.name + ".partial")
        with tarfile.open(partial, "w") as archive:
            add_bytes(archive, "oci-layout", b'{"imageLayoutVersion":"1.0.0"}')
            add_bytes(archive, "index.json", index)
            add_bytes(archive, "blobs/sha256/" + manifest_desc["digest"].split(":")[1], manifest)
            add_bytes(archive, "blobs/sha256/" + hashlib.sha256(config).hexdigest(), config)
            archive.add(layer_path, arcname=f"blobs/sha256/{layer_sha}")
        os.replace(partial, out)
    print(f"mkoci: {out} {args.name} layer {layer_size / 1e6:.1f} MB {manifest_desc['digest']}", file=sys.stderr)
    return manifest_desc["digest"]


def parse(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--name", required=True, help="image reference, e.g. localhost/ccsweep/cell:dev")
    p.add_argument("--out", required=True, help="OCI archive to write (.tar)")
    p.add_argument("--root", action="append", required=True, help="directory added at / (repeatable)")
    p.add_argument("--entrypoint", type=argv_list, default=None, help='a word or a JSON list: \'["ccsweep", "cell"]\'')
    p.add_argument("--cmd", type=argv_list, default=None, help="a word or a JSON list")
    p.add_argument("--env", action="append", default=[], help="KEY=VALUE (repeatable)")
    p.add_argument("--label", action="append", default=[], help="KEY=VALUE (repeatable)")
    p.add_argument("--workdir", default="/")
    return p.parse_args(argv)


if __name__ == "__main__":
    print(build(parse()))
