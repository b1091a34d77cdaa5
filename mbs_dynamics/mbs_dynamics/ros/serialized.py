"""Messages published as their serialized bytes: a message of fixed layout
serialized once, then for each publication its stamp and float64 fields
written into those bytes in place (numpy views), and the bytes published.

rclpy converts a message object to C at every publish(), field by field and
each string on its own: a TALOS JointState (32 names) took 19 us to publish,
its bytes 3 us; the four outputs of the inverse dynamics node 58 us against
16. publish() takes serialized bytes as they are (rclpy's Publisher.publish).

The fields are found by their values, not by the middleware's encoding: each
is set to numbers nothing else in the message holds, the message serialized
(rclpy.serialization, the middleware's own serializer) and their bytes
looked for once; only fields of fixed size can be written so (float64
arrays of a fixed length, Points and Vector3s, the stamp).
"""
from __future__ import annotations

import math
from array import array
from collections.abc import Sequence

import numpy as np
from rclpy.serialization import deserialize_message, serialize_message

# Values the fields are found by: the k-th float64 of all is (k + 1) * pi * 1e-200
# (no count, length or ordinary value has its bytes), the stamp these two.
MARKER_SCALE = math.pi * 1e-200
MARKER_SECONDS = 1_588_000_123
MARKER_NANOSECONDS = 987_654_321
VECTOR_PARTS = ("x", "y", "z", "w")  # of a Point, Vector3 or Quaternion


