"""A containerd root that already holds the lab's images, made once per image set and cached next to the
archives; every real node's containerd starts from a hard-linked copy of it (`cp -al`, well under a second)
instead of importing the archives itself (an import per node is slow and takes the CPUs).

Content blobs and unpacked snapshot layers are never written once committed (containers write to their own
upper directories), so their files may be shared; the two bolt databases are written, so each node gets a
copy of them. Falls back to importing (RealNode) where hard links cannot be made (another filesystem).
"""
from __future__ import annotations

import fcntl
import glob
import hashlib
import os
import shutil
import subprocess
import time

from tests.lab import netns
from tests.lab.apiserver import _stop_pid

WRITABLE = ("io.containerd.metadata.v1.bolt/meta.db", "io.containerd.snapshotter.v1.overlayfs/metadata.db")


def seed_root(img: dict) -> str:
    """The cached containerd root holding the images of tests.lab.images.images() (namespace k8s.io)."""
    cache = os.path.dirname(img["fabric"]["archive"])
    key = hashlib.sha256(" ".join(img[k]["archive"] for k in sorted(img)).encode()).hexdigest()[:16]
    path = os.path.join(cache, f"containerd-root-{key}")
    if os.path.isdir(path):
        return path
    with open(os.path.join(cache, ".seed.lock"), "w", encoding="utf-8") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if os.path.isdir(path):
            return path
        work = path + ".tmp"
        shutil.rmtree(work, ignore_errors=True)
        os.makedirs(work, mode=0o700)
        sock = os.path.join(work, "c.sock")
        with open(os.path.join(work, "config.toml"), "w", encoding="utf-8") as f:
            f.write(f'version = 2\nroot = "{work}/root"\nstate = "{work}/state"\n'
                    f'disabled_plugins = ["io.containerd.grpc.v1.cri"]\n[grpc]\n  address = "{sock}"\n'
                    f'[ttrpc]\n  address = "{sock}.ttrpc"\n')
        with open(os.path.join(work, "containerd.log"), "ab") as log:
            proc = subprocess.Popen(["containerd", "--config", os.path.join(work, "config.toml")],  # pylint: disable=consider-using-with
                                    stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        try:
            deadline = time.monotonic() + 30
            while netns.run(["ctr", "-a", sock, "version"], check=False).returncode != 0:
                if time.monotonic() > deadline or proc.poll() is not None:
                    raise RuntimeError(f"containerd for the image seed did not start: {work}/containerd.log")
                time.sleep(0.1)
            for k in sorted(img):
                netns.run(["ctr", "-a", sock, "-n", "k8s.io", "images", "import", img[k]["archive"]], timeout=300)
        finally:
            _stop_pid(proc.pid)
        os.rename(os.path.join(work, "root"), path)
        shutil.rmtree(work, ignore_errors=True)
        for old in glob.glob(os.path.join(cache, "containerd-root-*")):
            if old != path:
                shutil.rmtree(old, ignore_errors=True)
    return path


def clone(seed: str, dest: str) -> bool:
    """`dest` becomes a containerd root with the seed's images; False if hard links are not possible."""
    if os.path.exists(dest):
        shutil.rmtree(dest)
    if netns.run(["cp", "-al", seed, dest], check=False).returncode != 0:
        shutil.rmtree(dest, ignore_errors=True)
        return False
    for rel in WRITABLE:
        path = os.path.join(dest, rel)
        if os.path.exists(path):
            shutil.copy2(path, path + ".copy")
            os.replace(path + ".copy", path)
    return True
