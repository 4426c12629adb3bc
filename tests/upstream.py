"""Local upstreams for tests: real HTTP servers on loopback, never the internet.

- ``Upstream``: an ``aiohttp.web`` app on 127.0.0.1 (or any loopback address) with a port,
  routes you can register at any time (also after start), and per-path request counts::

      async with Upstream() as up:
          up.page("/a", b"<p>hi</p>")
          up.redirect("/old", "/a", status=301)
          up.route("/custom", handler)            # async (web.Request) -> web.StreamResponse
          url = up.url("/a")                      # http://127.0.0.1:<port>/a
          up.hits["/a"]                           # how many requests reached /a

- ``CanaryListener``: raw listening sockets whose accept count must stay 0.
- ``reserve_port``: one port number free on several loopback addresses at once.
- ``RawUpstream``: answers every connection with scripted raw bytes (malformed responses).
- ``TestCA``: a throwaway CA and leaf certificates (made with the ``openssl`` CLI).
- ``install_hostile_routes``: bombs, drips, floods, bad charsets, error pages, robots.txt.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import functools
import socket
import ssl
import subprocess
import zlib
from collections.abc import Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import Self

import brotli
import zstandard
from aiohttp import web

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


@dataclass
class Recorded:
    method: str
    path_qs: str
    headers: dict[str, str]
    peer: tuple[str, int]


def _family(host: str) -> socket.AddressFamily:
    return socket.AF_INET6 if ":" in host else socket.AF_INET


def _bound_socket(
    host: str, port: int, kind: socket.SocketKind = socket.SOCK_STREAM
) -> socket.socket:
    sock = socket.socket(_family(host), kind)
    if kind == socket.SOCK_STREAM:  # on UDP it would let another socket share the port
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    if ":" in host:
        sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
    try:
        sock.bind((host, port))
    except OSError:
        sock.close()
        raise
    return sock


def reserve_port(
    hosts: Iterable[str], attempts: int = 50, kind: socket.SocketKind = socket.SOCK_STREAM
) -> tuple[int, dict[str, socket.socket]]:
    """A port the OS picked, bound (not listening) on every host in ``hosts``: TCP, or UDP
    with ``kind=socket.SOCK_DGRAM``. The caller owns the sockets."""
    hosts = list(hosts)
    for _ in range(attempts):
        first = _bound_socket(hosts[0], 0, kind)
        port = first.getsockname()[1]
        socks = {hosts[0]: first}
        try:
            for host in hosts[1:]:
                socks[host] = _bound_socket(host, port, kind)
        except OSError:
            for s in socks.values():
                s.close()
            continue
        return port, socks
    raise RuntimeError(f"no port free on all of {hosts}")


class Upstream:
    """A real HTTP server on loopback with registrable routes and request counts."""

    def __init__(
        self,
        host: str = "127.0.0.1",
        port: int = 0,
        *,
        ssl_context: ssl.SSLContext | None = None,
        sock: socket.socket | None = None,
    ) -> None:
        self.host = host
        self._port = port
        self._ssl = ssl_context
        self._sock = sock
        self.routes: dict[str, Handler] = {}
        self.prefix_routes: dict[str, Handler] = {}
        self.hits: collections.Counter[str] = collections.Counter()
        self.requests: list[Recorded] = []
        self._runner: web.AppRunner | None = None

    # -- lifecycle -------------------------------------------------------------------------
    async def start(self) -> Self:
        app = web.Application()
        app.router.add_route("*", "/{tail:.*}", self._dispatch)
        self._runner = web.AppRunner(
            app, access_log=None, handler_cancellation=True, shutdown_timeout=0.1
        )
        await self._runner.setup()
        if self._sock is not None:
            site: web.BaseSite = web.SockSite(self._runner, self._sock, ssl_context=self._ssl)
        else:
            site = web.TCPSite(self._runner, self.host, self._port, ssl_context=self._ssl)
        await site.start()
        server = site._server
        assert server is not None
        self._port = server.sockets[0].getsockname()[1]  # type: ignore[attr-defined]
        return self

    async def stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

    async def __aenter__(self) -> Self:
        return await self.start()

    async def __aexit__(
        self, t: type[BaseException] | None, e: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.stop()

    # -- addressing ------------------------------------------------------------------------
    @property
    def port(self) -> int:
        return self._port

    def url(self, path: str = "/", host: str | None = None, scheme: str | None = None) -> str:
        """``http://<host or bind address>:<port><path>``."""
        host = host or self.host
        host = f"[{host}]" if ":" in host else host
        scheme = scheme or ("https" if self._ssl else "http")
        return f"{scheme}://{host}:{self._port}{path}"

    @property
    def peers(self) -> set[tuple[str, int]]:
        """Distinct client (address, port) pairs seen: one per TCP connection."""
        return {r.peer for r in self.requests}

    # -- routes ----------------------------------------------------------------------------
    def route(self, path: str, handler: Handler, *, prefix: bool = False) -> None:
        """Serve ``path`` (or every path starting with it) with ``handler``."""
        (self.prefix_routes if prefix else self.routes)[path] = handler

    def page(
        self,
        path: str,
        body: bytes | str,
        *,
        status: int = 200,
        content_type: str | None = "text/html; charset=utf-8",
        headers: Mapping[str, str] | None = None,
    ) -> None:
        data = body.encode() if isinstance(body, str) else body

        async def handler(request: web.Request) -> web.StreamResponse:
            h = dict(headers or {})
            if content_type is not None:
                h["Content-Type"] = content_type
            return web.Response(body=data, status=status, headers=h)

        self.route(path, handler)

    def redirect(self, path: str, location: str, status: int = 302) -> None:
        async def handler(request: web.Request) -> web.StreamResponse:
            return web.Response(status=status, headers={"Location": location})

        self.route(path, handler)

    async def _dispatch(self, request: web.Request) -> web.StreamResponse:
        peer = request.transport.get_extra_info("peername") if request.transport else None
        self.hits[request.path] += 1
        self.requests.append(
            Recorded(
                request.method,
                request.path_qs,
                {k.lower(): v for k, v in request.headers.items()},
                (str(peer[0]), int(peer[1])) if peer else ("", 0),
            )
        )
        handler = self.routes.get(request.path)
        if handler is None:
            for prefix, h in self.prefix_routes.items():
                if request.path.startswith(prefix):
                    handler = h
                    break
        if handler is None:
            return web.Response(status=404, text="no such route\n")
        return await handler(request)


