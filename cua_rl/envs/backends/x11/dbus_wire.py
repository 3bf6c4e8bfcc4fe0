"""D-Bus's wire format for method calls out and replies in (stdlib only, no cua_rl imports).

:mod:`cua_rl.envs.backends.x11.a11y_bulk` sends ~3,000 AT-SPI calls per spreadsheet read;
jeepney's general marshalling spent ~40 µs of Python on each call and its reply, more than the
application took to answer. This module does only what those waves need, about 5x cheaper:
:func:`method_call` encodes a call (header fields cached per destination / interface / member,
arguments of the basic types ``y b i u d s o g``), :func:`split` cuts whole messages off a
received buffer and :func:`decode` reads one (header fields and a body of any signature but
file descriptors). jeepney reads what it writes and the other way round (tested); jeepney
still opens the connection.

The format: https://dbus.freedesktop.org/doc/dbus-specification.html#message-protocol
"""

import struct

METHOD_CALL, METHOD_RETURN, ERROR, SIGNAL = 1, 2, 3, 4
_PATH, _INTERFACE, _MEMBER, _ERROR_NAME, _REPLY_SERIAL, _DESTINATION = 1, 2, 3, 4, 5, 6
_SIGNATURE = 8
_FIXED = {"y": ("B", 1), "b": ("I", 4), "n": ("h", 2), "q": ("H", 2), "i": ("i", 4),
          "u": ("I", 4), "x": ("q", 8), "t": ("Q", 8), "d": ("d", 8), "h": ("I", 4)}


class WireError(ValueError):
    """Bytes that are not a D-Bus message this module reads."""


def _pad(n, step):
    return -n % step


def _string(value, out, pos):
    """Append a D-Bus string (``s`` / ``o``) at ``pos`` (4-aligned); the new position."""
    data = value.encode()
    out += struct.pack("<I", len(data)) + data + b"\0"
    return pos + 5 + len(data)


def _field(code, sig, value, out, pos):
    out += b"\0" * _pad(pos, 8)
    pos += _pad(pos, 8)
    out += bytes((code, 1, ord(sig), 0))
    pos += 4
    if sig == "g":
        data = value.encode()
        out += bytes((len(data),)) + data + b"\0"
        return pos + 2 + len(data)
    return _string(value, out, pos)


def _body(sig, args):
    out, pos = bytearray(), 0
    if len(sig) != len(args):
        raise WireError(f"signature {sig!r} for {len(args)} arguments")
    for code, value in zip(sig, args, strict=True):
        if code in "so":
            out += b"\0" * _pad(pos, 4)
            pos = _string(value, out, pos + _pad(pos, 4))
        elif code == "g":
            data = value.encode()
            out += bytes((len(data),)) + data + b"\0"
            pos += 2 + len(data)
        elif code in _FIXED:
            fmt, size = _FIXED[code]
            out += b"\0" * _pad(pos, size) + struct.pack("<" + fmt, value)
            pos += _pad(pos, size) + size
        else:
            raise WireError(f"cannot encode arguments of type {code!r}")
    return bytes(out)


_HEADER_CACHE = {}


def method_call(serial, destination, path, interface, member, sig="", args=()):
    """The bytes of one method call (little-endian, no flags)."""
    body = _body(sig, args)
    key = (destination, interface, member, sig)
    tail = _HEADER_CACHE.get(key)
    if tail is None:  # the fields after the path: fixed per destination / interface / member
        tail = bytearray()
        pos = 0
        for code, kind, value in ((_INTERFACE, "s", interface), (_MEMBER, "s", member),
                                  (_DESTINATION, "s", destination), (_SIGNATURE, "g", sig)):
            if value:
                pos = _field(code, kind, value, tail, pos)
        if len(_HEADER_CACHE) > 256:
            _HEADER_CACHE.clear()
        tail = _HEADER_CACHE[key] = bytes(tail)
    fields = bytearray()
    pos = _field(_PATH, "o", path, fields, 16)  # the fields start at offset 16
    fields += b"\0" * _pad(pos, 8)  # the cached fields were laid out from an 8-aligned start
    fields += tail
    return b"".join((b"l\x01\x00\x01", struct.pack("<III", len(body), serial, len(fields)),
                     fields, b"\0" * _pad(len(fields), 8), body))


