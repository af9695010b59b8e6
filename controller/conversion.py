# Copyright: (c) 2026, liqo.fabric developers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The CRD conversion webhook: POST /convert with a ConversionReview (apiextensions.k8s.io/v1), over HTTPS.

The apiserver calls it whenever an object of networking.liqo.io is read or written in a version other
than the one it is stored in (v1beta1). The conversion itself is the collection's
``module_utils.api.conversion``; a review is all or nothing: one object that cannot be converted fails
the whole review with a message naming the object, the field and the value (the apiserver then refuses
the request, nothing is written).
"""
import http.server
import json
import logging
import os
import ssl
import sys
import threading
import time

from controller.library import api_conversion

log = logging.getLogger("liqo-fabric.conversion")
REVIEW_API = "apiextensions.k8s.io/v1"
PATH = "/convert"
MAX_BODY = 3 * 1024 * 1024  # the apiserver's own limit on a request is about this size


def review(body: dict) -> dict:
    """The ConversionReview answering the ConversionReview `body`."""
    request = body.get("request") if isinstance(body, dict) else None
    if not isinstance(request, dict):
        return _response("", failure="ConversionReview: request is missing")
    uid = request.get("uid", "")
    if body.get("apiVersion") != REVIEW_API or body.get("kind") != "ConversionReview":
        return _response(uid, failure="expected a ConversionReview of %s, got apiVersion=%r kind=%r"
                         % (REVIEW_API, body.get("apiVersion"), body.get("kind")))
    desired = request.get("desiredAPIVersion", "")
    converted = []
    for obj in request.get("objects") or []:
        try:
            converted.append(api_conversion.convert(obj, desired))
        except api_conversion.ConversionError as exc:
            meta = obj.get("metadata", {}) if isinstance(obj, dict) else {}
            name = "%s %s/%s" % (obj.get("kind") if isinstance(obj, dict) else "?", meta.get("namespace", ""), meta.get("name", ""))
            return _response(uid, failure="cannot convert %s to %s: %s" % (name, desired, exc))
    return _response(uid, converted=converted)


def _response(uid: str, converted=None, failure: str = "") -> dict:
    result = {"status": "Failure", "message": failure} if failure else {"status": "Success"}
    response = {"uid": uid, "result": result}
    if not failure:
        response["convertedObjects"] = converted or []
    return {"apiVersion": REVIEW_API, "kind": "ConversionReview", "response": response}


class ServingCert:
    """The TLS context of the webhook's certificate/key files, rebuilt when the files change, so that a renewed
    certificate serves new connections without a restart (a Secret volume's update swaps a symlink: stat follows
    it). A new pair that does not load keeps the previous one, with a warning (tried again when the files change
    again, e.g. a key written after its certificate)."""

    CHECK_EVERY = 1.0  # s: a stat of two files at most this often, on a new connection

    def __init__(self, cert_file: str, key_file: str):
        self.cert_file, self.key_file = cert_file, key_file
        self._seen = self._stamp()
        self.context = self._load()  # the first pair must load: the caller reports its error
        self._checked = time.monotonic()

    def _stamp(self):
        out = []
        for path in (self.cert_file, self.key_file):
            try:
                st = os.stat(path)
                out.append((st.st_dev, st.st_ino, st.st_mtime_ns, st.st_size))
            except OSError as exc:
                out.append(str(exc))
        return tuple(out)

    def _load(self) -> ssl.SSLContext:
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.minimum_version = ssl.TLSVersion.TLSv1_2
        context.load_cert_chain(self.cert_file, self.key_file)
        return context

    def current(self) -> ssl.SSLContext:
        """The context for a new connection, reloaded first when the files changed since they were last read."""
        now = time.monotonic()
        if now - self._checked < self.CHECK_EVERY:
            return self.context
        self._checked = now
        stamp = self._stamp()
        if stamp == self._seen:
            return self.context
        self._seen = stamp
        try:
            self.context = self._load()
        except (OSError, ssl.SSLError) as exc:
            log.warning("the webhook's new certificate/key do not load: still serving the previous ones",
                        extra={"fields": {"cert": self.cert_file, "key": self.key_file, "error": str(exc)}})
        else:
            log.info("webhook certificate reloaded", extra={"fields": {"cert": self.cert_file, "key": self.key_file}})
        return self.context


class _TLSServer(http.server.ThreadingHTTPServer):
    """Each accepted connection wrapped with the serving certificate's current context (the handshake happens
    in the request's thread, on its first read, not in the accepting one)."""

    daemon_threads = True
    serving_cert = None  # a ServingCert, set before serving

    def handle_error(self, request, client_address):
        """A client that failed its TLS handshake (e.g. it does not trust the CA) or hung up: one JSON log line
        at debug level, not socketserver's traceback on stderr."""
        exc = sys.exc_info()[1]
        if isinstance(exc, (ssl.SSLError, ConnectionError)):
            log.debug("webhook connection failed", extra={"fields": {"client": client_address[0], "error": str(exc)}})
        else:
            super().handle_error(request, client_address)

    def get_request(self):
        sock, address = self.socket.accept()
        try:
            context = self.serving_cert.current()
            return context.wrap_socket(sock, server_side=True, do_handshake_on_connect=False), address
        except Exception:
            sock.close()
            raise


class ConversionServer(threading.Thread):
    """HTTPS server of the webhook (TLS 1.2+, the certificate and key given as PEM files, reloaded when they
    change: ServingCert)."""

    def __init__(self, address: str, port: int, cert_file: str, key_file: str):
        super().__init__(name="conversion-webhook", daemon=True)

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_POST(self):  # noqa: N802 (http.server API)
                if self.path.split("?")[0] != PATH:
                    self._send(404, {"error": "not found: %s" % self.path})
                    return
                length = int(self.headers.get("Content-Length") or 0)
                if length <= 0 or length > MAX_BODY:
                    self._send(400, {"error": "Content-Length must be 1..%d, got %d" % (MAX_BODY, length)})
                    return
                try:
                    body = json.loads(self.rfile.read(length))
                except ValueError as exc:
                    self._send(400, {"error": "the body is not JSON: %s" % exc})
                    return
                answer = review(body)
                if answer["response"]["result"]["status"] != "Success":
                    log.warning("conversion refused", extra={"fields": {"message": answer["response"]["result"]["message"]}})
                self._send(200, answer)

            def _send(self, code, payload):
                data = (json.dumps(payload) + "\n").encode()
                self.send_response(code)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args):  # keep the JSON log clean
                pass

        self.serving_cert = ServingCert(cert_file, key_file)
        self.server = _TLSServer((address, port), Handler)
        self.server.serving_cert = self.serving_cert
        self.port = self.server.server_address[1]

    def run(self) -> None:
        self.server.serve_forever(poll_interval=0.5)

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()