class CanaryListener:
    """Listening sockets that must never see a connection.

    ``accepted()`` drains every completed handshake from the kernel's accept queues, so a
    connection that raced the assertion is still counted.
    """

    def __init__(self, socks: Iterable[socket.socket]) -> None:
        """Takes ``socks`` (bound sockets) over: they are closed with it, or at once if
        they cannot listen."""
        self._socks = list(socks)
        self.count = 0
        try:
            for s in self._socks:
                s.listen(16)
                s.setblocking(False)
        except BaseException:
            self.close()
            raise

    @classmethod
    def on(cls, hosts: Iterable[str], port: int = 0) -> CanaryListener:
        socks: list[socket.socket] = []
        try:
            for h in hosts:
                socks.append(_bound_socket(h, port))
        except BaseException:
            for s in socks:
                s.close()
            raise
        return cls(socks)

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def accepted(self) -> int:
        for s in self._socks:
            while True:
                try:
                    conn, _ = s.accept()
                except (BlockingIOError, InterruptedError):
                    break
                conn.close()
                self.count += 1
        return self.count

    def close(self) -> None:
        for s in self._socks:
            s.close()


class RawUpstream:
    """Reads a request head, writes ``script`` (raw bytes), then closes or hangs."""

    def __init__(self, script: bytes, *, hang: bool = False, host: str = "127.0.0.1") -> None:
        self.script = script
        self.hang = hang
        self.host = host
        self.connections = 0
        self._writers: set[asyncio.StreamWriter] = set()
        self._server: asyncio.Server | None = None
        self.port = 0

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        self._writers.add(writer)
        try:
            await reader.readuntil(b"\r\n\r\n")
            writer.write(self.script)
            await writer.drain()
            if self.hang:
                await reader.read()  # until the client goes away
        except (ConnectionError, asyncio.IncompleteReadError, asyncio.LimitOverrunError):
            pass
        finally:
            self._writers.discard(writer)
            writer.close()

    async def __aenter__(self) -> Self:
        self._server = await asyncio.start_server(self._serve, self.host, 0)
        self.port = self._server.sockets[0].getsockname()[1]
        return self

    async def __aexit__(self, *exc: object) -> None:
        assert self._server is not None
        self._server.close()
        for writer in list(self._writers):
            writer.close()
        await self._server.wait_closed()
        await asyncio.sleep(0)  # let the handlers see their closed connections

    def url(self, path: str = "/") -> str:
        return f"http://{self.host}:{self.port}{path}"


