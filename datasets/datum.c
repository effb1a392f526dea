/* datum.c — Caffe's Datum and BlobProto in protobuf wire format, by hand.
 *
 * The wire format in brief: a message is a run of fields; each field is a varint
 * tag (field_number << 3 | wire_type) followed by a payload whose shape the wire
 * type gives: 0 varint, 1 eight bytes, 2 varint length then that many bytes, 5 four
 * bytes.  Wire types 3 and 4 are proto1 groups (refused: no Caffe message has one,
 * and skipping them needs a nesting stack an attacker can make deep); 6 and 7 do not
 * exist.  Fixed-width values and floats are little-endian.  A varint is at most 10
 * bytes, 7 bits each, low bits first.
 *
 * Decoding: struct pb is the buffer, its length and a position.  Every read checks
 * what is left before touching a byte, so no input makes the decoder read past the
 * end; every length is compared with what is left before it is used, so no input
 * makes it allocate more than a small multiple of its own size.  Repeated floats
 * and doubles may arrive packed (one length-delimited field) or unpacked (one field
 * per value), in any mix, as proto2 parsers must accept; they are gathered as raw
 * little-endian bytes and converted once at the end.
 *
 * Encoding computes the exact size first, then writes into one allocation. */
#include "datum.h"

#include <limits.h>
#include <stdlib.h>
#include <string.h>

enum { WT_VARINT = 0, WT_FIXED64 = 1, WT_LEN = 2, WT_SGROUP = 3, WT_EGROUP = 4, WT_FIXED32 = 5 };

/* Protobuf caps a message at 2 GiB; Caffe's readers use the same cap. */
#define PB_MAX_MESSAGE ((size_t)INT32_MAX)

/* --- decoding ----------------------------------------------------------------- */

struct pb {
	const uint8_t *buf;
	size_t len, pos;
	const char *what; /* "Datum", "BlobProto", "BlobProto shape": starts each message */
	struct dd_err *err;
};

static const char *wire_type_name(int wt)
{
	switch (wt) {
	case WT_VARINT: return "varint";
	case WT_FIXED64: return "64-bit";
	case WT_LEN: return "length-delimited";
	case WT_SGROUP: return "start-group";
	case WT_EGROUP: return "end-group";
	case WT_FIXED32: return "32-bit";
	default: return "invalid";
	}
}

static int pb_varint(struct pb *p, uint64_t *out)
{
	size_t start = p->pos;
	uint64_t v = 0;
	for (int i = 0; i < 10; i++) {
		if (p->pos >= p->len)
			return dd_err_set(p->err, DD_EINVAL,
					  "%s: varint at byte %zu runs past the end of the %zu-byte message",
					  p->what, start, p->len);
		uint8_t b = p->buf[p->pos++];
		/* the 10th byte carries bit 63 only; anything more would overflow 64 bits */
		if (i == 9 && b > 1)
			break;
		v |= (uint64_t)(b & 0x7f) << (7 * i);
		if (!(b & 0x80)) {
			*out = v;
			return DD_OK;
		}
	}
	return dd_err_set(p->err, DD_EINVAL, "%s: varint at byte %zu is longer than 10 bytes or overflows 64 bits", p->what,
			  start);
}

/* Read a tag; field numbers run 1 .. 2^29-1. */
static int pb_tag(struct pb *p, uint32_t *field, int *wt)
{
	size_t at = p->pos;
	uint64_t tag = 0;
	int rc = pb_varint(p, &tag);
	if (rc)
		return rc;
	if (tag > UINT32_MAX || (tag >> 3) == 0)
		return dd_err_set(p->err, DD_EINVAL, "%s: byte %zu: invalid field number %llu", p->what,
				  at, (unsigned long long)(tag >> 3));
	*field = (uint32_t)(tag >> 3);
	*wt = (int)(tag & 7);
	return DD_OK;
}

/* Claim n bytes at the position: *out points at them. */
static int pb_bytes(struct pb *p, size_t n, const uint8_t **out, uint32_t field)
{
	if (n > p->len - p->pos)
		return dd_err_set(p->err, DD_EINVAL,
				  "%s: field %u needs %zu bytes at byte %zu but the message ends at byte %zu",
				  p->what, field, n, p->pos, p->len);
	*out = p->buf + p->pos;
	p->pos += n;
	return DD_OK;
}

