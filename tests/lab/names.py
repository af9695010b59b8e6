"""Names of everything the lab creates.

Every object (netns, wireguard-go socket, state dir) starts with PREFIX followed by a per-instance id,
so two labs or two test runs never collide and `make lab-clean` can find exactly what a lab made.
"""
import os
import secrets

PREFIX = "lfab"
STATE_ROOT = os.environ.get("LIQO_FABRIC_LAB_STATE", "/run/liqo-fabric-lab")


def new_lab_id() -> str:
    """Four hex digits: short enough for 15-character interface names (lfab + id + suffix)."""
    return secrets.token_hex(2)


def lab_prefix(lab_id: str) -> str:
    return f"{PREFIX}{lab_id}"


def is_lab_name(name: str) -> bool:
    return name.startswith(PREFIX)