@dataclass
class TestCA:
    """A throwaway certificate authority in ``directory``, driven by the openssl CLI."""

    directory: Path
    serial: int = 1
    issued: dict[str, tuple[Path, Path]] = field(default_factory=dict)

    __test__ = False  # not a pytest test class

    def __post_init__(self) -> None:
        self.key = self.directory / "ca.key"
        self.cert = self.directory / "ca.pem"
        _openssl(
            "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1",
            "-nodes", "-keyout", str(self.key), "-out", str(self.cert), "-days", "2",
            "-subj", "/CN=sift test CA",
            "-addext", "basicConstraints=critical,CA:TRUE",
            "-addext", "keyUsage=critical,keyCertSign,cRLSign",
        )  # fmt: skip

    def issue(self, *names: str) -> tuple[Path, Path]:
        """(cert, key) for a leaf certificate valid for DNS ``names``."""
        stem = self.directory / f"leaf{self.serial}"
        self.serial += 1
        key, csr, cert, ext = (stem.with_suffix(s) for s in (".key", ".csr", ".pem", ".ext"))
        san = ",".join(f"DNS:{n}" for n in names)
        ext.write_text(f"subjectAltName={san}\nbasicConstraints=CA:FALSE\n")
        _openssl(
            "req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
            "-keyout", str(key), "-out", str(csr), "-subj", f"/CN={names[0]}",
        )  # fmt: skip
        _openssl(
            "x509", "-req", "-in", str(csr), "-CA", str(self.cert), "-CAkey", str(self.key),
            "-set_serial", str(self.serial), "-out", str(cert), "-days", "2",
            "-extfile", str(ext),
        )  # fmt: skip
        return cert, key

    def client_context(self) -> ssl.SSLContext:
        return ssl.create_default_context(cafile=str(self.cert))

    def server_context(self, *names: str) -> ssl.SSLContext:
        cert, key = self.issue(*names)
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        ctx.load_cert_chain(str(cert), str(key))
        return ctx


def _openssl(*args: str) -> None:
    subprocess.run(["openssl", *args], check=True, capture_output=True)


# -- hostile content ---------------------------------------------------------------------
MIB = 1 << 20


def _deflate_bomb(size_mib: int, wbits: int) -> bytes:
    """A valid zlib/gzip stream of ``size_mib`` MiB of zeros, built in milliseconds.

    After ``Z_FULL_FLUSH`` the compressor forgets its history, so the bytes for each further
    MiB of zeros are identical: compress two, repeat the second, write the real trailer.
    """
    zeros = bytes(MIB)
    c = zlib.compressobj(9, zlib.DEFLATED, wbits)
    head = c.compress(zeros) + c.flush(zlib.Z_FULL_FLUSH)
    segment = c.compress(zeros) + c.flush(zlib.Z_FULL_FLUSH)
    gzip = wbits > zlib.MAX_WBITS
    end = c.flush()[: -8 if gzip else -4]
    crc = adler = None
    if gzip:
        crc = 0
        for _ in range(size_mib):
            crc = zlib.crc32(zeros, crc)
        trailer = crc.to_bytes(4, "little") + ((size_mib * MIB) & 0xFFFFFFFF).to_bytes(4, "little")
    else:
        adler = 1
        for _ in range(size_mib):
            adler = zlib.adler32(zeros, adler)
        trailer = adler.to_bytes(4, "big")
    return head + segment * (size_mib - 1) + end + trailer