/* A length-delimited payload: its length varint, then the bytes. */
static int pb_len(struct pb *p, uint32_t field, const uint8_t **out, size_t *n)
{
	uint64_t v = 0;
	int rc = pb_varint(p, &v);
	if (rc)
		return rc;
	if (v > p->len - p->pos)
		return dd_err_set(p->err, DD_EINVAL,
				  "%s: field %u claims %llu bytes at byte %zu but only %zu remain", p->what,
				  field, (unsigned long long)v, p->pos, p->len - p->pos);
	*n = (size_t)v;
	return pb_bytes(p, *n, out, field);
}

/* Skip the payload of a field we do not know, as protobuf requires. */
static int pb_skip(struct pb *p, uint32_t field, int wt, size_t at)
{
	const uint8_t *ignored;
	size_t n = 0;
	uint64_t v = 0;
	switch (wt) {
	case WT_VARINT: return pb_varint(p, &v);
	case WT_FIXED64: return pb_bytes(p, 8, &ignored, field);
	case WT_LEN: return pb_len(p, field, &ignored, &n);
	case WT_FIXED32: return pb_bytes(p, 4, &ignored, field);
	case WT_SGROUP:
	case WT_EGROUP:
		return dd_err_set(p->err, DD_EINVAL,
				  "%s: byte %zu: field %u is a group (deprecated proto1 wire type %d), "
				  "which no Caffe message uses",
				  p->what, at, field, wt);
	default:
		return dd_err_set(p->err, DD_EINVAL, "%s: byte %zu: field %u has wire type %d, which does not exist",
				  p->what, at, field, wt);
	}
}

static int pb_wrong_type(struct pb *p, uint32_t field, const char *name, int wt, size_t at)
{
	return dd_err_set(p->err, DD_EINVAL, "%s: byte %zu: field %u (%s) has wire type %d (%s), which is not its type",
			  p->what, at, field, name, wt, wire_type_name(wt));
}

/* An int32 field.  Negative int32s travel as 10-byte sign-extended varints; a
 * value outside int32 is refused rather than silently truncated. */
static int pb_int32(struct pb *p, uint32_t field, const char *name, int wt, size_t at, int nonneg,
		    int *out)
{
	if (wt != WT_VARINT)
		return pb_wrong_type(p, field, name, wt, at);
	uint64_t v = 0;
	int rc = pb_varint(p, &v);
	if (rc)
		return rc;
	int64_t s = (int64_t)v;
	if (s < INT32_MIN || s > INT32_MAX)
		return dd_err_set(p->err, DD_EINVAL, "%s: byte %zu: field %u (%s) = %lld does not fit in an int32",
				  p->what, at, field, name, (long long)s);
	if (nonneg && s < 0)
		return dd_err_set(p->err, DD_EINVAL, "%s: byte %zu: field %u (%s) is negative (%lld)", p->what,
				  at, field, name, (long long)s);
	*out = (int)s;
	return DD_OK;
}

/* Growable raw bytes, for repeated fixed-width values gathered across fields. */
struct raw {
	uint8_t *p;
	size_t n, cap;
};

static int raw_append(struct raw *r, const uint8_t *src, size_t n, struct dd_err *err)
{
	if (n == 0)
		return DD_OK;
	if (n > r->cap - r->n) {
		size_t cap = r->cap ? r->cap : 64;
		while (cap - r->n < n)
			cap = cap > SIZE_MAX / 2 ? SIZE_MAX : cap * 2;
		uint8_t *q = realloc(r->p, cap);
		if (!q)
			return dd_err_set(err, DD_ENOMEM, "out of memory decoding %zu bytes of values", n);
		r->p = q;
		r->cap = cap;
	}
	memcpy(r->p + r->n, src, n);
	r->n += n;
	return DD_OK;
}

/* A repeated fixed-width field of elem (4 or 8) bytes, expected wire type fixed_wt,
 * packed or not. */
