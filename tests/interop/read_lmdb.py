#!/usr/bin/python3
"""read_lmdb.py DIR [MEAN.binaryproto] — read an LMDB of Caffe Datums with py-lmdb
and google.protobuf (not with deepdesk's code) and print one JSON object:

  count, keys_sorted (every key, in key order), labels, shapes ([c, h, w] each),
  encoded (booleans), n_float (float_data lengths), data_sha256 (SHA-256 of every
  record's data bytes concatenated in key order), reserialized_identical (whether
  protobuf's own SerializeToString of each parsed Datum gives back the stored
  bytes), key_label_agrees (whether each key's "_<label>" suffix equals the Datum's
  label), and with MEAN: mean {num, channels, height, width, has_shape, count,
  sha256 of the float32 values little-endian, first (first 4 values),
  reserialized_identical}.

Exit status 2 with a message on stderr when a record does not parse."""
import hashlib
import json
import os
import struct
import sys

import lmdb

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from caffe_pb2_min import BlobProto, Datum  # noqa: E402


def read_db(path):
    env = lmdb.open(path, readonly=True, lock=True, max_dbs=0, subdir=True)
    keys, labels, shapes, encoded, n_float = [], [], [], [], []
    sha = hashlib.sha256()
    identical = True
    key_label_agrees = True
    with env.begin(buffers=False) as txn:
        for key, value in txn.cursor():
            d = Datum()
            try:
                d.ParseFromString(value)
            except Exception as e:  # DecodeError and friends
                sys.stderr.write("%s: key %r is not a Datum: %s\n" % (path, key, e))
                sys.exit(2)
            k = key.decode("ascii", "replace")
            keys.append(k)
            labels.append(d.label)
            shapes.append([d.channels, d.height, d.width])
            encoded.append(bool(d.encoded))
            n_float.append(len(d.float_data))
            sha.update(d.data)
            if d.SerializeToString() != value:
                identical = False
            suffix = k.split("_", 1)[1] if "_" in k else ""
            if not suffix.isdigit() or int(suffix) != d.label:
                key_label_agrees = False
    env.close()
    return {
        "count": len(keys),
        "keys_sorted": keys,
        "labels": labels,
        "shapes": shapes,
        "encoded": encoded,
        "n_float": n_float,
        "data_sha256": sha.hexdigest(),
        "reserialized_identical": identical,
        "key_label_agrees": key_label_agrees,
    }


def read_mean(path):
    with open(path, "rb") as f:
        raw = f.read()
    b = BlobProto()
    b.ParseFromString(raw)
    values = list(b.double_data) if len(b.double_data) else list(b.data)
    packed = struct.pack("<%df" % len(values), *values)
    return {
        "num": b.num,
        "channels": b.channels,
        "height": b.height,
        "width": b.width,
        "has_shape": b.HasField("shape"),
        "count": len(values),
        "sha256": hashlib.sha256(packed).hexdigest(),
        "first": values[:4],
        "reserialized_identical": b.SerializeToString() == raw,
    }


def main():
    if len(sys.argv) not in (2, 3):
        sys.stderr.write("usage: read_lmdb.py DIR [MEAN.binaryproto]\n")
        return 1
    out = read_db(sys.argv[1])
    if len(sys.argv) == 3:
        out["mean"] = read_mean(sys.argv[2])
    json.dump(out, sys.stdout)
    sys.stdout.write("\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
