"""Defence in depth: Chromium in a network namespace whose only way out is the guard proxy.

One thread of sift leaves the host's network namespace (``unshare(CLONE_NEWNET)`` affects
only the calling thread), brings up the new namespace's loopback interface and stays there.
Every listening socket of the guard proxies is created by that thread, so it lives *inside*
the namespace, while the proxies' upstream connections are made by the event loop in the
host namespace. Chromium is started through ``nsenter --net=/proc/<pid>/task/<tid>/ns/net``,
so it sees only its own ``lo`` with the proxy listeners on it: a connection that ignored the
proxy settings (a flag forgotten, a Chromium bug) would find nothing to reach. The proxy
listeners are not on the host's loopback at all.

Creating a network namespace needs ``CAP_SYS_ADMIN``: sift running as root, or a container
granted it. Unprivileged, or under a seccomp profile that refuses ``unshare`` (Docker's
default), ``NetNamespace.create`` raises ``OSError`` and, with ``browser.netns = "auto"``,
sift runs Chromium in the host namespace — still fully guarded by the proxy and the flags
(docs/browser.md).
"""

from __future__ import annotations

import ctypes
import ctypes.util
import fcntl
import os
import shutil
import socket
import stat
import struct
import tempfile
import threading
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import TypeVar

CLONE_NEWNET = 0x40000000
SIOCGIFFLAGS = 0x8913
SIOCSIFFLAGS = 0x8914
IFF_UP = 0x1
T = TypeVar("T")


def _unshare_net() -> None:
    libc = ctypes.CDLL(ctypes.util.find_library("c"), use_errno=True)
    if libc.unshare(CLONE_NEWNET) != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"unshare(CLONE_NEWNET): {os.strerror(err)}")


def _loopback_up() -> None:
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        req = struct.pack("16sH14x", b"lo", 0)
        flags = struct.unpack("16sH14x", fcntl.ioctl(s.fileno(), SIOCGIFFLAGS, req))[1]
        fcntl.ioctl(s.fileno(), SIOCSIFFLAGS, struct.pack("16sH14x", b"lo", flags | IFF_UP))


class NetNamespace:
    """A thread living in a fresh network namespace, and a launcher script that puts
    Chromium in it. ``create`` raises ``OSError`` where namespaces are not allowed."""

    def __init__(self, executor: ThreadPoolExecutor, tid: int, wrapper: Path) -> None:
        self._executor = executor
        self.tid = tid
        self.wrapper = wrapper

    @classmethod
    def create(cls, executable: str) -> NetNamespace:
        nsenter = shutil.which("nsenter")
        if nsenter is None:
            raise OSError("nsenter (util-linux) is not installed")
        executor = ThreadPoolExecutor(1, thread_name_prefix="sift-netns")

        def enter() -> int:
            _unshare_net()
            _loopback_up()
            return threading.get_native_id()

        try:
            tid = executor.submit(enter).result()
        except OSError:
            executor.shutdown(wait=False)
            raise
        ns_path = f"/proc/{os.getpid()}/task/{tid}/ns/net"
        fd, name = tempfile.mkstemp(prefix="sift-chromium-", suffix=".sh")
        with os.fdopen(fd, "w") as fh:
            fh.write(f'#!/bin/sh\nexec {nsenter} --net={ns_path} -- {executable} "$@"\n')
        os.chmod(name, stat.S_IRWXU)
        return cls(executor, tid, Path(name))

    def run(self, fn: Callable[[], T]) -> Future[T]:
        """Run ``fn`` on the namespace's thread (sockets it makes live in the namespace)."""
        return self._executor.submit(fn)

    def listener(self) -> Future[socket.socket]:
        """A listening TCP socket on 127.0.0.1 inside the namespace, made on its thread."""
        return self.run(_listening_socket)

    def close(self) -> None:
        self._executor.shutdown(wait=False)
        self.wrapper.unlink(missing_ok=True)


def _listening_socket() -> socket.socket:
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.bind(("127.0.0.1", 0))
    sock.listen(128)
    sock.setblocking(False)
    return sock
