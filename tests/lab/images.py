"""The project's images for real-node labs: built (or found cached) by deploy/image/build.sh (`make image`).

    images() -> {"fabric": {"name": "docker.io/liqo-fabric/fabric:0.1.0", "archive": "/root/.cache/..."},
                 "tiny": {"name": "docker.io/liqo-fabric/tiny:0.1.0", "archive": ...}}

`fabric` runs the controller, the node agent and the gateway (python3, ansible-core, the collection at
/opt/liqo-fabric/ansible_collections/liqo/fabric, nftables, iproute2, wireguard-tools, wireguard-go); `tiny`
(busybox: sh, httpd, nc, wget, ping) runs test workloads and is every node's CRI sandbox ("pause") image.
Pods name them with imagePullPolicy IfNotPresent (or Never): no registry is ever contacted.
"""
from __future__ import annotations

import functools
import json
import os
import subprocess

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


class ImageBuildError(RuntimeError):
    pass


@functools.lru_cache(maxsize=1)
def images() -> dict:
    proc = subprocess.run(["bash", os.path.join(ROOT, "deploy", "image", "build.sh")],
                          capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        raise ImageBuildError(f"the lab's images are not available (deploy/image/build.sh):\n{proc.stderr.strip()}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def fabric_image() -> str:
    return images()["fabric"]["name"]


def tiny_image() -> str:
    return images()["tiny"]["name"]