def _size(buf, start):
    end = "<" if buf[start] == 0x6C else ">"  # 'l' or 'B'
    body_len, _, fields_len = struct.unpack_from(end + "III", buf, start + 4)
    return 16 + fields_len + _pad(fields_len, 8) + body_len


def split(buf):
    """Whole messages at the front of ``buf`` (a bytearray, consumed): ``[bytes]``."""
    out, start = [], 0
    while len(buf) - start >= 16:
        if buf[start] not in (0x6C, 0x42):
            raise WireError(f"not a D-Bus message (endianness byte {buf[start]!r})")
        size = _size(buf, start)
        if len(buf) - start < size:
            break
        out.append(bytes(buf[start:start + size]))
        start += size
    del buf[:start]
    return out


def decode(msg):
    """``(type, reply serial, error name, body tuple)`` of one message (:func:`split`'s).

    Bodies read as jeepney reads them: structs tuples, arrays lists (``ay`` bytes), dicts
    dicts, variants ``(signature, value)``."""
    end = "<" if msg[0] == 0x6C else ">"
    kind = msg[1]
    fields_len = struct.unpack_from(end + "I", msg, 12)[0]
    reader = _Reader(msg, end)
    reader.pos = 16
    fields = {}
    while reader.pos < 16 + fields_len:
        reader.align(8)
        code = msg[reader.pos]
        reader.pos += 1
        fields[code] = reader.read("v")[1]
    reader.pos = 16 + fields_len + _pad(fields_len, 8)
    sig = fields.get(_SIGNATURE, "")
    body = tuple(reader.read(t) for t in _types(sig))
    return kind, fields.get(_REPLY_SERIAL), fields.get(_ERROR_NAME), body


def _types(sig):
    """The complete types of a signature: ``"sa{ss}(ii)"`` -> ``["s", "a{ss}", "(ii)"]``."""
    out, i = [], 0
    while i < len(sig):
        j = _type_end(sig, i)
        out.append(sig[i:j])
        i = j
    return out


def _type_end(sig, i):
    if sig[i] == "a":
        return _type_end(sig, i + 1)
    if sig[i] in "({":
        close = ")" if sig[i] == "(" else "}"
        j = i + 1
        while sig[j] != close:
            j = _type_end(sig, j)
        return j + 1
    return i + 1


def _alignment(code):
    if code in _FIXED:
        return _FIXED[code][1]
    return 8 if code in "({" else 1 if code in "gv" else 4


class _Reader:
    def __init__(self, buf, end):
        self.buf, self.end, self.pos = buf, end, 0

    def align(self, n):
        self.pos += _pad(self.pos, n)

    def read(self, t):
        code = t[0]
        if code in _FIXED:
            fmt, size = _FIXED[code]
            self.align(size)
            value = struct.unpack_from(self.end + fmt, self.buf, self.pos)[0]
            self.pos += size
            return bool(value) if code == "b" else value
        if code in "so":
            self.align(4)
            n = struct.unpack_from(self.end + "I", self.buf, self.pos)[0]
            value = self.buf[self.pos + 4:self.pos + 4 + n].decode()
            self.pos += 5 + n
            return value
        if code == "g":
            n = self.buf[self.pos]
            value = self.buf[self.pos + 1:self.pos + 1 + n].decode()
            self.pos += 2 + n
            return value
        if code == "v":
            sig = self.read("g")
            return sig, self.read(sig)
        if code == "(":
            self.align(8)
            return tuple(self.read(s) for s in _types(t[1:-1]))
        if code == "a":
            self.align(4)
            n = struct.unpack_from(self.end + "I", self.buf, self.pos)[0]
            self.pos += 4
            item = t[1:]
            self.align(_alignment(item[0]))
            stop = self.pos + n
            if item == "y":
                self.pos = stop
                return bytes(self.buf[stop - n:stop])
            if item[0] == "{":
                key, value = _types(item[1:-1])
                out = {}
                while self.pos < stop:
                    self.align(8)
                    k = self.read(key)
                    out[k] = self.read(value)
                return out
            values = []
            while self.pos < stop:
                values.append(self.read(item))
            return values
        raise WireError(f"cannot decode type {t!r}")
