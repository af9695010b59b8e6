# Copyright: (c) 2026, liqo.fabric developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The warm runner's client: what ansible_runner spawns (through pexpect) instead of `ansible-playbook`.

Standard library only and no package imports: warm.py (`Zygote`) writes this file's source into an
executable launcher (`#!python -IS`) that ends with `sys.exit(main(SOCKET, BINARY))`, so it starts in a few
milliseconds. It connects to the zygote, sends argv, the environment and the cwd with its stdin/stdout/stderr
(SCM_RIGHTS), and then either waits for the warm child's exit status (forwarding signals to the child's process
group) or, when the zygote says so or is not there, execs the real ansible-playbook (cold).

Whether the run was warm is written to `$AWX_ISOLATED_DATA_DIR/liqo_warm.json` (the run's artifact dir) for
the controller; nothing is written to stdout, which ansible_runner parses.
"""
import json
import os
import signal
import socket
import struct
import sys

MARKER = "liqo_warm.json"
FORWARDED = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGQUIT, signal.SIGUSR1, signal.SIGUSR2)
LOST_RC = 250   # ansible's "unexpected error" exit code


def _marker(data: dict) -> None:
    adir = os.environ.get("AWX_ISOLATED_DATA_DIR")
    if not adir:
        return
    try:
        fd = os.open(os.path.join(adir, MARKER), os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o600)
        with os.fdopen(fd, "w") as f:
            json.dump(data, f)
    except OSError:
        pass


def _kill_group(pid: int, signum: int) -> None:
    try:
        os.killpg(pid, signum)
    except ProcessLookupError:   # the child has not called setsid() yet
        try:
            os.kill(pid, signum)
        except OSError:
            pass
    except OSError:
        pass


def _read_line(sock: socket.socket, buf: bytearray):
    while b"\n" not in buf:
        chunk = sock.recv(4096)
        if not chunk:
            return None
        buf += chunk
    line, dummy, rest = bytes(buf).partition(b"\n")
    buf[:] = rest
    return json.loads(line)


def _die_like(status: int) -> int:
    if os.WIFSIGNALED(status):
        sig = os.WTERMSIG(status)
        signal.signal(sig, signal.SIG_DFL)
        os.kill(os.getpid(), sig)
        return 128 + sig
    if os.WIFEXITED(status):
        return os.WEXITSTATUS(status)
    return LOST_RC


def main(sock_path: str, binary: str) -> int:
    args = sys.argv[1:]
    state = {"pid": None, "pending": []}
    original = {}
    ignored = []

    def forward(signum, _frame):
        if state["pid"] is None:
            state["pending"].append(signum)
        else:
            _kill_group(state["pid"], signum)

    for sig in FORWARDED:
        cur = signal.getsignal(sig)
        if cur == signal.SIG_IGN:     # pexpect spawns with SIGHUP ignored: the child ignores it too
            ignored.append(int(sig))
            continue
        original[sig] = cur
        signal.signal(sig, forward)

    def cold(reason: str, diff=None):
        _marker({"warm": False, "reason": reason, "diff": diff or []})
        for sig, handler in original.items():
            signal.signal(sig, handler)
        for sig in state["pending"]:
            os.kill(os.getpid(), sig)
        os.execv(binary, [binary] + args)

    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)   # close-on-exec: gone in a cold exec
    try:
        sock.connect(sock_path)
    except OSError as exc:
        sock.close()
        cold("zygote unavailable: %s" % (exc.strerror or exc))
    payload = json.dumps({"argv": args, "env": dict(os.environ), "cwd": os.getcwd(), "ignored": ignored}).encode()
    data = struct.pack("!I", len(payload)) + payload
    buf = bytearray()
    try:
        sent = socket.send_fds(sock, [data], [0, 1, 2])
        if sent < len(data):
            sock.sendall(data[sent:])
        reply = _read_line(sock, buf)
    except OSError as exc:
        reply = None
        if not state["pid"]:
            sock.close()
            cold("zygote unavailable: %s" % (exc.strerror or exc))
    if reply is None:
        sock.close()
        cold("zygote closed the connection")
    if reply.get("mode") != "warm":
        sock.close()
        cold(reply.get("reason") or "zygote refused", reply.get("diff"))
    state["pid"] = int(reply["pid"])
    _marker({"warm": True, "pid": state["pid"]})
    for sig in state["pending"]:
        _kill_group(state["pid"], sig)
    try:
        done = _read_line(sock, buf)
    except OSError:
        done = None
    if done is None or "status" not in done:
        sys.stderr.write("ERROR: warm runner: lost the zygote before the playbook finished\n")
        return LOST_RC
    return _die_like(int(done["status"]))


if __name__ == "__main__":
    sys.exit(main(sys.argv.pop(1), sys.argv.pop(1)))
