"""Writes an OCI image archive (oci-layout + index.json + blobs) from layer tarballs. No registry, no daemon.

    python3 deploy/image/oci.py OUT.tar --name docker.io/liqo-fabric/fabric:0.1.0 --layer base.tar \
        --layer collection.tar --env PATH=/usr/bin --cmd '["python3", "-m", "controller"]' --workdir /

Layers are uncompressed tarballs (media type ...layer.v1.tar): containerd imports and unpacks them without a
decompression pass, and the archive size is the image's uncompressed size. Every --name becomes an entry of
index.json annotated with io.containerd.image.name, which `ctr images import` uses as the image's name.
"""
from __future__ import annotations

import argparse
import hashlib
import json
import os
import tarfile
import tempfile
import time

MT_MANIFEST = "application/vnd.oci.image.manifest.v1+json"
MT_CONFIG = "application/vnd.oci.image.config.v1+json"
MT_LAYER = "application/vnd.oci.image.layer.v1.tar"


def _digest_file(path: str) -> tuple[str, int]:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return "sha256:" + h.hexdigest(), os.path.getsize(path)


def _add_bytes(tar: tarfile.TarFile, name: str, data: bytes) -> None:
    info = tarfile.TarInfo(name)
    info.size = len(data)
    info.mtime = 0
    info.mode = 0o644
    import io  # pylint: disable=import-outside-toplevel
    tar.addfile(info, io.BytesIO(data))


def write_archive(out: str, names: list[str], layers: list[str], env: list[str], cmd: list[str],
                  workdir: str = "/", labels: dict | None = None) -> str:
    """Writes the archive to `out` (atomically) and returns the manifest digest."""
    layer_descs = []
    for path in layers:
        digest, size = _digest_file(path)
        layer_descs.append({"mediaType": MT_LAYER, "digest": digest, "size": size, "path": path})
    config = {
        "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(0)),
        "architecture": "amd64", "os": "linux",
        "config": {"Env": env, "Cmd": cmd, "WorkingDir": workdir, "Labels": labels or {}},
        "rootfs": {"type": "layers", "diff_ids": [d["digest"] for d in layer_descs]},
        "history": [{"created_by": f"liqo-fabric deploy/image layer {i}"} for i in range(len(layer_descs))],
    }
    config_bytes = json.dumps(config, sort_keys=True).encode()
    config_digest = "sha256:" + hashlib.sha256(config_bytes).hexdigest()
    manifest = {
        "schemaVersion": 2, "mediaType": MT_MANIFEST,
        "config": {"mediaType": MT_CONFIG, "digest": config_digest, "size": len(config_bytes)},
        "layers": [{k: d[k] for k in ("mediaType", "digest", "size")} for d in layer_descs],
    }
    manifest_bytes = json.dumps(manifest, sort_keys=True).encode()
    manifest_digest = "sha256:" + hashlib.sha256(manifest_bytes).hexdigest()
    index = {"schemaVersion": 2, "manifests": [
        {"mediaType": MT_MANIFEST, "digest": manifest_digest, "size": len(manifest_bytes),
         "platform": {"architecture": "amd64", "os": "linux"},
         "annotations": {"io.containerd.image.name": name, "org.opencontainers.image.ref.name": name.rsplit(":", 1)[-1]}}
        for name in names]}
    fd, tmp = tempfile.mkstemp(dir=os.path.dirname(os.path.abspath(out)), suffix=".tmp")
    os.close(fd)
    with tarfile.open(tmp, "w", format=tarfile.PAX_FORMAT) as tar:
        _add_bytes(tar, "oci-layout", json.dumps({"imageLayoutVersion": "1.0.0"}).encode())
        _add_bytes(tar, "index.json", json.dumps(index, sort_keys=True).encode())
        _add_bytes(tar, f"blobs/sha256/{config_digest[7:]}", config_bytes)
        _add_bytes(tar, f"blobs/sha256/{manifest_digest[7:]}", manifest_bytes)
        for d in layer_descs:
            info = tar.gettarinfo(d["path"], arcname=f"blobs/sha256/{d['digest'][7:]}")
            info.mtime, info.uid, info.gid, info.uname, info.gname, info.mode = 0, 0, 0, "", "", 0o644
            with open(d["path"], "rb") as f:
                tar.addfile(info, f)
    os.chmod(tmp, 0o644)
    os.replace(tmp, out)
    return manifest_digest


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n", maxsplit=1)[0])
    p.add_argument("out")
    p.add_argument("--name", action="append", required=True)
    p.add_argument("--layer", action="append", required=True)
    p.add_argument("--env", action="append", default=[])
    p.add_argument("--cmd", required=True, help="JSON list")
    p.add_argument("--workdir", default="/")
    p.add_argument("--label", action="append", default=[], metavar="KEY=VALUE")
    a = p.parse_args(argv)
    labels = dict(item.split("=", 1) for item in a.label)
    print(write_archive(a.out, a.name, a.layer, a.env, json.loads(a.cmd), a.workdir, labels))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