static int pb_repeated_fixed(struct pb *p, uint32_t field, const char *name, int wt, size_t at,
			     size_t elem, int fixed_wt, struct raw *into)
{
	const uint8_t *src = NULL;
	size_t n = 0;
	int rc;
	if (wt == fixed_wt) {
		if ((rc = pb_bytes(p, elem, &src, field)))
			return rc;
		return raw_append(into, src, elem, p->err);
	}
	if (wt != WT_LEN)
		return pb_wrong_type(p, field, name, wt, at);
	if ((rc = pb_len(p, field, &src, &n)))
		return rc;
	if (n % elem)
		return dd_err_set(p->err, DD_EINVAL,
				  "%s: byte %zu: packed field %u (%s) is %zu bytes, not a multiple of %zu",
				  p->what, at, field, name, n, elem);
	return raw_append(into, src, n, p->err);
}

static uint32_t le32(const uint8_t *b)
{
	return (uint32_t)b[0] | (uint32_t)b[1] << 8 | (uint32_t)b[2] << 16 | (uint32_t)b[3] << 24;
}

static uint64_t le64(const uint8_t *b)
{
	return (uint64_t)le32(b) | (uint64_t)le32(b + 4) << 32;
}

/* Turn r's little-endian floats (elem 4) or doubles (elem 8) into host floats, in
 * place: float i lands at bytes 4i, at or before where value i was read, so
 * nothing unread is overwritten.  Returns the float array (r->p) or NULL when
 * empty, in which case r->p is freed. */
static float *raw_to_floats(struct raw *r, size_t elem, size_t *count)
{
	size_t n = r->n / elem;
	*count = n;
	if (n == 0) {
		free(r->p);
		r->p = NULL;
		return NULL;
	}
	for (size_t i = 0; i < n; i++) {
		float f;
		if (elem == 4) {
			uint32_t u = le32(r->p + 4 * i);
			memcpy(&f, &u, 4);
		} else {
			uint64_t u = le64(r->p + 8 * i);
			double d;
			memcpy(&d, &u, 8);
			f = (float)d;
		}
		memcpy(r->p + 4 * i, &f, 4);
	}
	float *out = (float *)(void *)r->p;
	r->p = NULL;
	return out;
}

int datum_decode(const uint8_t *buf, size_t len, struct datum *d, struct dd_err *err)
{
	struct pb p = { buf, len, 0, "Datum", err };
	struct raw floats = { 0 };
	int rc = DD_OK;
	memset(d, 0, sizeof *d);
	if (!buf && len)
		return dd_err_set(err, DD_EINVAL, "Datum: no buffer");
	while (p.pos < p.len) {
		size_t at = p.pos;
		uint32_t field = 0;
		int wt = 0;
		const uint8_t *src = NULL;
		uint64_t v = 0;
		if ((rc = pb_tag(&p, &field, &wt)))
			goto fail;
		switch (field) {
		case 1: rc = pb_int32(&p, field, "channels", wt, at, 1, &d->channels); break;
		case 2: rc = pb_int32(&p, field, "height", wt, at, 1, &d->height); break;
		case 3: rc = pb_int32(&p, field, "width", wt, at, 1, &d->width); break;
		case 4:
			if (wt != WT_LEN) {
				rc = pb_wrong_type(&p, field, "data", wt, at);
				break;
			}
			/* a repeated occurrence replaces the earlier one, as for any singular field */
			if ((rc = pb_len(&p, field, &src, &d->data_len)) == DD_OK)
				d->data = src;
			break;
		case 5: rc = pb_int32(&p, field, "label", wt, at, 0, &d->label); break;
		case 6: rc = pb_repeated_fixed(&p, field, "float_data", wt, at, 4, WT_FIXED32, &floats); break;
		case 7:
			if (wt != WT_VARINT) {
				rc = pb_wrong_type(&p, field, "encoded", wt, at);
				break;
			}
			if ((rc = pb_varint(&p, &v)) == DD_OK)
				d->encoded = v != 0;
			break;
		default: rc = pb_skip(&p, field, wt, at); break;
		}
		if (rc)
			goto fail;
	}
	d->float_data = raw_to_floats(&floats, 4, &d->n_float);
	return DD_OK;
fail:
	free(floats.p);
	memset(d, 0, sizeof *d);
	return rc;
}

void datum_free(struct datum *d)
{
	if (!d)
		return;
	free(d->float_data);
	memset(d, 0, sizeof *d);
}

