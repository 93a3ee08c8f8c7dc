"""A minimal TensorBoard event-file writer (scalars only) that needs neither TensorFlow nor tensorboard.

The manager must stay light: tensorboard's own writer imports TensorFlow on first use, which stalls
the manager for seconds on a busy machine. Format: TFRecord framing of `Event` protos.
"""

from __future__ import annotations

import os
import socket
import struct
import time


def _crc32c_table() -> list[int]:
    table = []
    for i in range(256):
        crc = i
        for _ in range(8):
            crc = (crc >> 1) ^ 0x82F63B78 if crc & 1 else crc >> 1
        table.append(crc)
    return table


_TABLE = _crc32c_table()


def crc32c(data: bytes) -> int:
    crc = 0xFFFFFFFF
    for byte in data:
        crc = _TABLE[(crc ^ byte) & 0xFF] ^ (crc >> 8)
    return crc ^ 0xFFFFFFFF


def _masked(data: bytes) -> int:
    crc = crc32c(data)
    return (((crc >> 15) | (crc << 17)) + 0xA282EAD8) & 0xFFFFFFFF


def _varint(value: int) -> bytes:
    out = bytearray()
    value &= (1 << 64) - 1
    while True:
        byte = value & 0x7F
        value >>= 7
        if value:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def _field_bytes(number: int, payload: bytes) -> bytes:
    return _varint((number << 3) | 2) + _varint(len(payload)) + payload


def encode_event(wall_time: float, step: int = 0, *, file_version: str | None = None,
                 scalar: tuple[str, float] | None = None) -> bytes:
    """An `Event` proto: wall_time=1 (double), step=2 (int64), file_version=3, summary=5."""
    out = b"\x09" + struct.pack("<d", wall_time) + b"\x10" + _varint(step)
    if file_version is not None:
        out += _field_bytes(3, file_version.encode())
    if scalar is not None:
        tag, value = scalar
        summary_value = _field_bytes(1, tag.encode()) + b"\x15" + struct.pack("<f", value)
        out += _field_bytes(5, _field_bytes(1, summary_value))
    return out


def frame(record: bytes) -> bytes:
    """TFRecord framing: length, masked CRC of the length, data, masked CRC of the data."""
    length = struct.pack("<Q", len(record))
    return length + struct.pack("<I", _masked(length)) + record + struct.pack("<I", _masked(record))


class ScalarWriter:
    """Appends scalar summaries to one events file under `log_dir`."""

    def __init__(self, log_dir: str):
        os.makedirs(log_dir, exist_ok=True)
        name = f"events.out.tfevents.{int(time.time())}.{socket.gethostname()}.{os.getpid()}"
        self.path = os.path.join(log_dir, name)
        self._fh = open(self.path, "ab")
        self._fh.write(frame(encode_event(time.time(), file_version="brain.Event:2")))

    def scalar(self, tag: str, value: float, step: int, wall_time: float | None = None) -> None:
        self._fh.write(frame(encode_event(wall_time or time.time(), step, scalar=(tag, float(value)))))

    def flush(self) -> None:
        self._fh.flush()

    def close(self) -> None:
        self._fh.close()
