/* datum.h — Caffe's Datum and BlobProto messages, encoded and decoded by hand
 * (protobuf wire format, proto2) so that deepdesk needs no protobuf library.
 *
 *   Datum:     1 channels, 2 height, 3 width (int32), 4 data (bytes), 5 label (int32),
 *              6 float_data (repeated float), 7 encoded (bool)
 *   BlobProto: 1 num, 2 channels, 3 height, 4 width (int32, legacy shape),
 *              5 data (packed float), 6 diff (packed float), 7 shape (BlobShape:
 *              1 dim, packed int64), 8 double_data, 9 double_diff (packed double)
 * Unknown fields are skipped as protobuf requires; malformed input (bad varint,
 * length past the end, wrong wire type for a known field) is refused with a
 * message, never read past its end.  Also refused: negative sizes, int32 fields
 * whose value does not fit an int32, proto1 groups (wire types 3/4), and a
 * BlobProto whose value count disagrees with its shape.  Repeated floats, doubles
 * and dims are accepted packed or unpacked (proto2 writers emit either). */
#ifndef DD_DATUM_H
#define DD_DATUM_H

#include <stddef.h>
#include <stdint.h>

#include "../common/err.h"

struct datum {
	int channels, height, width, label;
	int encoded;             /* data is a whole PNG/JPEG file */
	const uint8_t *data;     /* decode: borrowed from the input buffer */
	size_t data_len;
	float *float_data;       /* decode: owned when n_float > 0, freed by datum_free */
	size_t n_float;
};

/* Encode d into a malloc'ed buffer; caller frees *out with free(). Fields are
 * written in field-number order, as protobuf's own serializers do, so a Datum
 * set up as DIGITS sets one encodes to the very bytes Python's
 * SerializeToString() gives (tests/interop checks it): channels, height, width and label
 * always; data when d->data is non-NULL (even if empty); float_data unpacked (it
 * is not [packed=true] in caffe.proto); `encoded` only when true (as Caffe does). */
int datum_encode(const struct datum *d, uint8_t **out, size_t *len, struct dd_err *err);
/* Decode buf; d->data points into buf (valid while buf is). Undo with datum_free.
 * On failure *d is zeroed and owns nothing (datum_free on it is harmless). */
int datum_decode(const uint8_t *buf, size_t len, struct datum *d, struct dd_err *err);
void datum_free(struct datum *d);

struct blob {
	int num, channels, height, width; /* from the legacy fields, or from shape */
	float *data;                      /* num*channels*height*width floats, owned */
	size_t count;
};

/* Encode a mean blob as DIGITS does: legacy num/channels/height/width and packed
 * data (omitted when count is 0).  count must equal num*channels*height*width.
 * Caller frees *out with free(). */
int blob_encode(const struct blob *b, uint8_t **out, size_t *len, struct dd_err *err);
/* Decode a BlobProto (legacy fields or shape; float or double data).  As Caffe's
 * Blob::FromProto: `shape` wins over the legacy fields and is right-aligned into
 * num/channels/height/width (missing leading axes are 1; more than 4 axes are
 * refused); double_data wins over data and is narrowed to float; diff fields are
 * checked and dropped.  b->data is owned (NULL when count is 0); undo with
 * blob_free.  On failure *b is zeroed and owns nothing. */
int blob_decode(const uint8_t *buf, size_t len, struct blob *b, struct dd_err *err);
void blob_free(struct blob *b);

#endif
