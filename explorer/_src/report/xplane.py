"""An XSpace, the profile format XProf and TensorBoard's profile plugin read, as protobuf bytes.

An XSpace holds planes (a device, the host, a metadata store); a plane holds lines (timelines)
of events, and the event and stat metadata its events refer to by id; an event has an offset
and a duration in picoseconds and stats (named values). The field numbers are those of
tsl/profiler/protobuf/xplane.proto (proto3):

    XSpace:         planes 1, hostnames 4
    XPlane:         id 1, name 2, lines 3, event_metadata 4 (map<int64, XEventMetadata>),
                    stat_metadata 5 (map<int64, XStatMetadata>)
    XLine:          id 1, name 2, timestamp_ns 3, events 4, duration_ps 9, display_id 10,
                    display_name 11
    XEvent:         metadata_id 1, offset_ps 2, duration_ps 3, stats 4
    XStat:          metadata_id 1, double_value 2, int64_value 4, str_value 5, bytes_value 6
    XEventMetadata: id 1, name 2, stats 5
    XStatMetadata:  id 1, name 2

It is written here with protobuf's wire format by hand (varints and length-delimited fields; a
map entry is a message of key 1 and value 2), so that writing one needs no protobuf package.
Fields at their default (0, "") are left out, as proto3 writes them.
"""

from __future__ import annotations

import struct
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

_VARINT, _FIXED64, _LENGTH = 0, 1, 2

StatValue = str | bytes | int | float


def _varint(n: int) -> bytes:
    if n < 0:
        n += 1 << 64             # int64 as protobuf writes a negative one: ten bytes
    out = bytearray()
    while True:
        low, n = n & 0x7F, n >> 7
        if n:
            out.append(low | 0x80)
        else:
            out.append(low)
            return bytes(out)


def _key(number: int, wire: int) -> bytes:
    return _varint(number << 3 | wire)


def _int(number: int, value: int) -> bytes:
    return _key(number, _VARINT) + _varint(value) if value else b""


def _bytes(number: int, value: bytes | str) -> bytes:
    data = value.encode() if isinstance(value, str) else value
    return _key(number, _LENGTH) + _varint(len(data)) + data if data else b""


def _message(number: int, body: bytes) -> bytes:
    """An embedded message, written even when empty (it is there)."""
    return _key(number, _LENGTH) + _varint(len(body)) + body


@dataclass(frozen=True)
class Event:
    """One event of a line: its name, when it starts and how long it lasts, and its stats."""

    name: str
    offset_ps: int
    duration_ps: int
    stats: Mapping[str, StatValue] = field(default_factory=dict)


@dataclass(frozen=True)
class Line:
    """One timeline of a plane, drawn as one row."""

    id: int
    name: str
    events: Sequence[Event] = ()


@dataclass(frozen=True)
class Plane:
    """One plane: its lines of events, and per-name stats attached to its event metadata
    (how the profiler stores a compiled module in the metadata plane)."""

    id: int
    name: str
    lines: Sequence[Line] = ()
    metadata_stats: Mapping[str, Mapping[str, StatValue]] = field(default_factory=dict)


class _Names:
    """Ids for a plane's event and stat names, numbered from 1 in order of first use."""

    def __init__(self) -> None:
        self.ids: dict[str, int] = {}

    def __call__(self, name: str) -> int:
        return self.ids.setdefault(name, len(self.ids) + 1)


def _stat(stat_id: int, value: StatValue) -> bytes:
    if isinstance(value, bool | int):
        body = _key(4, _VARINT) + _varint(int(value))           # int64_value, even 0
    elif isinstance(value, float):
        body = _key(2, _FIXED64) + struct.pack("<d", value)     # double_value
    elif isinstance(value, bytes):
        body = _key(6, _LENGTH) + _varint(len(value)) + value   # bytes_value
    else:
        text = str(value).encode()
        body = _key(5, _LENGTH) + _varint(len(text)) + text     # str_value
    return _int(1, stat_id) + body


def _plane(plane: Plane) -> bytes:
    events, stats = _Names(), _Names()
    for name in plane.metadata_stats:
        events(name)
    lines = b""
    for line in plane.lines:
        body = b"".join(
            _message(4, _int(1, events(e.name)) + _key(2, _VARINT) + _varint(e.offset_ps)
                     + _int(3, e.duration_ps)
                     + b"".join(_message(4, _stat(stats(k), v)) for k, v in e.stats.items()))
            for e in line.events)
        lines += _message(3, _int(1, line.id) + _bytes(2, line.name) + body
                          + _int(10, line.id) + _bytes(11, line.name))
    out = _int(1, plane.id) + _bytes(2, plane.name) + lines
    for name, event_id in events.ids.items():
        attached = b"".join(_message(5, _stat(stats(k), v))
                            for k, v in plane.metadata_stats.get(name, {}).items())
        metadata = _int(1, event_id) + _bytes(2, name) + attached
        out += _message(4, _int(1, event_id) + _message(2, metadata))
    for name, stat_id in stats.ids.items():
        out += _message(5, _int(1, stat_id) + _message(2, _int(1, stat_id) + _bytes(2, name)))
    return out


def xspace(planes: Sequence[Plane], hostnames: Sequence[str] = ()) -> bytes:
    """The serialized XSpace of `planes`, generated on `hostnames`."""
    return (b"".join(_message(1, _plane(p)) for p in planes)
            + b"".join(_bytes(4, h) for h in hostnames))
