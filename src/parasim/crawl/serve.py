"""Serve a local folder on 127.0.0.1 (a free port) in a child process while a crawl runs."""

from __future__ import annotations

import os
import select
import subprocess
import sys
import threading
import time
from collections.abc import Iterator, Sequence
from contextlib import ExitStack, contextmanager
from functools import partial
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path


class _QuietHandler(SimpleHTTPRequestHandler):
    # HTTP/1.1 keeps connections open between requests (the crawler pools them).
    protocol_version = "HTTP/1.1"
    # Headers and body are separate writes: with Nagle's algorithm each response waits for the
    # client's delayed ACK (~40 ms).
    disable_nagle_algorithm = True

    def log_message(self, format: str, *args: object) -> None:  # noqa: A002 - stdlib signature
        pass


class _Server(ThreadingHTTPServer):
    request_queue_size = 256  # the default 5 drops connections when the crawler opens many
    daemon_threads = True


def _exit_with_parent(parent_pid: int) -> None:
    # A crawl killed with SIGKILL cannot stop its server: the server stops itself.
    while True:
        time.sleep(0.5)
        if os.getppid() != parent_pid:
            os._exit(0)


def _serve(directory: str, parent_pid: int) -> None:
    """Child process: serve ``directory``, print the port on stdout, run until terminated."""
    threading.Thread(target=_exit_with_parent, args=(parent_pid,), daemon=True).start()
    server = _Server(("127.0.0.1", 0), partial(_QuietHandler, directory=directory))
    print(server.server_address[1], flush=True)
    server.serve_forever(poll_interval=0.2)


@contextmanager
def serve_folder(directory: str | Path, start_timeout_s: float = 30.0) -> Iterator[str]:
    """Serve ``directory`` over HTTP on 127.0.0.1 while the ``with`` block runs.

    The server is a child process , so it does not compete with
    the crawler for the GIL, and it stops when the crawl ends or dies.

    Args:
        directory: the folder to serve.
        start_timeout_s: how long to wait for the server to start.

    Yields:
        The server's origin, e.g. ``http://127.0.0.1:40123``.

    Raises:
        FileNotFoundError: ``directory`` is not a folder.
        RuntimeError: the server did not start.
    """
    directory = Path(directory)
    if not directory.is_dir():
        raise FileNotFoundError(f"serve_dir is not a folder: {directory}")
    code = (
        "import sys; from parasim.crawl.serve import _serve; _serve(sys.argv[1], int(sys.argv[2]))"
    )
    cmd = [sys.executable, "-c", code, str(directory.resolve()), str(os.getpid())]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stdin=subprocess.DEVNULL, text=True)
    try:
        ready, _, _ = select.select([proc.stdout], [], [], start_timeout_s)
        line = proc.stdout.readline().strip() if ready else ""
        if not line.isdigit():
            raise RuntimeError(
                f"the local server for {directory} did not start (exit {proc.poll()})"
            )
        yield f"http://127.0.0.1:{int(line)}"
    finally:
        proc.terminate()
        try:
            proc.wait(5)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(5)
        proc.stdout.close()


@contextmanager
def serve_folders(directories: Sequence[str | Path]) -> Iterator[list[str]]:
    """Serve each folder on its own port of 127.0.0.1 while the ``with`` block runs (a site on
    several hosts: one folder per host).

    Yields:
        The servers' origins, in the order of ``directories``.

    Raises:
        FileNotFoundError: a directory is not a folder.
        RuntimeError: a server did not start.
    """
    with ExitStack() as stack:
        yield [stack.enter_context(serve_folder(d)) for d in directories]
