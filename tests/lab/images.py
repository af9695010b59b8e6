"""The project's images for real-node labs: built (or found cached) by deploy/image/build.sh (`make image`).

    images() -> {"fabric": {"name": "docker.io/liqo-fabric/fabric:0.1.0", "archive": "/root/.cache/..."},
                 "tiny": {"name": "docker.io/liqo-fabric/tiny:0.1.0", "archive": ...}}

`fabric` runs the controller, the node agent and the gateway (python3, ansible-core, the collection at
/opt/liqo-fabric/ansible_collections/liqo/fabric, nftables, iproute2, wireguard-tools, wireguard-go); `tiny`
(busybox: sh, httpd, nc, wget, ping) runs test workloads and is every node's CRI sandbox ("pause") image.
Pods name them with imagePullPolicy IfNotPresent (or Never): no registry is ever contacted.
"""
from __future__ import annotations

import concurrent.futures
import functools
import json
import os
import subprocess

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


class ImageBuildError(RuntimeError):
    pass


def _build(env: dict | None = None) -> dict:
    proc = subprocess.run(["bash", os.path.join(ROOT, "deploy", "image", "build.sh")],
                          capture_output=True, text=True, check=False, env=dict(os.environ, **(env or {})))
    if proc.returncode != 0:
        raise ImageBuildError(f"the lab's images are not available (deploy/image/build.sh):\n{proc.stderr.strip()}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


@functools.lru_cache(maxsize=1)
def images() -> dict:
    return _build()


@functools.lru_cache(maxsize=4)
def fabric_image_of(tree: str, tag: str) -> dict:
    """The fabric image of the collection in `tree` (another version: a `git archive` of a commit), named
    docker.io/liqo-fabric/fabric:`tag`: {"name": ..., "archive": ...}. Its base layer is this tree's (cached)."""
    return _build({"IMAGE_TREE": tree, "IMAGE_VERSION": tag})["fabric"]


def import_into(lab, archive: str) -> None:
    """The image of `archive` into the containerd of every real node of the lab, running (`ctr images import`, the
    nodes in parallel): the layers the nodes already hold (the shared base) are not written again."""
    nodes = [n for c in lab.clusters.values() if c.real for n in c.real.nodes.values()]
    with concurrent.futures.ThreadPoolExecutor(max_workers=max(1, len(nodes))) as pool:
        for done in [pool.submit(n.ctr, "images", "import", archive, timeout=300) for n in nodes]:
            done.result()


def fabric_image() -> str:
    return images()["fabric"]["name"]


def tiny_image() -> str:
    return images()["tiny"]["name"]