@functools.cache
def gzip_bomb(size_mib: int = 200) -> bytes:
    """A gzip body that inflates to ``size_mib`` MiB of zeros (~200 KiB for 200 MiB)."""
    return _deflate_bomb(size_mib, 16 + zlib.MAX_WBITS)


@functools.cache
def deflate_bomb(size_mib: int = 200) -> bytes:
    """The same as a zlib-wrapped ``deflate`` body."""
    return _deflate_bomb(size_mib, zlib.MAX_WBITS)


@functools.cache
def brotli_bomb(size_mib: int = 200) -> bytes:
    c = brotli.Compressor(quality=5)
    zeros = bytes(MIB)
    return b"".join(c.process(zeros) for _ in range(size_mib)) + c.finish()


@functools.cache
def zstd_bomb(size_mib: int = 200) -> bytes:
    c = zstandard.ZstdCompressor(level=3).compressobj()
    zeros = bytes(MIB)
    return b"".join(c.compress(zeros) for _ in range(size_mib)) + c.flush()


def encode(body: bytes, coding: str) -> bytes:
    """``body`` in one content coding: gzip, deflate, deflate-raw, br or zstd."""
    if coding == "gzip":
        c = zlib.compressobj(6, zlib.DEFLATED, 16 + zlib.MAX_WBITS)
        return c.compress(body) + c.flush()
    if coding == "deflate":
        return zlib.compress(body)
    if coding == "deflate-raw":
        c = zlib.compressobj(6, zlib.DEFLATED, -zlib.MAX_WBITS)
        return c.compress(body) + c.flush()
    if coding == "br":
        return bytes(brotli.compress(body))
    if coding == "zstd":
        return zstandard.ZstdCompressor().compress(body)
    raise ValueError(coding)


