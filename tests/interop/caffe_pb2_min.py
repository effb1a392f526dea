"""caffe_pb2_min.py — Caffe's Datum, BlobShape and BlobProto as protobuf classes.

Caffe's generated caffe_pb2 is not installed here, so the three messages deepdesk
reads and writes are declared field by field from caffe.proto (proto2) in a
FileDescriptorProto built in code, and turned into classes by google.protobuf.
This is an independent decoder and encoder to check deepdesk's hand-written
wire-format code against (tests/unit/test_interop.c runs the scripts beside it).

    message Datum {
      optional int32 channels = 1; optional int32 height = 2; optional int32 width = 3;
      optional bytes data = 4; optional int32 label = 5;
      repeated float float_data = 6; optional bool encoded = 7 [default = false]; }
    message BlobShape { repeated int64 dim = 1 [packed = true]; }
    message BlobProto {
      optional BlobShape shape = 7;
      repeated float data = 5 [packed = true]; repeated float diff = 6 [packed = true];
      repeated double double_data = 8 [packed = true]; repeated double double_diff = 9 [packed = true];
      optional int32 num = 1 [default = 0]; optional int32 channels = 2 [default = 0];
      optional int32 height = 3 [default = 0]; optional int32 width = 4 [default = 0]; }
"""
from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

_F = descriptor_pb2.FieldDescriptorProto


def _field(msg, name, number, ftype, label=_F.LABEL_OPTIONAL, packed=False, type_name=None):
    f = msg.field.add()
    f.name, f.number, f.type, f.label = name, number, ftype, label
    if packed:
        f.options.packed = True
    if type_name:
        f.type_name = type_name
    return f


def _build():
    fdp = descriptor_pb2.FileDescriptorProto()
    fdp.name = "deepdesk_caffe_min.proto"
    fdp.package = "caffe"
    fdp.syntax = "proto2"

    datum = fdp.message_type.add()
    datum.name = "Datum"
    _field(datum, "channels", 1, _F.TYPE_INT32)
    _field(datum, "height", 2, _F.TYPE_INT32)
    _field(datum, "width", 3, _F.TYPE_INT32)
    _field(datum, "data", 4, _F.TYPE_BYTES)
    _field(datum, "label", 5, _F.TYPE_INT32)
    _field(datum, "float_data", 6, _F.TYPE_FLOAT, _F.LABEL_REPEATED)  # not packed in caffe.proto
    _field(datum, "encoded", 7, _F.TYPE_BOOL).default_value = "false"

    shape = fdp.message_type.add()
    shape.name = "BlobShape"
    _field(shape, "dim", 1, _F.TYPE_INT64, _F.LABEL_REPEATED, packed=True)

    blob = fdp.message_type.add()
    blob.name = "BlobProto"
    _field(blob, "num", 1, _F.TYPE_INT32).default_value = "0"
    _field(blob, "channels", 2, _F.TYPE_INT32).default_value = "0"
    _field(blob, "height", 3, _F.TYPE_INT32).default_value = "0"
    _field(blob, "width", 4, _F.TYPE_INT32).default_value = "0"
    _field(blob, "data", 5, _F.TYPE_FLOAT, _F.LABEL_REPEATED, packed=True)
    _field(blob, "diff", 6, _F.TYPE_FLOAT, _F.LABEL_REPEATED, packed=True)
    _field(blob, "shape", 7, _F.TYPE_MESSAGE, type_name=".caffe.BlobShape")
    _field(blob, "double_data", 8, _F.TYPE_DOUBLE, _F.LABEL_REPEATED, packed=True)
    _field(blob, "double_diff", 9, _F.TYPE_DOUBLE, _F.LABEL_REPEATED, packed=True)

    pool = descriptor_pool.DescriptorPool()
    pool.Add(fdp)

    def cls(name):
        desc = pool.FindMessageTypeByName("caffe." + name)
        if hasattr(message_factory, "GetMessageClass"):  # protobuf >= 4.22
            return message_factory.GetMessageClass(desc)
        return message_factory.MessageFactory(pool).GetPrototype(desc)

    return cls("Datum"), cls("BlobShape"), cls("BlobProto")


Datum, BlobShape, BlobProto = _build()
