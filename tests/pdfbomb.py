"""A small PDF that makes text extraction slow: form XObjects drawing each other.

Level ``k`` form draws level ``k+1`` ``fan`` times; the last draws one word (``words`` times).
pypdf re-reads a form on every draw, so ``levels`` = 4 means 1,110 form draws from ~1.5 KB
of PDF, and every level multiplies that by ``fan``.

pypdf (6.x) now stops after 5,000 form draws, so draws alone take about a second: too little
for a test that needs a PDF slower than its budget on *any* machine, idle or loaded. There,
``words`` makes each draw heavy: the last form's content (compressed, then hex-encoded, so
the PDF stays ASCII and small) draws its word ``words`` times.
"""

from __future__ import annotations

import binascii
import io
import zlib


def xobject_bomb(levels: int = 6, fan: int = 10, words: int = 1) -> bytes:
    objs: dict[int, bytes] = {
        1: b"<< /Type /Catalog /Pages 2 0 R >>",
        2: b"<< /Type /Pages /Kids [3 0 R] /Count 1 >>",
        4: b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>",
    }
    first = 6
    for i in range(levels):
        n = first + i
        filters = b""
        if i == levels - 1:
            content = b"BT /F1 12 Tf " + b"(a) Tj " * words + b"ET"
            res = b"<< /Font << /F1 4 0 R >> >>"
            if words > 1:
                content = binascii.hexlify(zlib.compress(content, 9)) + b">"
                filters = b" /Filter [/ASCIIHexDecode /FlateDecode]"
        else:
            content = b"/X Do " * fan
            res = b"<< /XObject << /X %d 0 R >> /Font << /F1 4 0 R >> >>" % (n + 1)
        objs[n] = (
            b"<< /Type /XObject /Subtype /Form /BBox [0 0 100 100] /Resources "
            + res
            + filters
            + b" /Length %d >>\nstream\n" % len(content)
            + content
            + b"\nendstream"
        )
    page_content = b"/X Do " * fan
    objs[5] = b"<< /Length %d >>\nstream\n" % len(page_content) + page_content + b"\nendstream"
    objs[3] = (
        b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 100 100] /Contents 5 0 R "
        b"/Resources << /XObject << /X %d 0 R >> /Font << /F1 4 0 R >> >> >>" % first
    )
    out = io.BytesIO()
    out.write(b"%PDF-1.4\n")
    offsets = {}
    for n in sorted(objs):
        offsets[n] = out.tell()
        out.write(b"%d 0 obj\n" % n + objs[n] + b"\nendobj\n")
    xref = out.tell()
    size = max(objs) + 1
    out.write(b"xref\n0 %d\n0000000000 65535 f \n" % size)
    for n in range(1, size):
        out.write(b"%010d 00000 n \n" % offsets[n])
    out.write(b"trailer\n<< /Size %d /Root 1 0 R >>\nstartxref\n%d\n%%%%EOF\n" % (size, xref))
    return out.getvalue()