def install_hostile_routes(up: Upstream, *, drip_interval_s: float = 0.05) -> None:
    """Register the hostile-upstream route set on ``up``.

    /page /redirect/{1..} /loop/a /loop/b /to-loopback /bomb/{gzip,deflate,br,zstd}
    /endless /drip /slow-headers /header-flood /header-huge /huge-length /stacked
    /unknown-encoding /charset/{zlib,rot13,bom-utf16,meta,header-wins,sniff}
    /status/{404,500,429} /robots variants are added by the robots tests themselves.
    """
    up.page("/page", "<html><head><title>t</title></head><body><p>hello</p></body></html>")
    for n in range(1, 16):
        up.redirect(f"/redirect/{n}", f"/redirect/{n - 1}" if n > 1 else "/page")
    up.redirect("/loop/a", "/loop/b")
    up.redirect("/loop/b", "/loop/a")

    def bomb(data: Callable[[], bytes], coding: str) -> Handler:
        async def handler(request: web.Request) -> web.StreamResponse:
            return web.Response(
                body=data(), headers={"Content-Encoding": coding, "Content-Type": "text/html"}
            )

        return handler

    up.route("/bomb/gzip", bomb(gzip_bomb, "gzip"))
    up.route("/bomb/deflate", bomb(deflate_bomb, "deflate"))
    up.route("/bomb/br", bomb(brotli_bomb, "br"))
    up.route("/bomb/zstd", bomb(zstd_bomb, "zstd"))

    async def endless(request: web.Request) -> web.StreamResponse:
        resp = web.StreamResponse(headers={"Content-Type": "text/plain"})
        resp.enable_chunked_encoding()
        await resp.prepare(request)
        chunk = b"x" * 65536
        try:
            while True:
                await resp.write(chunk)
        except ConnectionError:  # the client hung up, as it should
            return resp

    async def drip(request: web.Request) -> web.StreamResponse:
        resp = web.StreamResponse(headers={"Content-Type": "text/plain"})
        resp.enable_chunked_encoding()
        await resp.prepare(request)
        try:
            while True:
                await resp.write(b"x")
                await asyncio.sleep(drip_interval_s)
        except ConnectionError:
            return resp

    async def slow_headers(request: web.Request) -> web.StreamResponse:
        await asyncio.sleep(3600)
        raise AssertionError("unreachable")

    async def huge_length(request: web.Request) -> web.StreamResponse:
        resp = web.StreamResponse(headers={"Content-Type": "text/plain"})
        resp.content_length = 1 << 40
        await resp.prepare(request)
        try:
            await resp.write(b"x" * 1024)
            await asyncio.sleep(3600)
        except ConnectionError:
            pass
        return resp

    up.route("/endless", endless)
    up.route("/drip", drip)
    up.route("/slow-headers", slow_headers)
    up.route("/huge-length", huge_length)

    async def header_flood(request: web.Request) -> web.StreamResponse:
        resp = web.Response(text="flood")
        for i in range(200):
            resp.headers.add(f"X-Flood-{i}", "y")
        return resp

    async def header_huge(request: web.Request) -> web.StreamResponse:
        resp = web.Response(text="huge")
        for i in range(12):  # 12 fields of 7 KiB: each under the field limit, 84 KiB total
            resp.headers[f"X-Big-{i}"] = "z" * 7000
        return resp

    up.route("/header-flood", header_flood)
    up.route("/header-huge", header_huge)

    up.page("/stacked", encode(encode(b"<p>two layers</p>", "gzip"), "br"),
            headers={"Content-Encoding": "gzip, br"})  # fmt: skip
    up.page("/unknown-encoding", b"whatever", headers={"Content-Encoding": "compress"})

    cyr = "<html><body><p>Съешь же ещё этих мягких французских булок, да выпей чаю. " * 20
    up.page("/charset/zlib", b"<p>plain ascii</p>", content_type="text/html; charset=zlib")
    up.page("/charset/rot13", b"<p>plain ascii</p>", content_type="text/html; charset=rot13")
    up.page("/charset/base64", b"<p>plain ascii</p>", content_type="text/html; charset=base64")
    up.page("/charset/utf7", b"<p>+ADw-script+AD4-</p>", content_type="text/html; charset=utf-7")
    up.page("/charset/bom-utf16", "\ufeff<p>wide</p>".encode("utf-16-le"), content_type="text/html")
    up.page(
        "/charset/meta",
        '<html><head><meta charset="koi8-r"></head><body>привет</body></html>'.encode("koi8-r"),
        content_type="text/html",
    )
    up.page(
        "/charset/http-equiv",
        b'<meta http-equiv="Content-Type" content="text/html; charset=windows-1251">',
        content_type="text/html",
    )
    up.page("/charset/header-wins", '<meta charset="koi8-r"><p>é</p>'.encode(),
            content_type="text/html; charset=UTF-8")  # fmt: skip
    up.page(
        "/charset/sniff", (cyr + "</p></body></html>").encode("cp1251"), content_type="text/html"
    )
    up.page("/charset/binary", bytes(range(256)) * 4, content_type="application/octet-stream")

    for status in (404, 500, 429):
        up.page(f"/status/{status}", f"status {status}", status=status, content_type="text/plain")


class BlackholeListener:
    """A listener whose accept queue is full, so new connects hang (connect timeouts)."""

    def __init__(self, host: str = "127.0.0.1") -> None:
        self._listener = _bound_socket(host, 0)
        self._fillers: list[socket.socket] = []
        try:
            self._listener.listen(0)
            self.port = self._listener.getsockname()[1]
            for _ in range(4):
                s = socket.socket(_family(host), socket.SOCK_STREAM)
                self._fillers.append(s)
                s.setblocking(False)
                with contextlib.suppress(BlockingIOError):
                    s.connect((host, self.port))
        except BaseException:
            self.close()
            raise

    def close(self) -> None:
        for s in [*self._fillers, self._listener]:
            s.close()