/* BlobShape { repeated int64 dim = 1 [packed = true]; }.  A shape field seen twice
 * merges (protobuf appends the repeated dims of a sub-message), so dims accumulate
 * across calls in dims[0..*n_dims).  More than 4 axes cannot be expressed as
 * num/channels/height/width and are refused at the fifth. */
static int shape_dim(struct pb *p, size_t at, int64_t dims[4], size_t *n_dims)
{
	uint64_t v = 0;
	int rc = pb_varint(p, &v);
	if (rc)
		return rc;
	if ((int64_t)v < 0)
		return dd_err_set(p->err, DD_EINVAL, "%s: byte %zu: dimension %lld is negative", p->what, at,
				  (long long)(int64_t)v);
	if (*n_dims == 4)
		return dd_err_set(p->err, DD_EINVAL, "%s: more than 4 axes; a mean blob has at most 4", p->what);
	dims[(*n_dims)++] = (int64_t)v;
	return DD_OK;
}

static int decode_shape(const uint8_t *buf, size_t len, int64_t dims[4], size_t *n_dims,
			struct dd_err *err)
{
	struct pb p = { buf, len, 0, "BlobProto shape", err };
	int rc;
	while (p.pos < p.len) {
		size_t at = p.pos;
		uint32_t field = 0;
		int wt = 0;
		if ((rc = pb_tag(&p, &field, &wt)))
			return rc;
		if (field != 1) {
			rc = pb_skip(&p, field, wt, at);
		} else if (wt == WT_VARINT) {
			rc = shape_dim(&p, at, dims, n_dims);
		} else if (wt == WT_LEN) {
			const uint8_t *src = NULL;
			size_t n = 0;
			if ((rc = pb_len(&p, field, &src, &n)))
				return rc;
			struct pb packed = { src, n, 0, "BlobProto shape dims", err };
			while (rc == DD_OK && packed.pos < packed.len)
				rc = shape_dim(&packed, packed.pos, dims, n_dims);
		} else {
			rc = pb_wrong_type(&p, field, "dim", wt, at);
		}
		if (rc)
			return rc;
	}
	return DD_OK;
}

int blob_decode(const uint8_t *buf, size_t len, struct blob *b, struct dd_err *err)
{
	struct pb p = { buf, len, 0, "BlobProto", err };
	struct raw fdata = { 0 }, ddata = { 0 }, ignored = { 0 };
	int64_t dims[4];
	size_t n_dims = 0;
	int has_shape = 0, legacy[4] = { 0, 0, 0, 0 };
	int rc = DD_OK;
	memset(b, 0, sizeof *b);
	if (!buf && len)
		return dd_err_set(err, DD_EINVAL, "BlobProto: no buffer");
	while (p.pos < p.len) {
		size_t at = p.pos;
		uint32_t field = 0;
		int wt = 0;
		const uint8_t *src = NULL;
		size_t n = 0;
		if ((rc = pb_tag(&p, &field, &wt)))
			goto fail;
		switch (field) {
		case 1: rc = pb_int32(&p, field, "num", wt, at, 1, &legacy[0]); break;
		case 2: rc = pb_int32(&p, field, "channels", wt, at, 1, &legacy[1]); break;
		case 3: rc = pb_int32(&p, field, "height", wt, at, 1, &legacy[2]); break;
		case 4: rc = pb_int32(&p, field, "width", wt, at, 1, &legacy[3]); break;
		case 5: rc = pb_repeated_fixed(&p, field, "data", wt, at, 4, WT_FIXED32, &fdata); break;
		case 6:
			/* diff is checked like data, then dropped: a mean file never needs it */
			rc = pb_repeated_fixed(&p, field, "diff", wt, at, 4, WT_FIXED32, &ignored);
			ignored.n = 0;
			break;
		case 7:
			if (wt != WT_LEN) {
				rc = pb_wrong_type(&p, field, "shape", wt, at);
				break;
			}
			if ((rc = pb_len(&p, field, &src, &n)) == DD_OK)
				rc = decode_shape(src, n, dims, &n_dims, err);
			has_shape = 1;
			break;
		case 8: rc = pb_repeated_fixed(&p, field, "double_data", wt, at, 8, WT_FIXED64, &ddata); break;
		case 9:
			rc = pb_repeated_fixed(&p, field, "double_diff", wt, at, 8, WT_FIXED64, &ignored);
			ignored.n = 0;
			break;
		default: rc = pb_skip(&p, field, wt, at); break;
		}
		if (rc)
			goto fail;
	}

	/* The shape, as Caffe's Blob::FromProto reads it: `shape` when present (right-
	 * aligned into num/channels/height/width, missing axes 1), else the legacy four
	 * fields (missing ones 0). */
	int64_t shape4[4];
	if (has_shape) {
		for (size_t i = 0; i < 4; i++)
			shape4[i] = i < 4 - n_dims ? 1 : dims[i - (4 - n_dims)];
	} else {
		for (size_t i = 0; i < 4; i++)
			shape4[i] = legacy[i];
	}
	/* The values: double_data wins when present, as in Caffe. */
	int use_double = ddata.n > 0;
	size_t have = use_double ? ddata.n / 8 : fdata.n / 4;
	uint64_t want = 1;
	int too_big = 0;
	for (size_t i = 0; i < 4; i++) {
		if (shape4[i] > INT_MAX)
			too_big = 1;
		else if (shape4[i] != 0 && want > UINT64_MAX / (uint64_t)shape4[i])
			too_big = 1;
		else
			want *= (uint64_t)shape4[i];
	}
	if (too_big || want != have) {
		rc = dd_err_set(err, DD_EINVAL,
				"BlobProto: shape %lldx%lldx%lldx%lld does not match its %zu %s values",
				(long long)shape4[0], (long long)shape4[1], (long long)shape4[2],
				(long long)shape4[3], have, use_double ? "double" : "float");
		goto fail;
	}
	b->num = (int)shape4[0];
	b->channels = (int)shape4[1];
	b->height = (int)shape4[2];
	b->width = (int)shape4[3];
	b->data = use_double ? raw_to_floats(&ddata, 8, &b->count) : raw_to_floats(&fdata, 4, &b->count);
	free(fdata.p);
	free(ddata.p);
	free(ignored.p);
	return DD_OK;
fail:
	free(fdata.p);
	free(ddata.p);
	free(ignored.p);
	memset(b, 0, sizeof *b);
	return rc;
}