class SerializedMessage:
    """The serialized bytes of `message` with its header stamp and the float64
    `fields` writable: `values[field]` (float64 array views into the bytes,
    one per field path such as "effort" or "wrench.force"), set_stamp(), and
    data(), the bytes to publish. Everything else (names, frame_id, sizes)
    is as in `message` when it was made."""

    def __init__(self, message, fields: Sequence[str], stamp: str | Sequence[str] | None = "header.stamp",
                 like: bytes | None = None):
        """fields: attribute paths of float64 arrays (their length as in
        `message`) or of Points, Vector3s and Quaternions, a number indexing
        a sequence ("wrenches.0.wrench.force"); stamp: the path of the
        builtin_interfaces/Time, or of each of several that set_stamp sets
        alike (None: none); like: bytes received of a message of this layout,
        made the message's bytes (the middleware's serialization may end in
        other padding than rclpy.serialization's), else its values are zero.
        ValueError when a field cannot be found in the bytes (a field of
        variable size) or lies beyond `like`."""
        count = 0
        markers = {}
        for field in fields:
            target = _attribute(message, field)
            if isinstance(target, (array, list, np.ndarray)):
                size = len(target)
                _set_attribute(message, field, array("d", [(count + k + 1) * MARKER_SCALE for k in range(size)]))
            else:  # a Point, a Vector3 or a Quaternion
                parts = VECTOR_PARTS[:4 if hasattr(target, "w") else 3]
                size = len(parts)
                for k, part in enumerate(parts):
                    setattr(target, part, (count + k + 1) * MARKER_SCALE)
            markers[field] = np.array([(count + k + 1) * MARKER_SCALE for k in range(size)])
            count += size
        stamps = [] if stamp is None else [stamp] if isinstance(stamp, str) else list(stamp)
        for k, path in enumerate(stamps):
            time = _attribute(message, path)
            time.sec, time.nanosec = MARKER_SECONDS + k, MARKER_NANOSECONDS
        serialized = bytearray(serialize_message(message))
        # (offset, bytes) of each field (None: empty), of each stamp
        places = {field: (_offset(serialized, marker.tobytes(), field), marker.nbytes) if marker.size else None
                  for field, marker in markers.items()}
        stamp_offsets = [_offset(serialized, np.array([MARKER_SECONDS + k], dtype=np.int32).tobytes()
                                 + np.array([MARKER_NANOSECONDS], dtype=np.uint32).tobytes(), path)
                         for k, path in enumerate(stamps)]
        taken = sorted([place for place in places.values() if place] + [(offset, 8) for offset in stamp_offsets])
        if like is not None:
            if taken and taken[-1][0] + taken[-1][1] > len(like):
                raise ValueError("the bytes are shorter than the message's fields")
            serialized = bytearray(like)
        self._buffer = serialized
        self.values: dict[str, np.ndarray] = {
            field: np.frombuffer(serialized, dtype=np.float64, count=place[1] // 8, offset=place[0]) if place
            else np.zeros(0) for field, place in places.items()}
        self._stamps = [(np.frombuffer(serialized, dtype=np.int32, count=1, offset=offset),
                         np.frombuffer(serialized, dtype=np.uint32, count=1, offset=offset + 4))
                        for offset in stamp_offsets]  # (seconds, nanoseconds) views of each stamp
        if like is None:
            for values in [*self.values.values(), *(part for pair in self._stamps for part in pair)]:
                values[:] = 0
        # the bytes outside the fields and the stamps: (start, end, bytes) of each stretch
        self._fixed, start = [], 0
        for offset, size in taken + [(len(serialized), 0)]:
            if offset > start:
                self._fixed.append((start, offset, bytes(serialized[start:offset])))
            start = max(start, offset + size)

    def set_stamp(self, stamp) -> None:
        """The stamp (each of them), from a builtin_interfaces/Time."""
        for seconds, nanoseconds in self._stamps:
            seconds[0], nanoseconds[0] = stamp.sec, stamp.nanosec

    def data(self) -> bytes:
        """The message's bytes as they are now, for publish()."""
        return bytes(self._buffer)

    def take(self, data: bytes) -> bool:
        """Whether `data` (a message's serialized bytes) equals this message's
        bytes outside its fields and stamps (the same names, frame_ids and
        sizes: a stream's next message); if so, data become this message's
        bytes (`values` and stamp() then data's)."""
        if len(data) != len(self._buffer) or any(data[start:end] != fixed for start, end, fixed in self._fixed):
            return False
        self._buffer[:] = data
        return True

    def stamp(self) -> tuple[int, int]:
        """(sec, nanosec) of the (first) stamp."""
        seconds, nanoseconds = self._stamps[0]
        return int(seconds[0]), int(nanoseconds[0])


class SerializedStream:
    """The messages of a subscription that takes them serialized (raw=True),
    as message objects: rclpy's conversion of each to Python took 33-40 us
    for a 12-joint JointState, 105-135 us for an Odometry (this, 2-4 and 5 us
    when the layout repeats). A message whose bytes
    equal the last one's outside the float64 `fields` and the stamp (a
    stream's next message) updates the last message object: those fields
    read from its bytes (SerializedMessage.take) into its own arrays, in
    place (a float64[]'s array('d') stays the same object: a new one for
    each field and message took 5-9 us of a JointState's); any other is
    deserialized (rclpy.serialization) and becomes the one the next are
    compared with. message() returns the same object each time: a callback
    uses it before the next."""

    def __init__(self, kind, fields: Sequence[str], stamp: str = "header.stamp"):
        """kind: the message type; fields and stamp as SerializedMessage's."""
        self.kind, self.fields, self.stamp = kind, list(fields), stamp
        self._layout: SerializedMessage | None = None
        self._message = None
        # of the layout: (its values, where they go in the message), of each field; the message's stamp
        self._copies: list[tuple[np.ndarray, object]] = []
        self._time = None

    def message(self, data: bytes):
        """The message of the bytes `data`."""
        layout = self._layout
        if layout is None or not layout.take(data):
            message = self._message = deserialize_message(data, self.kind)
            try:
                layout = self._layout = SerializedMessage(deserialize_message(data, self.kind), self.fields,
                                                          self.stamp, like=data)
            except ValueError:  # a field of another length than 3 or 4 (a Point's) found nowhere: no layout
                self._layout = None
                return message
            # a float64 array's values are copied into it in place (a numpy view of its memory): no new object
            self._copies = [(values, target if isinstance(target, np.ndarray)
                             else np.frombuffer(target, dtype=np.float64) if isinstance(target, array) else target)
                            for values, target in ((values, _attribute(message, field))
                                                   for field, values in layout.values.items()) if values.size]
            self._time = _attribute(message, self.stamp)
            return message
        for values, target in self._copies:
            if isinstance(target, np.ndarray):
                target[:] = values
            else:  # a Point, a Vector3 or a Quaternion
                for part, value in zip(VECTOR_PARTS, values.tolist()):
                    setattr(target, part, value)
        self._time.sec, self._time.nanosec = layout.stamp()
        return self._message


def _attribute(message, path: str):
    for name in path.split("."):
        message = message[int(name)] if name.isdigit() else getattr(message, name)
    return message


def _set_attribute(message, path: str, value) -> None:
    *parents, name = path.split(".")
    parent = _attribute(message, ".".join(parents)) if parents else message
    if name.isdigit():
        parent[int(name)] = value
    else:
        setattr(parent, name, value)


def _offset(buffer: bytearray, marker: bytes, field: str) -> int:
    offset = buffer.find(marker)
    if offset < 0 or buffer.find(marker, offset + 1) >= 0:
        raise ValueError(f"field {field} is not at one fixed place in the serialized message")
    return offset
