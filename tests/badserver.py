"""A misbehaving HTTP server for crawl tests: time-outs, errors, redirect loops, non-HTML, wrong
charsets, malformed and oversized pages, an endless calendar, a slow tree of pages.

Every request's path is logged in ``server.requests`` (thread-safe), so tests can assert what was
(not) fetched.
"""

from __future__ import annotations

import re
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlsplit

BIG = 200_000  # bytes of the oversized pages (tests use a much smaller max_bytes)


def page(title: str, links: list[str] = (), lang: str = "en", body: str = "") -> str:
    items = "".join(f'<li><a href="{h}">{h}</a></li>' for h in links)
    return (
        f'<!DOCTYPE html><html lang="{lang}"><head><meta charset="utf-8"><title>{title}</title>'
        f"</head><body><h1>{title}</h1><p>{body}</p><ul>{items}</ul></body></html>"
    )


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True
    server: BadServer

    def log_message(self, format: str, *args: object) -> None:  # noqa: A002
        pass

    def _send(self, status: int, body: bytes, ctype: str | None, headers: dict | None = None):
        self.send_response(status)
        if ctype:
            self.send_header("Content-Type", ctype)
        for k, v in (headers or {}).items():
            self.send_header(k, v)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def _html(self, text: str, status: int = 200, ctype: str = "text/html; charset=utf-8"):
        self._send(status, text.encode("utf-8"), ctype)

    def _redirect(self, location: str, status: int = 302):
        self._send(status, b"", "text/html", {"Location": location})

    def do_GET(self) -> None:  # noqa: C901 - a routing table
        self.server.log(self.path)
        parts = urlsplit(self.path)
        path, query = parts.path, parse_qs(parts.query)
        s = self.server
        if path == "/robots.txt":
            self._send(200, b"User-agent: *\nDisallow: /private\n", "text/plain")
        elif path == "/":
            links = [
                "/ok-en#top", "/ok-fr", "/slow", "/missing", "/error", "/loop-a", "/moved",
                "/away", "/report", "/picture", "/file.pdf", "/latin1", "/nocharset",
                "/nocharset-utf8", "/malformed", "/big", "/big-chunked", "/empty",
                "/cal?month=1", "/private/secret", s.offsite_url, s.closed_url,
                "mailto:someone@example.org", "javascript:void(0)",
            ]  # fmt: skip
            self._html(page("Index", links))
        elif path == "/ok-en":
            self._html(page("Hello", ["/ok-fr", "/"], lang="en-CA", body="Hello world."))
        elif path == "/ok-fr":
            self._html(page("Bonjour", ["/ok-en"], lang="fr-CA", body="Bonjour le monde."))
        elif path == "/slow":
            time.sleep(s.slow_s)
            self._html(page("Too late"))
        elif path == "/error":
            self._html(page("Server error"), status=500)
        elif path == "/loop-a":
            self._redirect("/loop-b")
        elif path == "/loop-b":
            self._redirect("/loop-a")
        elif path == "/moved":
            self._redirect("/ok-en", 301)
        elif path == "/away":
            self._redirect(s.offsite_url + "redirected")
        elif path == "/report":
            self._send(200, b"%PDF-1.4\n" + b"0" * 2000, "application/pdf")
        elif path == "/picture":
            self._send(200, b"\x89PNG\r\n\x1a\n" + b"\x00" * 500, "image/png")
        elif path == "/latin1":  # latin-1 bytes declared as UTF-8
            text = page("Caf\u00e9", body="D\u00e9j\u00e0 vu, na\u00efve caf\u00e9.", lang="fr")
            self._send(200, text.encode("latin-1"), "text/html; charset=utf-8")
        elif path == "/nocharset":  # latin-1 bytes, no charset anywhere
            text = page("Caf\u00e9", body="Cr\u00e8me br\u00fbl\u00e9e.", lang="fr")
            body = text.replace('<meta charset="utf-8">', "").encode("latin-1")
            self._send(200, body, "text/html")
        elif path == "/nocharset-utf8":  # UTF-8 bytes, no charset anywhere
            text = page("Na\u00efve", body="Cr\u00e8me br\u00fbl\u00e9e \u2014 \u00e9t\u00e9.")
            self._send(200, text.replace('<meta charset="utf-8">', "").encode(), "text/html")
        elif path == "/malformed":
            body = (
                "<html lang=es><body><p>Sin cerrar <b>negrita <a href='/ok-en'>enlace<div>"
                "</span></table><a href=/ok-fr><<<>>> &bogus; \x00 <td>celda</html></p>"
            )
            self._send(200, body.encode(), "text/html")
        elif path == "/big":
            self._send(200, b"<html><body>" + b"x" * BIG + b"</body></html>", "text/html")
        elif path == "/big-chunked":
            self.send_response(200)
            self.send_header("Content-Type", "text/html")
            self.send_header("Transfer-Encoding", "chunked")
            self.end_headers()
            try:
                for _ in range(BIG // 10_000):
                    chunk = b"<p>" + b"y" * 9_993 + b"</p>"
                    self.wfile.write(f"{len(chunk):x}\r\n".encode() + chunk + b"\r\n")
                self.wfile.write(b"0\r\n\r\n")
            except OSError:  # the client hung up (max size reached)
                pass
        elif path == "/empty":
            self._send(200, b"", "text/html")
        elif path == "/cal":
            month = int(query.get("month", ["1"])[0])
            self._html(page(f"Month {month}", [f"/cal?month={month + 1}"]))
        elif path.startswith("/private"):
            self._html(page("Private"))
        elif m := re.fullmatch(r"/tree/(\d+)", path):
            n = int(m.group(1))
            time.sleep(s.tree_delay_s)
            kids = [f"/tree/{k}" for k in (2 * n + 1, 2 * n + 2) if k < s.tree_size]
            self._html(page(f"Node {n}", kids, body=f"Node number {n}."))
        else:
            self._html(page("Not found"), status=404)


class BadServer(ThreadingHTTPServer):
    """The server; see the module docstring."""

    daemon_threads = True
    request_queue_size = 64

    def __init__(self, host: str = "127.0.0.1"):
        super().__init__((host, 0), _Handler)
        self.requests: list[str] = []
        self._lock = threading.Lock()
        self.slow_s = 3.0
        self.tree_size = 40
        self.tree_delay_s = 0.0
        self.offsite_url = "http://127.0.0.2:9/"
        self.closed_url = "http://127.0.0.1:9/"

    def handle_error(self, request, client_address) -> None:
        pass  # clients hanging up (time-outs, cancelled downloads) are expected here

    @property
    def origin(self) -> str:
        host, port = self.server_address[:2]
        return f"http://{host}:{port}"

    def log(self, path: str) -> None:
        with self._lock:
            self.requests.append(path)

    def fetched(self) -> list[str]:
        """Logged request paths, robots.txt excluded."""
        with self._lock:
            return [p for p in self.requests if p != "/robots.txt"]


@contextmanager
def running(host: str = "127.0.0.1") -> Iterator[BadServer]:
    """Run a :class:`BadServer` in a thread for the ``with`` block."""
    server = BadServer(host)
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.1})
    thread.daemon = True
    thread.start()
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()
