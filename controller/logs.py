# Copyright: (c) 2026, liqo.fabric developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Structured logs: one JSON object per line (ts, level, logger, msg, and the record's `fields`)."""
from __future__ import annotations

import datetime
import json
import logging
import os
import sys
import time


def fields(**kw) -> dict:
    """The `extra` of a log call whose line carries these fields."""
    return {"fields": kw}


class JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        out = {"ts": datetime.datetime.fromtimestamp(record.created, datetime.timezone.utc).isoformat(timespec="milliseconds"),
               "level": record.levelname.lower(), "logger": record.name, "msg": record.getMessage()}
        fields = getattr(record, "fields", None)
        if isinstance(fields, dict):
            out.update(fields)
        if record.exc_info:
            out["exception"] = self.formatException(record.exc_info)
        return json.dumps(out, default=str, ensure_ascii=False)


def setup(level: str = "info", stream=None) -> None:
    handler = logging.StreamHandler(stream or sys.stderr)
    handler.setFormatter(JsonFormatter())
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(getattr(logging, level.upper(), logging.INFO))
    for noisy in ("urllib3", "ansible_runner", "kubernetes"):
        logging.getLogger(noisy).setLevel(logging.WARNING)


def process_age() -> float | None:
    """Seconds since this process started (Linux: /proc/self/stat against /proc/uptime), None elsewhere."""
    try:
        with open("/proc/self/stat", encoding="ascii") as f:
            start_ticks = int(f.read().rsplit(")", 1)[1].split()[19])
        with open("/proc/uptime", encoding="ascii") as f:
            uptime = float(f.read().split()[0])
    except (OSError, ValueError, IndexError):
        return None
    return uptime - start_ticks / os.sysconf("SC_CLK_TCK")


def startup_timeline(t0: float, marks: list) -> dict:
    """Where a start's seconds went, for the first log line: `interpreter` (process start to `t0`, the first line
    of the entry point: the interpreter and its site packages), then each (name, monotonic time) mark against the
    previous one. A pod whose engine is slow to start says which part is slow."""
    age = process_age()
    out = {"interpreter": round(age - (time.monotonic() - t0), 3) if age is not None else None}
    prev = t0
    for name, t in marks:
        out[name] = round(t - prev, 3)
        prev = t
    return out