void blob_free(struct blob *b)
{
	if (!b)
		return;
	free(b->data);
	memset(b, 0, sizeof *b);
}

/* --- encoding ----------------------------------------------------------------- */

static size_t varint_size(uint64_t v)
{
	size_t n = 1;
	while (v >= 0x80) {
		v >>= 7;
		n++;
	}
	return n;
}

static uint8_t *put_varint(uint8_t *o, uint64_t v)
{
	while (v >= 0x80) {
		*o++ = (uint8_t)(v | 0x80);
		v >>= 7;
	}
	*o++ = (uint8_t)v;
	return o;
}

static uint8_t *put_tag(uint8_t *o, uint32_t field, int wt)
{
	return put_varint(o, (uint64_t)field << 3 | (uint64_t)wt);
}

/* int32 travels sign-extended to 64 bits, so a negative one takes 10 bytes. */
static uint64_t int32_wire(int v)
{
	return (uint64_t)(int64_t)v;
}

static uint8_t *put_float(uint8_t *o, float f)
{
	uint32_t u;
	memcpy(&u, &f, 4);
	o[0] = (uint8_t)u;
	o[1] = (uint8_t)(u >> 8);
	o[2] = (uint8_t)(u >> 16);
	o[3] = (uint8_t)(u >> 24);
	return o + 4;
}

