"""The accessibility walker's D-Bus wire codec against jeepney (a second implementation)."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cua_rl.envs.backends.x11 import dbus_wire as W

jeepney = pytest.importorskip("jeepney")
from jeepney.low_level import Endianness, Header, HeaderFields, Message, MessageType  # noqa: E402

_text = st.text(st.characters(blacklist_categories=("Cs",), blacklist_characters="\0"),
                max_size=40)
_path = st.lists(st.from_regex(r"[A-Za-z0-9_]{1,12}", fullmatch=True), min_size=0,
                 max_size=5).map(lambda parts: "/" + "/".join(parts))
_bus = st.from_regex(r":1\.[0-9]{1,4}|org\.a11y\.[A-Za-z]{1,10}", fullmatch=True)
_name = st.from_regex(r"[A-Za-z][A-Za-z0-9_]{0,15}(\.[A-Za-z][A-Za-z0-9_]{0,15}){1,3}",
                      fullmatch=True)
_member = st.from_regex(r"[A-Za-z][A-Za-z0-9_]{0,20}", fullmatch=True)
_int32 = st.integers(-(2**31), 2**31 - 1)
_uint32 = st.integers(0, 2**32 - 1)
_args = st.one_of(
    st.just(("", ())),
    st.tuples(_int32, _int32).map(lambda v: ("ii", v)),
    _uint32.map(lambda v: ("u", (v,))),
    st.tuples(_text, _text).map(lambda v: ("ss", v)),
    st.tuples(_text, st.floats(allow_nan=False), _path).map(lambda v: ("sdo", v)),
    st.tuples(st.integers(0, 255), st.booleans(), _text).map(lambda v: ("ybs", v)),
)


@settings(max_examples=200, deadline=None)
@given(serial=st.integers(1, 2**32 - 1), bus=_bus, path=_path, iface=_name, member=_member,
       sig_args=_args)
def test_a_method_call_reads_back_in_jeepney(serial, bus, path, iface, member, sig_args) -> None:
    sig, args = sig_args
    data = W.method_call(serial, bus, path, iface, member, sig, args)
    msg = Message.from_buffer(data)
    fields = msg.header.fields
    assert msg.header.message_type == MessageType.method_call and msg.header.serial == serial
    assert (fields[HeaderFields.path], fields[HeaderFields.interface],
            fields[HeaderFields.member], fields[HeaderFields.destination]) == (
        path, iface, member, bus)
    assert fields.get(HeaderFields.signature, "") == sig
    assert tuple(msg.body) == tuple(args)
    assert W.split(bytearray(data)) == [data]


_bodies = st.one_of(
    st.tuples(_bus, _path).map(lambda v: ("(so)", (v,))),
    st.lists(_uint32, max_size=4).map(lambda v: ("au", (v,))),
    _text.map(lambda v: ("v", (("s", v),))),
    st.floats(allow_nan=False).map(lambda v: ("v", (("d", v),))),
    st.dictionaries(_text, _text, max_size=8).map(lambda v: ("a{ss}", (v,))),
    st.tuples(_int32, _int32, _int32, _int32).map(lambda v: ("(iiii)", (v,))),
    _text.map(lambda v: ("s", (v,))),
    st.lists(st.tuples(st.integers(-(2**63), 2**63 - 1), _text), max_size=3).map(
        lambda v: ("a(xs)", (v,))),
    st.tuples(st.integers(0, 255), st.lists(st.integers(0, 255), max_size=5)).map(
        lambda v: ("yay", v)),
)


def _reply(sig: str, body: tuple, serial: int, big: bool, error: str | None = None) -> bytes:
    fields = {HeaderFields.reply_serial: serial, HeaderFields.signature: sig}
    kind = MessageType.method_return
    if error is not None:
        fields[HeaderFields.error_name] = error
        kind = MessageType.error
    header = Header(Endianness.big if big else Endianness.little, kind, 0, 1, 0, 7, fields)
    return Message(header, body).serialise()


@settings(max_examples=200, deadline=None)
@given(sig_body=_bodies, serial=_uint32, big=st.booleans(), cut=st.integers(0, 200))
def test_replies_written_by_jeepney_decode_the_same(sig_body, serial, big, cut) -> None:
    sig, body = sig_body
    data = _reply(sig, body, serial, big)
    # two messages arriving cut anywhere: whole ones come out, the rest waits
    stream = data + data
    buf = bytearray(stream[: min(cut, len(stream))])
    got = W.split(buf)
    buf += stream[min(cut, len(stream)):]
    got += W.split(buf)
    assert got == [data, data] and not buf
    kind, reply_to, error, decoded = W.decode(data)
    assert (kind, reply_to, error) == (W.METHOD_RETURN, serial, None)
    assert decoded == Message.from_buffer(data).body


def test_an_error_reply_names_its_error() -> None:
    data = _reply("s", ("no such object",), 41, False, error="org.a11y.atspi.Error.Failed")
    assert W.decode(data) == (W.ERROR, 41, "org.a11y.atspi.Error.Failed", ("no such object",))


def test_bytes_that_are_not_a_message_are_refused() -> None:
    with pytest.raises(W.WireError, match="not a D-Bus message"):
        W.split(bytearray(b"GET / HTTP/1.1\r\n\r\n"))
    with pytest.raises(W.WireError, match="arguments"):
        W.method_call(1, ":1.1", "/", "a.b", "M", "ii", (1,))
    with pytest.raises(W.WireError, match="cannot encode"):
        W.method_call(1, ":1.1", "/", "a.b", "M", "a", ([1],))
