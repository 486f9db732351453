#!/usr/bin/env python3
"""Reads TensorBoard event files with nothing but the Python standard library.

Written from the TFRecord framing and the protocol buffer wire format, independently of the
C++ writer, so that tests can check what it wrote:

    python3 read_tfevents.py LOGDIR_OR_FILE [...]

prints JSON: {"files": [{"name", "file_version", "records"}],
              "scalars": [{"tag", "step", "value", "wall_time"}]}
Scalars come in file-name order, then record order. Non-finite values print as the strings
"NaN", "Infinity" and "-Infinity" (as protobuf's JSON mapping does), so the output is strict JSON.
A checksum mismatch, a truncated record or malformed protobuf is an error (exit status 1).
"""

import json
import math
import os
import struct
import sys


def _crc32c_table():
    table = []
    for i in range(256):
        c = i
        for _ in range(8):
            c = (c >> 1) ^ 0x82F63B78 if c & 1 else c >> 1
        table.append(c)
    return table


_TABLE = _crc32c_table()


def crc32c(data):
    """CRC32C (Castagnoli), reflected, initial and final XOR 0xFFFFFFFF."""
    c = 0xFFFFFFFF
    for b in data:
        c = _TABLE[(c ^ b) & 0xFF] ^ (c >> 8)
    return c ^ 0xFFFFFFFF


def masked_crc32c(data):
    c = crc32c(data)
    return ((((c >> 15) | (c << 17)) & 0xFFFFFFFF) + 0xA282EAD8) & 0xFFFFFFFF


class FormatError(Exception):
    pass


def read_records(path):
    """Yields the payload of each TFRecord in the file, checking both checksums."""
    with open(path, "rb") as f:
        blob = f.read()
    pos, index = 0, 0
    while pos < len(blob):
        if len(blob) - pos < 12:
            raise FormatError("%s: record %d: truncated header" % (path, index))
        header = blob[pos:pos + 8]
        (length,) = struct.unpack("<Q", header)
        (length_crc,) = struct.unpack("<I", blob[pos + 8:pos + 12])
        if length_crc != masked_crc32c(header):
            raise FormatError("%s: record %d: length checksum mismatch" % (path, index))
        start = pos + 12
        if len(blob) - start < length + 4:
            raise FormatError("%s: record %d: truncated data" % (path, index))
        data = blob[start:start + length]
        (data_crc,) = struct.unpack("<I", blob[start + length:start + length + 4])
        if data_crc != masked_crc32c(data):
            raise FormatError("%s: record %d: data checksum mismatch" % (path, index))
        yield data
        pos = start + length + 4
        index += 1


def _varint(buf, pos):
    result, shift = 0, 0
    while True:
        if pos >= len(buf):
            raise FormatError("truncated varint")
        b = buf[pos]
        pos += 1
        result |= (b & 0x7F) << shift
        if not b & 0x80:
            return result, pos
        shift += 7
        if shift >= 70:
            raise FormatError("varint longer than 10 bytes")


def parse_fields(buf):
    """Decodes one protobuf message into [(field number, wire type, raw value)]: an int for
    varints, bytes for fixed64/fixed32/length-delimited."""
    fields, pos = [], 0
    while pos < len(buf):
        key, pos = _varint(buf, pos)
        number, wire = key >> 3, key & 7
        if wire == 0:
            value, pos = _varint(buf, pos)
        elif wire == 1:
            value, pos = buf[pos:pos + 8], pos + 8
        elif wire == 2:
            length, pos = _varint(buf, pos)
            value, pos = buf[pos:pos + length], pos + length
        elif wire == 5:
            value, pos = buf[pos:pos + 4], pos + 4
        else:
            raise FormatError("unsupported wire type %d (field %d)" % (wire, number))
        if pos > len(buf):
            raise FormatError("field %d runs past the end of its message" % number)
        fields.append((number, wire, value))
    return fields


def _int64(u):
    return u - (1 << 64) if u >= (1 << 63) else u


def decode_event(data):
    """tensorflow.Event: wall_time = 1 (double), step = 2 (int64), file_version = 3 (string),
    summary = 5 (Summary {repeated Value value = 1}, Value {tag = 1, simple_value = 2 (float)})."""
    event = {"wall_time": 0.0, "step": 0, "file_version": None, "values": []}
    for number, wire, value in parse_fields(data):
        if number == 1 and wire == 1:
            event["wall_time"] = struct.unpack("<d", value)[0]
        elif number == 2 and wire == 0:
            event["step"] = _int64(value)
        elif number == 3 and wire == 2:
            event["file_version"] = value.decode("utf-8")
        elif number == 5 and wire == 2:
            for vnum, vwire, vvalue in parse_fields(value):
                if vnum != 1 or vwire != 2:
                    continue
                tag, simple = None, None
                for fnum, fwire, fvalue in parse_fields(vvalue):
                    if fnum == 1 and fwire == 2:
                        tag = fvalue.decode("utf-8")
                    elif fnum == 2 and fwire == 5:
                        simple = struct.unpack("<f", fvalue)[0]
                if simple is not None:
                    event["values"].append((tag, simple))
    return event


def _json_float(v):
    if math.isnan(v):
        return "NaN"
    if math.isinf(v):
        return "Infinity" if v > 0 else "-Infinity"
    return v


def event_files(target):
    if os.path.isdir(target):
        names = sorted(n for n in os.listdir(target) if "tfevents" in n)
        return [os.path.join(target, n) for n in names]
    return [target]


def read(targets):
    out = {"files": [], "scalars": []}
    for target in targets:
        for path in event_files(target):
            info = {"name": os.path.basename(path), "file_version": None, "records": 0}
            for i, data in enumerate(read_records(path)):
                event = decode_event(data)
                info["records"] += 1
                if i == 0:
                    info["file_version"] = event["file_version"]
                for tag, value in event["values"]:
                    out["scalars"].append({"tag": tag, "step": event["step"], "value": _json_float(value),
                                           "wall_time": event["wall_time"]})
            out["files"].append(info)
    return out


def main(argv):
    if len(argv) < 2 or argv[1] in ("-h", "--help"):
        sys.stderr.write(__doc__)
        return 2
    try:
        result = read(argv[1:])
    except (FormatError, OSError, UnicodeDecodeError) as e:
        sys.stderr.write("read_tfevents: %s\n" % e)
        return 1
    try:
        sys.stdout.write(json.dumps(result, indent=1) + "\n")
        sys.stdout.flush()
    except BrokenPipeError:  # piped into head and the like
        sys.stderr.close()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