int datum_encode(const struct datum *d, uint8_t **out, size_t *len, struct dd_err *err)
{
	*out = NULL;
	*len = 0;
	if (d->channels < 0 || d->height < 0 || d->width < 0)
		return dd_err_set(err, DD_EINVAL, "Datum: negative shape %dx%dx%d", d->channels, d->height,
				  d->width);
	if ((d->data_len && !d->data) || (d->n_float && !d->float_data))
		return dd_err_set(err, DD_EINVAL, "Datum: a length is set but its values are missing");
	if (d->data_len > PB_MAX_MESSAGE || d->n_float > PB_MAX_MESSAGE / 5)
		return dd_err_set(err, DD_ETOOBIG, "Datum: %zu bytes and %zu floats exceed protobuf's 2 GiB limit",
				  d->data_len, d->n_float);
	/* Every field is one tag byte (field numbers 1..7, wire types < 8). */
	size_t size = 1 + varint_size(int32_wire(d->channels)) + 1 + varint_size(int32_wire(d->height)) +
		      1 + varint_size(int32_wire(d->width)) + 1 + varint_size(int32_wire(d->label));
	if (d->data)
		size += 1 + varint_size(d->data_len) + d->data_len;
	/* float_data is not [packed = true] in caffe.proto, so Caffe writes one field per value */
	size += d->n_float * 5;
	if (d->encoded)
		size += 2;
	if (size > PB_MAX_MESSAGE)
		return dd_err_set(err, DD_ETOOBIG, "Datum: %zu bytes exceed protobuf's 2 GiB limit", size);
	uint8_t *buf = malloc(size), *o = buf;
	if (!buf)
		return dd_err_set(err, DD_ENOMEM, "out of memory encoding a %zu-byte Datum", size);
	o = put_varint(put_tag(o, 1, WT_VARINT), int32_wire(d->channels));
	o = put_varint(put_tag(o, 2, WT_VARINT), int32_wire(d->height));
	o = put_varint(put_tag(o, 3, WT_VARINT), int32_wire(d->width));
	if (d->data) {
		o = put_varint(put_tag(o, 4, WT_LEN), d->data_len);
		if (d->data_len)
			memcpy(o, d->data, d->data_len);
		o += d->data_len;
	}
	o = put_varint(put_tag(o, 5, WT_VARINT), int32_wire(d->label));
	for (size_t i = 0; i < d->n_float; i++)
		o = put_float(put_tag(o, 6, WT_FIXED32), d->float_data[i]);
	if (d->encoded)
		o = put_varint(put_tag(o, 7, WT_VARINT), 1);
	*out = buf;
	*len = (size_t)(o - buf);
	return DD_OK;
}

int blob_encode(const struct blob *b, uint8_t **out, size_t *len, struct dd_err *err)
{
	*out = NULL;
	*len = 0;
	if (b->num < 0 || b->channels < 0 || b->height < 0 || b->width < 0)
		return dd_err_set(err, DD_EINVAL, "BlobProto: negative shape %dx%dx%dx%d", b->num,
				  b->channels, b->height, b->width);
	uint64_t want = (uint64_t)b->num * (uint64_t)b->channels; /* each < 2^31: no overflow */
	want = want > UINT32_MAX ? UINT64_MAX : want * (uint64_t)b->height;
	want = want > UINT32_MAX ? UINT64_MAX : want * (uint64_t)b->width;
	if (want != b->count)
		return dd_err_set(err, DD_EINVAL, "BlobProto: shape %dx%dx%dx%d does not match its %zu values",
				  b->num, b->channels, b->height, b->width, b->count);
	if (b->count && !b->data)
		return dd_err_set(err, DD_EINVAL, "BlobProto: %zu values but no data", b->count);
	if (b->count > (PB_MAX_MESSAGE - 64) / 4)
		return dd_err_set(err, DD_ETOOBIG, "BlobProto: %zu floats exceed protobuf's 2 GiB limit",
				  b->count);
	size_t payload = b->count * 4;
	size_t size = 1 + varint_size(int32_wire(b->num)) + 1 + varint_size(int32_wire(b->channels)) +
		      1 + varint_size(int32_wire(b->height)) + 1 + varint_size(int32_wire(b->width));
	if (b->count)
		size += 1 + varint_size(payload) + payload;
	uint8_t *buf = malloc(size), *o = buf;
	if (!buf)
		return dd_err_set(err, DD_ENOMEM, "out of memory encoding a %zu-byte BlobProto", size);
	o = put_varint(put_tag(o, 1, WT_VARINT), int32_wire(b->num));
	o = put_varint(put_tag(o, 2, WT_VARINT), int32_wire(b->channels));
	o = put_varint(put_tag(o, 3, WT_VARINT), int32_wire(b->height));
	o = put_varint(put_tag(o, 4, WT_VARINT), int32_wire(b->width));
	if (b->count) {
		/* data is [packed = true] in caffe.proto: one field, all values */
		o = put_varint(put_tag(o, 5, WT_LEN), payload);
		for (size_t i = 0; i < b->count; i++)
			o = put_float(o, b->data[i]);
	}
	*out = buf;
	*len = (size_t)(o - buf);
	return DD_OK;
}
