/* net.c — Caffe's NetParameter (the subset deepdesk trains) from a prototxt tree,
 * and its instantiation for one of DIGITS' stages with shape inference.
 *
 * What is particular to a layer type (its parameter messages' descriptors and
 * checks, its shape rule, its bottom and top counts) is its row in layers.c; this
 * file is the machinery the rows drive, and net_impl.h what the two share.
 *
 * Design note.  Parsing (net_parse) checks everything that can be checked without a
 * dataset: the schema (each message's fields, their kinds and ranges, fields given
 * twice), each layer's own consistency (kernel given, pad below kernel, bottoms and
 * tops counted right).  It keeps nothing from the tree but what struct net needs,
 * allocated in the tree's own arena, so a struct net is one free.
 *
 * Instantiation (net_instantiate) is what Caffe's Net::Init does after FilterNet,
 * with DIGITS' clean-up first: pick the layers of the stage, drop what DIGITS drops,
 * add the data layer DIGITS adds, then walk the layers in order keeping a hash of
 * blob names, so each bottom is looked up and each top created or (in place)
 * reused, and each layer's output shapes and parameter blobs follow from its
 * bottoms' shapes.  Caffe runs layers in the order written, so "made by an earlier
 * layer" is the whole graph check; a cycle shows up as a bottom made later, and
 * the error says which it is.
 *
 * Invariants of a struct net_graph: node[i].bottom[j] < nblob and was created by a
 * node before i; blob[k].producer is the node that created k; an in-place node's
 * top[0] == bottom[0]; every blob count fits an int32 (the kernels' dims are int). */
#define _GNU_SOURCE
#include "net.h"

#include <cjson/cJSON.h>
#include <float.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "net_impl.h"

/* ---- names -------------------------------------------------------------------- */

static const char *const stage_names[] = { "train", "val", "deploy" };

const char *net_stage_name(enum net_stage stage)
{
	return (unsigned)stage < 3 ? stage_names[stage] : "?";
}

int net_stage_parse(const char *s, enum net_stage *out, struct dd_err *err)
{
	for (int i = 0; i < 3; i++)
		if (s && strcmp(s, stage_names[i]) == 0) {
			*out = (enum net_stage)i;
			return DD_OK;
		}
	return dd_err_set(err, DD_EINVAL, "unknown stage \"%s\": expected train, val or deploy", s ? s : "");
}

/* Copy s for a message: at most max bytes, control characters shown as '?'. */
static void sanitize(char *buf, size_t n, const char *s, size_t max)
{
	size_t j = 0;
	for (size_t i = 0; s[i] && i < max && j + 4 < n; i++)
		buf[j++] = (unsigned char)s[i] < 32 || s[i] == 127 ? '?' : s[i];
	if (s[0] && strlen(s) > max && j + 4 < n) {
		memcpy(buf + j, "...", 3);
		j += 3;
	}
	buf[j] = 0;
}

void net_layer_label(const struct net_layer *l, int index, char *buf, size_t n)
{
	if (l->name && l->name[0]) {
		char s[100];
		sanitize(s, sizeof s, l->name, 64);
		snprintf(buf, n, "'%s'", s);
	} else {
		snprintf(buf, n, "#%d", index + 1);
	}
}

int net_err_pos(const struct dd_err *err, int *line, int *col)
{
	int l, c, used = 0;
	if (!err || sscanf(err->msg, "%d:%d: %n", &l, &c, &used) != 2 || used == 0)
		return 0;
	*line = l;
	*col = c;
	return 1;
}

/* ---- parse context and field readers ------------------------------------------- */

int net_perr(struct pc *c, int line, int col, const char *fmt, ...)
{
	char msg[400];
	DD_FORMAT(msg, fmt);
	return dd_err_set(c->err, DD_EINVAL, "%d:%d: %s%s", line, col, c->prefix, msg);
}

static int nomem(struct pc *c)
{
	return dd_err_set(c->err, DD_ENOMEM, "out of memory while reading the network description");
}

/* "convolution_param.kernel_size", or "kernel_size" at the layer's own level. */
static void path(const struct pc *c, const struct ptx_field *f, char *buf, size_t n)
{
	if (c->where && c->where[0])
		snprintf(buf, n, "%s.%s", c->where, f->name);
	else
		snprintf(buf, n, "%s", f->name);
}

static void got(const struct ptx_field *f, char *buf, size_t n)
{
	char s[64];
	switch (f->kind) {
	case PTX_STRING:
		sanitize(s, sizeof s, f->text, 40);
		snprintf(buf, n, "\"%s\"", s);
		break;
	case PTX_MESSAGE: snprintf(buf, n, "a message { ... }"); break;
	default:
		sanitize(s, sizeof s, f->text, 40);
		snprintf(buf, n, "%s", s);
	}
}

static int bad_value(struct pc *c, const struct ptx_field *f, const char *expected)
{
	char p[128], g[80];
	path(c, f, p, sizeof p);
	got(f, g, sizeof g);
	return net_perr(c, f->vline, f->vcol, "%s: expected %s, got %s", p, expected, g);
}

static int unknown_field(struct pc *c, const struct ptx_field *f)
{
	char n[80];
	sanitize(n, sizeof n, f->name, 60);
	if (c->where && c->where[0])
		return net_perr(c, f->line, f->col, "unknown field '%s' in %s", n, c->where);
	return net_perr(c, f->line, f->col, "unknown field '%s'", n);
}

/* A non-repeated field may appear once (as protobuf's own parser insists). */
static int once(struct pc *c, const struct ptx_msg *m, int i)
{
	const struct ptx_field *f = &m->field[i];
	for (int j = 0; j < i; j++)
		if (strcmp(m->field[j].name, f->name) == 0) {
			char p[128];
			path(c, f, p, sizeof p);
			return net_perr(c, f->line, f->col, "%s is given twice (first at %d:%d)", p,
					m->field[j].line, m->field[j].col);
		}
	return DD_OK;
}

static int get_int(struct pc *c, const struct ptx_field *f, int64_t lo, int64_t hi, int *out)
{
	if (f->kind != PTX_NUMBER || !f->int_ok || f->i < lo || f->i > hi) {
		char e[96];
		if (hi == INT32_MAX && lo == INT32_MIN)
			snprintf(e, sizeof e, "an integer");
		else if (hi >= (int64_t)1 << 24)
			snprintf(e, sizeof e, "an integer of at least %lld", (long long)lo);
		else
			snprintf(e, sizeof e, "an integer from %lld to %lld", (long long)lo, (long long)hi);
		return bad_value(c, f, e);
	}
	*out = (int)f->i;
	return DD_OK;
}

static int ieq(const char *a, const char *b)
{
	for (; *a && *b; a++, b++)
		if ((*a | 0x20) != (*b | 0x20))
			return 0;
	return *a == *b;
}

/* A float field within [lo, hi] (finite unless the bounds are infinite). */
static int get_float(struct pc *c, const struct ptx_field *f, double lo, double hi, float *out)
{
	double v = NAN; /* anything but a number fails the range test below */
	if (f->kind == PTX_NUMBER)
		v = f->num;
	else if (f->kind == PTX_IDENT && (ieq(f->text, "inf") || ieq(f->text, "infinity")))
		v = INFINITY;
	if (isfinite(v) && fabs(v) > FLT_MAX)
		v = v > 0 ? INFINITY : -INFINITY;
	if (!(v >= lo && v <= hi)) {
		char e[96];
		if (lo <= -FLT_MAX && hi >= FLT_MAX)
			snprintf(e, sizeof e, "a finite number");
		else if (hi >= FLT_MAX)
			snprintf(e, sizeof e, "a number of at least %g", lo);
		else
			snprintf(e, sizeof e, "a number from %g to %g", lo, hi);
		return bad_value(c, f, e);
	}
	*out = (float)v;
	return DD_OK;
}

static int get_bool(struct pc *c, const struct ptx_field *f, int *out)
{
	if (f->kind == PTX_IDENT) {
		if (!strcmp(f->text, "true") || !strcmp(f->text, "True") || !strcmp(f->text, "t")) {
			*out = 1;
			return DD_OK;
		}
		if (!strcmp(f->text, "false") || !strcmp(f->text, "False") || !strcmp(f->text, "f")) {
			*out = 0;
			return DD_OK;
		}
	} else if (f->kind == PTX_NUMBER && f->int_ok && (f->i == 0 || f->i == 1)) {
		*out = (int)f->i;
		return DD_OK;
	}
	return bad_value(c, f, "true or false");
}

/* An enum: names[] in Caffe's numbering, NULL where a value is not supported. */
static int get_enum(struct pc *c, const struct ptx_field *f, const char *const *names, int n, int *out)
{
	if (f->kind == PTX_IDENT) {
		for (int i = 0; i < n; i++)
			if (names[i] && strcmp(f->text, names[i]) == 0) {
				*out = i;
				return DD_OK;
			}
	} else if (f->kind == PTX_NUMBER && f->int_ok && f->i >= 0 && f->i < n && names[f->i]) {
		*out = (int)f->i;
		return DD_OK;
	}
	char e[160] = "";
	int k = 0, total = 0;
	for (int i = 0; i < n; i++)
		total += names[i] != NULL;
	for (int i = 0; i < n; i++) {
		if (!names[i])
			continue;
		size_t len = strlen(e);
		snprintf(e + len, sizeof e - len, "%s%s", k == 0 ? "" : k == total - 1 ? " or " : ", ", names[i]);
		k++;
	}
	return bad_value(c, f, e);
}

static int get_string(struct pc *c, const struct ptx_field *f, const char **out)
{
	if (f->kind != PTX_STRING)
		return bad_value(c, f, "a string in quotes");
	if (strlen(f->text) != f->len) {
		char p[128];
		path(c, f, p, sizeof p);
		return net_perr(c, f->vline, f->vcol, "%s: a NUL byte is not allowed in it", p);
	}
	*out = f->text;
	return DD_OK;
}

static int want_msg(struct pc *c, const struct ptx_field *f)
{
	return f->kind == PTX_MESSAGE ? DD_OK : bad_value(c, f, "a message { ... }");
}

/* Collect the repeated string field `name` of m into an arena array. */
static int strings_of(struct pc *c, const struct ptx_msg *m, const char *name, const char *const **out,
		      int *n)
{
	int k = 0;
	for (int i = 0; i < m->nfield; i++)
		k += strcmp(m->field[i].name, name) == 0;
	*out = NULL;
	*n = 0;
	if (!k)
		return DD_OK;
	const char **a = ptx_alloc(c->doc, (size_t)k * sizeof *a);
	if (!a)
		return nomem(c);
	k = 0;
	for (int i = 0; i < m->nfield; i++) {
		if (strcmp(m->field[i].name, name) != 0)
			continue;
		int rc = get_string(c, &m->field[i], &a[k]);
		if (rc)
			return rc;
		k++;
	}
	*out = a;
	*n = k;
	return DD_OK;
}

int net_count_of(const struct ptx_msg *m, const char *name)
{
	int k = 0;
	for (int i = 0; i < m->nfield; i++)
		k += strcmp(m->field[i].name, name) == 0;
	return k;
}

static int axes_add(struct pc *c, const struct ptx_field *f, struct axes *a, int lo, int hi, int repeated)
{
	if (!a->first)
		a->first = f;
	if (a->n == 2 || (!repeated && a->n == 1)) {
		char p[128];
		path(c, f, p, sizeof p);
		return net_perr(c, f->line, f->col, repeated ? "%s: at most two values (height, width)"
							 : "%s is given twice", p);
	}
	return get_int(c, f, lo, hi, &a->v[a->n++]);
}

/* The _h/_w form of an axes field: "kernel_h" -> stored in a->h. */
static int axes_hw(struct pc *c, const struct ptx_msg *m, int i, struct axes *a, int lo, int hi)
{
	const struct ptx_field *f = &m->field[i];
	size_t n = strlen(f->name);
	int rc = once(c, m, i);
	if (rc)
		return rc;
	if (!a->first)
		a->first = f;
	if (f->name[n - 1] == 'h') {
		a->has_h = 1;
		return get_int(c, f, lo, hi, &a->h);
	}
	a->has_w = 1;
	return get_int(c, f, lo, hi, &a->w);
}

static int is_name(const char *s, const char *base, const char *suffix)
{
	size_t n = strlen(base);
	return strncmp(s, base, n) == 0 && strcmp(s + n, suffix) == 0;
}


/* ---- messages: descriptors, and the one loop that reads them ----------------------- */

struct pc;
struct pmsg;

#define NAXES 4
#define MAX_FIELDS 16

#define AT(p, off) ((char *)(p) + (off))

static void msg_defaults(const struct pmsg *d, void *p)
{
	for (int k = 0; k < d->nfield; k++) {
		const struct field *fd = &d->field[k];
		if (fd->off == NOWHERE)
			continue;
		switch (fd->kind) {
		case F_INT:
		case F_BOOL:
		case F_ENUM:
		case F_NAMED: *(int *)AT(p, fd->off) = (int)fd->def; break;
		case F_FLOAT: *(float *)AT(p, fd->off) = (float)fd->def; break;
		case F_AXES: *(int *)AT(p, fd->off) = *(int *)AT(p, fd->cnt) = (int)fd->def; break;
		case F_MSG: msg_defaults(fd->sub, AT(p, fd->off)); break;
		case F_STRING:
		case F_REFUSED:
		case F_FLOATS:
		case F_STRINGS:
		case F_DIMS:
		case F_MSGS: break;
		}
	}
	if (d->init)
		d->init(p);
}

static int parse_msg(struct pc *c, const struct ptx_msg *m, const struct pmsg *d, void *p);

/* Read f's message with d, where its errors say "WHERE.NAME" ("convolution_param.weight_filler"). */
static int read_sub(struct pc *c, const struct ptx_field *f, const struct pmsg *d, void *p)
{
	char w[128];
	const char *saved = c->where;
	int rc = want_msg(c, f);
	if (rc)
		return rc;
	if (saved && saved[0])
		snprintf(w, sizeof w, "%s.%s", saved, f->name);
	else
		snprintf(w, sizeof w, "%s", f->name);
	c->where = w;
	rc = parse_msg(c, f->msg, d, p);
	c->where = saved;
	return rc;
}

/* The descriptor of field `name`; *hw set when it is an F_AXES field's _h/_w form. */
static const struct field *field_of(const struct pmsg *d, const char *name, int *hw)
{
	*hw = 0;
	for (int k = 0; k < d->nfield; k++) {
		const struct field *fd = &d->field[k];
		if (!strcmp(name, fd->name))
			return fd;
		if (fd->kind == F_AXES && fd->base && (is_name(name, fd->base, "_h") || is_name(name, fd->base, "_w"))) {
			*hw = 1;
			return fd;
		}
	}
	return NULL;
}

/* What a scalar field's value must also meet, then keep it. */
static int keep(struct pc *c, const struct ptx_field *f, const struct field *fd, double v, void *p)
{
	if (fd->valid && !fd->valid(v))
		return bad_value(c, f, fd->expect);
	if (fd->only && v != fd->want)
		return net_perr(c, f->vline, f->vcol, "%s", fd->only);
	if (fd->off != NOWHERE) {
		if (fd->kind == F_FLOAT)
			*(float *)AT(p, fd->off) = (float)v;
		else
			*(int *)AT(p, fd->off) = (int)v;
	}
	if (fd->has)
		*(int *)AT(p, fd->has) = 1;
	return DD_OK;
}

/* A string that must be one of names[]: "convolution_param.weight_filler.type:
 * filler "x" is not supported (constant, uniform, ...)". */
static int get_named(struct pc *c, const struct ptx_field *f, const struct field *fd, int *out)
{
	const char *s;
	int rc = get_string(c, f, &s);
	if (rc)
		return rc;
	for (int k = 0; k < fd->nnames; k++)
		if (!strcmp(s, fd->names[k])) {
			*out = k;
			return DD_OK;
		}
	char n[64], p[128], all[160] = "";
	sanitize(n, sizeof n, s, 40);
	path(c, f, p, sizeof p);
	for (int k = 0; k < fd->nnames; k++) {
		size_t len = strlen(all);
		snprintf(all + len, sizeof all - len, "%s%s", k == 0 ? "" : k == fd->nnames - 1 ? " or " : ", ",
			 fd->names[k]);
	}
	return net_perr(c, f->vline, f->vcol, "%s: %s \"%s\" is not supported (%s)", p, fd->noun, n, all);
}

/* Field i of m, whose descriptor is fd. */
static int read_field(struct pc *c, const struct ptx_msg *m, int i, const struct field *fd, int hw, void *p,
		      struct axes *ax, void *arr, int *n)
{
	const struct ptx_field *f = &m->field[i];
	int rc = DD_OK, v = 0;
	float x = 0;
	switch (fd->kind) {
	/* the scalars: read, then what keep() checks and stores */
	case F_INT: rc = get_int(c, f, (int64_t)fd->min, (int64_t)fd->max, &v); break;
	case F_FLOAT: return (rc = get_float(c, f, fd->min, fd->max, &x)) ? rc : keep(c, f, fd, x, p);
	case F_BOOL: rc = get_bool(c, f, &v); break;
	case F_ENUM: rc = get_enum(c, f, fd->names, fd->nnames, &v); break;
	case F_NAMED: rc = get_named(c, f, fd, &v); break;
	case F_STRING: {
		const char *s;
		if ((rc = get_string(c, f, &s)))
			return rc;
		if (fd->off != NOWHERE)
			memcpy(AT(p, fd->off), &s, sizeof s);
		return DD_OK;
	}
	case F_REFUSED: return net_perr(c, f->line, f->col, "%s", fd->only);
	case F_FLOATS: return get_float(c, f, fd->min, fd->max, (float *)arr + (*n)++);
	case F_STRINGS: return DD_OK; /* after the other fields */
	case F_DIMS: {
		int *nd = (int *)AT(p, fd->cnt);
		if (*nd == NET_MAX_DIMS)
			return net_perr(c, f->line, f->col, "%s: at most %d dims (N, C, H, W)", c->where, NET_MAX_DIMS);
		if ((rc = get_int(c, f, (int64_t)fd->min, (int64_t)fd->max, &v)))
			return rc;
		((int64_t *)AT(p, fd->off))[(*nd)++] = v;
		return DD_OK;
	}
	case F_MSG: return read_sub(c, f, fd->sub, AT(p, fd->off));
	case F_MSGS: return read_sub(c, f, fd->sub, (char *)arr + (size_t)(*n)++ * fd->sub->size);
	case F_AXES:
		if (hw)
			return axes_hw(c, m, i, &ax[fd->slot], (int)fd->min, (int)fd->max);
		return axes_add(c, f, &ax[fd->slot], (int)fd->min, (int)fd->max, fd->repeated);
	}
	return rc ? rc : keep(c, f, fd, v, p); /* the int kinds */
}

/* The one loop: every field of m by its descriptor in d, into p (whose defaults are
 * set already), then the repeated strings, then d's check.  DD_OK or the first error. */
static int parse_msg(struct pc *c, const struct ptx_msg *m, const struct pmsg *d, void *p)
{
	struct axes ax[NAXES];
	void *arr[MAX_FIELDS] = { NULL };
	int n[MAX_FIELDS] = { 0 }, rc;
	memset(ax, 0, sizeof ax);
	/* the arrays of the repeated fields first, sized by a count */
	for (int k = 0; k < d->nfield; k++) {
		const struct field *fd = &d->field[k];
		size_t size = fd->kind == F_FLOATS ? sizeof(float) : fd->kind == F_MSGS ? fd->sub->size : 0;
		int cnt = size ? net_count_of(m, fd->name) : 0;
		if (cnt && !(arr[k] = ptx_alloc(c->doc, (size_t)cnt * size)))
			return nomem(c);
		for (int e = 0; fd->kind == F_MSGS && e < cnt; e++)
			msg_defaults(fd->sub, (char *)arr[k] + (size_t)e * size);
	}
	for (int i = 0; i < m->nfield; i++) {
		const struct ptx_field *f = &m->field[i];
		int hw;
		const struct field *fd = field_of(d, f->name, &hw);
		if (!fd)
			return unknown_field(c, f);
		int repeated = fd->kind == F_FLOATS || fd->kind == F_STRINGS || fd->kind == F_DIMS ||
			       fd->kind == F_MSGS || (fd->kind == F_AXES && (hw || fd->repeated));
		if (!repeated && (rc = once(c, m, i)))
			return rc;
		int k = (int)(fd - d->field);
		if ((rc = read_field(c, m, i, fd, hw, p, ax, arr[k], &n[k])))
			return rc;
	}
	for (int k = 0; k < d->nfield; k++) {
		const struct field *fd = &d->field[k];
		if (fd->kind == F_STRINGS) {
			const char *const *s;
			if ((rc = strings_of(c, m, fd->name, &s, &n[k])))
				return rc;
			arr[k] = (void *)s;
		}
		if (fd->kind == F_FLOATS || fd->kind == F_STRINGS || fd->kind == F_MSGS) {
			const void *a = n[k] ? arr[k] : NULL;
			memcpy(AT(p, fd->off), &a, sizeof a);
			*(int *)AT(p, fd->cnt) = n[k];
		}
	}
	return d->check ? d->check(c, m, p, ax) : DD_OK;
}


/* ---- instantiation: lookups, rules, errors, and the helpers the shape rules use ---- */

#define MAX_COUNT INT32_MAX /* elements in one blob: the kernels index with int */

static unsigned hash_str(const char *s)
{
	unsigned h = 2166136261u;
	for (; *s; s++)
		h = (h ^ (unsigned char)*s) * 16777619u;
	return h;
}

static int blob_find(const struct ic *x, const char *name)
{
	for (unsigned i = hash_str(name) & x->hmask;; i = (i + 1) & x->hmask) {
		int b = x->hash[i];
		if (b < 0 || !strcmp(x->g->blob[b].name, name))
			return b;
	}
}

static void blob_insert(struct ic *x, int b)
{
	unsigned i = hash_str(x->g->blob[b].name) & x->hmask;
	while (x->hash[i] >= 0)
		i = (i + 1) & x->hmask;
	x->hash[i] = b;
}

/* The node with this name, or -1 (inserting node k when it is new). */
static int layer_name_seen(struct ic *x, int k)
{
	const char *name = x->g->node[k].l.name;
	for (unsigned i = hash_str(name) & x->hmask;; i = (i + 1) & x->hmask) {
		int n = x->lhash[i];
		if (n < 0) {
			x->lhash[i] = k;
			return -1;
		}
		if (!strcmp(x->g->node[n].l.name, name))
			return n;
	}
}

static int rule_meets(const struct net_rule *r, int phase, const char *stage)
{
	if (r->phase >= 0 && r->phase != phase)
		return 0;
	if (r->min_level > 0 || r->max_level < 0) /* deepdesk's state is level 0 */
		return 0;
	for (int i = 0; i < r->nstage; i++)
		if (strcmp(r->stage[i], stage) != 0)
			return 0;
	for (int i = 0; i < r->nnot_stage; i++)
		if (!strcmp(r->not_stage[i], stage))
			return 0;
	return 1;
}

/* Caffe's Net::FilterNet for one layer. */
static int layer_in_state(const struct net_layer *l, int phase, const char *stage)
{
	int in = l->ninclude == 0;
	for (int j = 0; in && j < l->nexclude; j++)
		if (rule_meets(&l->exclude[j], phase, stage))
			in = 0;
	for (int j = 0; !in && j < l->ninclude; j++)
		if (rule_meets(&l->include[j], phase, stage))
			in = 1;
	return in;
}

int net_lerr(struct ic *x, const struct net_node *nd, const char *fmt, ...)
{
	char msg[380], label[100];
	DD_FORMAT(msg, fmt);
	net_layer_label(&nd->l, nd->index, label, sizeof label);
	if (nd->l.line > 0)
		return dd_err_set(x->err, DD_EINVAL, "%d:%d: layer %s: %s", nd->l.line, nd->l.col, label, msg);
	return dd_err_set(x->err, DD_EINVAL, "layer %s (added by deepdesk): %s", label, msg);
}

void net_shape_str(const struct net_shape *s, char *buf, size_t n)
{
	if (s->ndim == 0) {
		snprintf(buf, n, "scalar");
		return;
	}
	size_t k = 0;
	buf[0] = 0;
	for (int i = 0; i < s->ndim && k < n; i++)
		k += (size_t)snprintf(buf + k, n - k, "%s%lld", i ? "x" : "", (long long)s->dim[i]);
}

static int64_t shape_count(const struct net_shape *s)
{
	int64_t c = 1;
	for (int i = 0; i < s->ndim; i++)
		if (__builtin_mul_overflow(c, s->dim[i], &c) || c > MAX_COUNT)
			return -1;
	return c;
}

const char *net_blob_name(const struct ic *x, int b, char *buf, size_t n)
{
	sanitize(buf, n, x->g->blob[b].name, 60);
	return buf;
}

/* Give top i of node k its shape. */
int net_set_top(struct ic *x, struct net_node *nd, int i, int ndim, const int64_t *dim)
{
	struct net_blob *b = &x->g->blob[nd->top[i]];
	b->shape.ndim = ndim;
	for (int d = 0; d < ndim; d++)
		b->shape.dim[d] = dim[d];
	b->count = shape_count(&b->shape);
	if (b->count < 0) {
		char s[80], sh[80];
		net_shape_str(&b->shape, sh, sizeof sh);
		return net_lerr(x, nd, "top '%s' would be %s: more than %d values in one blob", net_blob_name(x, nd->top[i], s, sizeof s),
				sh, MAX_COUNT);
	}
	return DD_OK;
}

int net_add_param(struct ic *x, struct net_node *nd, const char *role, int ndim, const int64_t *dim,
		     int stat)
{
	struct net_param_blob *p = &nd->param[nd->nparam];
	p->role = role;
	p->shape.ndim = ndim;
	for (int d = 0; d < ndim; d++)
		p->shape.dim[d] = dim[d];
	p->count = shape_count(&p->shape);
	if (p->count < 0) {
		char sh[80];
		net_shape_str(&p->shape, sh, sizeof sh);
		return net_lerr(x, nd, "its %s would be %s: more than %d values", role, sh, MAX_COUNT);
	}
	/* the bilinear filler draws a (kh, kw) kernel in every (C_in, C_out) pair: only
	 * 4-axis weights have one */
	size_t foff = net_layer_type_info(nd->l.type)->filler[nd->nparam > 0];
	if (foff && ((const struct net_filler *)((const char *)&nd->l + foff))->type == NET_FILLER_BILINEAR &&
	    ndim != 4) {
		char sh[80];
		net_shape_str(&p->shape, sh, sizeof sh);
		return net_lerr(x, nd, "the bilinear filler fills 4-axis weights (..., kh, kw), not its %s (%s): "
				   "give its %s another filler",
			    role, sh, nd->nparam ? "bias_filler" : "weight_filler");
	}
	p->lr_mult = nd->nparam < nd->l.nparam ? nd->l.param[nd->nparam].lr_mult : 1;
	p->decay_mult = nd->nparam < nd->l.nparam ? nd->l.param[nd->nparam].decay_mult : 1;
	p->learned = !stat && p->lr_mult != 0;
	nd->nparams += p->count;
	nd->nparam++;
	return DD_OK;
}

static int need_axes(struct ic *x, struct net_node *nd, const struct net_shape *s, int lo, int hi,
		     const char *what)
{
	if (s->ndim >= lo && s->ndim <= hi)
		return DD_OK;
	char sh[80], bn[80];
	net_shape_str(s, sh, sizeof sh);
	return net_lerr(x, nd, "needs %s; bottom '%s' is %s", what, net_blob_name(x, nd->bottom[0], bn, sizeof bn), sh);
}

/* ---- layer types: what the rows (layers.c) are asked ------------------------------- */

/* The params of a layer: the union, whose members all start here. */
static void *params_of(struct net_layer *l)
{
	return &l->data;
}

static void layer_defaults(struct net_layer *l)
{
	const struct layer_type *t = &net_layer_types[l->type];
	for (int k = 0; k < 2; k++)
		if (t->msg[k])
			msg_defaults(t->msg[k], params_of(l));
}

/* The *_param message called name that some type reads, or NULL. */
static const struct pmsg *msg_named(const char *name)
{
	for (int t = 0; t < NET_LAYER_TYPE_COUNT; t++)
		for (int k = 0; k < 2; k++)
			if (net_layer_types[t].msg[k] && !strcmp(net_layer_types[t].msg[k]->name, name))
				return net_layer_types[t].msg[k];
	return NULL;
}

/* Output shapes and parameter blobs of node nd from its bottoms' shapes. */
static int infer(struct ic *x, struct net_node *nd)
{
	if ((unsigned)nd->l.type >= NET_LAYER_TYPE_COUNT)
		return dd_err_set(x->err, DD_EINTERNAL, "layer type %d has no shape rule", (int)nd->l.type);
	const struct layer_type *t = &net_layer_types[nd->l.type];
	if (t->axes_what) {
		int rc = need_axes(x, nd, &x->g->blob[nd->bottom[0]].shape, t->axes_min, t->axes_max, t->axes_what);
		if (rc)
			return rc;
	}
	return t->infer(x, nd);
}


/* ---- layers and the description --------------------------------------------------- */

/* "a" or "an" before a type name, for messages. */
static const char *article(const char *word)
{
	return strchr("AEIOU", word[0]) ? "an" : "a";
}

static int parse_layer(struct pc *c, const struct ptx_field *lf, int index, struct net_layer *l)
{
	const struct ptx_msg *m = lf->msg;
	const struct ptx_field *type = NULL;
	int rc;
	l->name = "";
	l->line = lf->line;
	l->col = lf->col;
	c->where = "";
	c->prefix[0] = 0;
	/* the name and type first: every later message names the layer */
	for (int i = 0; i < m->nfield; i++) {
		const struct ptx_field *f = &m->field[i];
		if (!strcmp(f->name, "name")) {
			if ((rc = once(c, m, i)) || (rc = get_string(c, f, &l->name)))
				return rc;
		}
	}
	char label[100];
	net_layer_label(l, index, label, sizeof label);
	snprintf(c->prefix, sizeof c->prefix, "layer %s: ", label);
	for (int i = 0; i < m->nfield; i++) {
		const struct ptx_field *f = &m->field[i];
		if (!strcmp(f->name, "type")) {
			if ((rc = once(c, m, i)))
				return rc;
			type = f;
		}
	}
	if (!type)
		return net_perr(c, lf->line, lf->col, "no type given (type: \"Convolution\", ...)");
	if (type->kind == PTX_IDENT)
		return net_perr(c, type->vline, type->vcol,
				"type %s is Caffe's old (V1) spelling; write the type as a string, e.g. type: \"Convolution\"",
				type->text);
	const char *tn;
	if ((rc = get_string(c, type, &tn)))
		return rc;
	int t = -1;
	for (int k = 0; k < NET_LAYER_TYPE_COUNT; k++)
		if (!strcmp(tn, net_layer_types[k].info.name))
			t = k;
	if (t < 0) {
		char s[64], all[400] = "";
		sanitize(s, sizeof s, tn, 40);
		for (int k = 0; k < NET_LAYER_TYPE_COUNT; k++) {
			size_t n = strlen(all);
			snprintf(all + n, sizeof all - n, "%s%s", k ? ", " : "", net_layer_types[k].info.name);
		}
		return net_perr(c, type->vline, type->vcol, "unknown type \"%s\" (deepdesk knows %s)", s, all);
	}
	l->type = (enum net_layer_type)t;
	const struct layer_type *lt = &net_layer_types[t];
	layer_defaults(l);

	/* the repeated fields, counted and then filled */
	if ((rc = strings_of(c, m, "bottom", &l->bottom, &l->nbottom)) ||
	    (rc = strings_of(c, m, "top", &l->top, &l->ntop)))
		return rc;
	int ninc = net_count_of(m, "include"), nexc = net_count_of(m, "exclude"), nparam = net_count_of(m, "param");
	int nlw = net_count_of(m, "loss_weight");
	struct net_rule *inc = ninc ? ptx_alloc(c->doc, (size_t)ninc * sizeof *inc) : NULL;
	struct net_rule *exc = nexc ? ptx_alloc(c->doc, (size_t)nexc * sizeof *exc) : NULL;
	struct net_param_spec *ps = nparam ? ptx_alloc(c->doc, (size_t)nparam * sizeof *ps) : NULL;
	float *lw = nlw ? ptx_alloc(c->doc, (size_t)nlw * sizeof *lw) : NULL;
	if ((ninc && !inc) || (nexc && !exc) || (nparam && !ps) || (nlw && !lw))
		return nomem(c);
	l->include = inc;
	l->exclude = exc;
	l->param = ps;
	l->loss_weight = lw;

	for (int i = 0; i < m->nfield; i++) {
		const struct ptx_field *f = &m->field[i];
		const char *n = f->name;
		rc = DD_OK;
		if (!strcmp(n, "name") || !strcmp(n, "type") || !strcmp(n, "bottom") || !strcmp(n, "top")) {
			continue;
		} else if (!strcmp(n, "include") || !strcmp(n, "exclude")) {
			struct net_rule *r = n[0] == 'i' ? &inc[l->ninclude++] : &exc[l->nexclude++];
			msg_defaults(&net_rule_msg, r);
			rc = read_sub(c, f, &net_rule_msg, r);
		} else if (!strcmp(n, "param")) {
			msg_defaults(&net_param_spec_msg, &ps[l->nparam]);
			rc = read_sub(c, f, &net_param_spec_msg, &ps[l->nparam++]);
		} else if (!strcmp(n, "loss_weight")) {
			rc = get_float(c, f, -FLT_MAX, FLT_MAX, &lw[l->nloss_weight++]);
		} else {
			const struct pmsg *d = msg_named(n);
			if (!d)
				return unknown_field(c, f);
			if (d != lt->msg[0] && d != lt->msg[1])
				return net_perr(c, f->line, f->col, "%s does not apply to %s %s layer", n, article(tn), tn);
			if ((rc = once(c, m, i)))
				return rc;
			rc = read_sub(c, f, d, params_of(l));
		}
		if (rc)
			return rc;
	}
	/* the types whose params have no usable defaults (their messages' checks run
	 * only when the message is there) */
	if (lt->required && !net_count_of(m, lt->msg[0]->name))
		return net_perr(c, lf->line, lf->col, "%s", lt->required);

	/* what Caffe checks of every layer */
	int blo = lt->info.bottom_min, bhi = lt->info.bottom_max, tlo = lt->info.top_min, thi = lt->info.top_max;
	if (l->nbottom < blo || l->nbottom > bhi) {
		if (blo == bhi)
			return net_perr(c, lf->line, lf->col, "%s %s layer takes %d bottom%s, not %d", article(tn), tn, blo,
					blo == 1 ? "" : "s", l->nbottom);
		return net_perr(c, lf->line, lf->col, "%s %s layer takes at least %d bottoms, not %d", article(tn), tn, blo,
				l->nbottom);
	}
	if (l->ntop < tlo || l->ntop > thi) {
		if (tlo == thi)
			return net_perr(c, lf->line, lf->col, "%s %s layer makes %d top, not %d", article(tn), tn, tlo, l->ntop);
		if (thi > 16)
			return net_perr(c, lf->line, lf->col, "%s %s layer makes at least %d top", article(tn), tn, tlo);
		return net_perr(c, lf->line, lf->col, "%s %s layer makes %d to %d tops, not %d", article(tn), tn, tlo, thi, l->ntop);
	}
	for (int i = 0; i < l->nbottom; i++)
		if (!l->bottom[i][0])
			return net_perr(c, lf->line, lf->col, "bottom %d has an empty name", i + 1);
	for (int i = 0; i < l->ntop; i++)
		if (!l->top[i][0])
			return net_perr(c, lf->line, lf->col, "top %d has an empty name", i + 1);
	if (l->ninclude && l->nexclude)
		return net_perr(c, lf->line, lf->col, "give include rules or exclude rules, not both (as Caffe requires)");
	if (l->nloss_weight && l->nloss_weight != l->ntop)
		return net_perr(c, lf->line, lf->col, "%d loss_weight values for %d tops: give one per top or none",
				l->nloss_weight, l->ntop);
	if (!lt->loss)
		for (int i = 0; i < l->nloss_weight; i++)
			if (l->loss_weight[i] != 0)
				return net_perr(c, lf->line, lf->col, "loss_weight applies only to loss layers (SoftmaxWithLoss, EuclideanLoss)");
	if (lt->check && (rc = lt->check(c, lf, l)))
		return rc;
	for (int i = 0; i < l->ntop; i++) {
		int b = i < l->nbottom && !strcmp(l->top[i], l->bottom[i]);
		if (b && !lt->info.elementwise) {
			char s[80];
			sanitize(s, sizeof s, l->top[i], 60);
			return net_perr(c, lf->line, lf->col,
					"%s %s layer cannot work in place (top '%s' is also its bottom)", article(tn), tn, s);
		}
	}
	return DD_OK;
}

static int parse_net(struct pc *c, const struct ptx_msg *root, struct net *net)
{
	int rc, nl = net_count_of(root, "layer"), k = 0;
	if (nl > NET_MAX_LAYERS)
		return dd_err_set(c->err, DD_ETOOBIG, "%d layers: the limit is %d", nl, NET_MAX_LAYERS);
	struct net_layer *layers = nl ? ptx_alloc(c->doc, (size_t)nl * sizeof *layers) : NULL;
	if (nl && !layers)
		return nomem(c);
	net->name = "";
	net->layer = layers;
	int ndims = net_count_of(root, "input_dim"), nshape = net_count_of(root, "input_shape");
	const struct ptx_field *first_input = NULL, *first_dim = NULL;
	for (int i = root->nfield - 1; i >= 0; i--) {
		if (!strcmp(root->field[i].name, "input"))
			first_input = &root->field[i];
		if (!strcmp(root->field[i].name, "input_dim") || !strcmp(root->field[i].name, "input_shape"))
			first_dim = &root->field[i];
	}
	if (ndims && nshape)
		return net_perr(c, first_dim->line, first_dim->col, "give input_shape or input_dim, not both");
	struct net_shape *shapes = NULL;
	if (ndims || nshape) {
		int n = ndims ? (ndims + 3) / 4 : nshape;
		if (!(shapes = ptx_alloc(c->doc, (size_t)n * sizeof *shapes)))
			return nomem(c);
	}
	int nd = 0;
	for (int i = 0; i < root->nfield; i++) {
		const struct ptx_field *f = &root->field[i];
		c->prefix[0] = 0;
		c->where = "";
		if (!strcmp(f->name, "layer")) {
			if ((rc = want_msg(c, f)))
				return rc;
			if ((rc = parse_layer(c, f, k, &layers[k])))
				return rc;
			k++;
		} else if (!strcmp(f->name, "name")) {
			if ((rc = once(c, root, i)) || (rc = get_string(c, f, &net->name)))
				return rc;
		} else if (!strcmp(f->name, "input")) {
			continue; /* below */
		} else if (!strcmp(f->name, "input_shape")) {
			if ((rc = read_sub(c, f, &net_shape_msg, &shapes[net->ninput_shape++])))
				return rc;
		} else if (!strcmp(f->name, "input_dim")) {
			int v;
			if ((rc = get_int(c, f, 1, 1 << 24, &v)))
				return rc;
			struct net_shape *s = &shapes[nd / 4];
			s->dim[s->ndim++] = v;
			if (nd++ % 4 == 0)
				net->ninput_shape++;
		} else if (!strcmp(f->name, "force_backward") || !strcmp(f->name, "debug_info")) {
			int v;
			if ((rc = get_bool(c, f, &v)))
				return rc;
		} else if (!strcmp(f->name, "layers")) {
			return net_perr(c, f->line, f->col,
					"'layers' is Caffe's old (V1) format: write 'layer' blocks with string types "
					"(Caffe's upgrade_net_proto_text converts a file)");
		} else {
			char n[80];
			sanitize(n, sizeof n, f->name, 60);
			return net_perr(c, f->line, f->col,
					"unknown field '%s' at the top level (expected name, layer, input, input_shape or input_dim)",
					n);
		}
	}
	net->nlayer = k;
	c->prefix[0] = 0;
	if ((rc = strings_of(c, root, "input", &net->input, &net->ninput)))
		return rc;
	net->input_shape = shapes;
	if (ndims % 4)
		return net_perr(c, first_dim->line, first_dim->col,
				"input_dim needs four values (N, C, H, W) per input, got %d", ndims);
	if (net->ninput_shape != net->ninput) {
		const struct ptx_field *f = first_input ? first_input : first_dim;
		return net_perr(c, f->line, f->col, "%d input shape%s for %d input%s: give each input its shape",
				net->ninput_shape, net->ninput_shape == 1 ? "" : "s", net->ninput, net->ninput == 1 ? "" : "s");
	}
	return DD_OK;
}

int net_parse(const char *text, size_t len, struct net **out, struct dd_err *err)
{
	struct ptx_doc *doc = NULL;
	struct net *net = NULL;
	*out = NULL;
	int rc = ptx_parse(text, len, &doc, err);
	if (rc)
		return rc;
	struct pc c = { .err = err, .doc = doc, .where = "" };
	net = ptx_alloc(doc, sizeof *net);
	if (!net) {
		rc = nomem(&c);
		goto fail;
	}
	net->doc_ = doc;
	if ((rc = parse_net(&c, ptx_root(doc), net)))
		goto fail;
	*out = net;
	return DD_OK;
fail:
	ptx_free(doc); /* net lives in it */
	return rc;
}

void net_free(struct net *net)
{
	if (net)
		ptx_free(net->doc_);
}

int net_declared_input(const struct net *def, struct net_input *in)
{
	const struct net_shape *s = NULL;
	for (int i = 0; i < def->nlayer && !s; i++)
		if (def->layer[i].type == NET_INPUT && def->layer[i].input.nshape)
			s = &def->layer[i].input.shape[0];
	if (!s && def->ninput_shape)
		s = &def->input_shape[0];
	if (!s || s->ndim < 2)
		return DD_ENOENT;
	/* (N, C, H, W), (N, C, H) or (N, C) */
	in->n = (int)s->dim[0];
	in->c = (int)s->dim[1];
	in->h = s->ndim > 2 ? (int)s->dim[2] : 1;
	in->w = s->ndim > 3 ? (int)s->dim[3] : 1;
	return DD_OK;
}

/* ---- instantiation ----------------------------------------------------------------- */

/* Which of nodes k+1.. makes `name`, or -1. */
static int later_producer(const struct net_graph *g, int k, const char *name)
{
	for (int j = k + 1; j < g->nnode; j++)
		for (int t = 0; t < g->node[j].l.ntop; t++)
			if (!strcmp(g->node[j].l.top[t], name))
				return j;
	return -1;
}

/* Does node j (after k) depend on node k's tops, through the nodes between? */
static int depends_on(const struct net_graph *g, int k, int j)
{
	/* names reached so far: node k's tops, then the tops of every node that reads one */
	int cap = 64, n = 0, found = 0;
	const char **reach = malloc((size_t)cap * sizeof *reach);
	if (!reach)
		return 0;
	for (int t = 0; t < g->node[k].l.ntop && n < cap; t++)
		reach[n++] = g->node[k].l.top[t];
	for (int i = k + 1; i <= j && !found; i++) {
		const struct net_layer *l = &g->node[i].l;
		int hit = 0;
		for (int b = 0; b < l->nbottom && !hit; b++)
			for (int r = 0; r < n && !hit; r++)
				hit = !strcmp(l->bottom[b], reach[r]);
		if (!hit)
			continue;
		if (i == j) {
			found = 1;
			break;
		}
		for (int t = 0; t < l->ntop; t++) {
			if (n == cap) {
				const char **bigger = realloc(reach, (size_t)cap * 2 * sizeof *reach);
				if (!bigger)
					goto done;
				reach = bigger;
				cap *= 2;
			}
			reach[n++] = l->top[t];
		}
	}
done:
	free(reach);
	return found;
}

/* The error for a bottom nobody made before node k: say why, as precisely as we can. */
static int missing_bottom(struct ic *x, int k, const char *name)
{
	struct net_graph *g = x->g;
	struct net_node *nd = &g->node[k];
	char s[80], other[100];
	sanitize(s, sizeof s, name, 60);
	int j = later_producer(g, k, name);
	if (j >= 0) {
		net_layer_label(&g->node[j].l, g->node[j].index, other, sizeof other);
		if (depends_on(g, k, j))
			return net_lerr(x, nd,
					"bottom '%s' is made by layer %s (line %d), which itself depends on this layer: "
					"the layers form a cycle",
					s, other, g->node[j].l.line);
		return net_lerr(x, nd,
				"bottom '%s' is made by layer %s (line %d), which comes later: layers run in the order "
				"written, so move it above",
				s, other, g->node[j].l.line);
	}
	for (int i = 0; i < x->def->nlayer; i++) {
		const struct net_layer *l = &x->def->layer[i];
		for (int t = 0; t < l->ntop; t++) {
			if (strcmp(l->top[t], name) != 0)
				continue;
			net_layer_label(l, i, other, sizeof other);
			if (l->type == NET_INPUT)
				return net_lerr(x, nd,
						"bottom '%s' comes from Input layer %s, which deepdesk replaces (as DIGITS "
						"does) by the dataset's images in \"data\" (and labels in \"label\")",
					    s, other);
			if (g->stage == NET_STAGE_DEPLOY && l->type == NET_DATA)
				return net_lerr(x, nd,
						"bottom '%s' comes from data layer %s, which the deploy stage does not have "
						"(it reads images only)%s",
						s, other,
						l->ntop > 1 && !strcmp(name, l->top[1])
						    ? ": exclude this layer from deploy with exclude { stage: \"deploy\" }"
						    : "");
			return net_lerr(x, nd, "bottom '%s' is made by layer %s (line %d), which is not in the %s stage", s,
					other, l->line, net_stage_name(g->stage));
		}
	}
	return net_lerr(x, nd, "bottom '%s' is not made by any layer", s);
}

static int check_input(const struct net_input *in, struct dd_err *err)
{
	if (in->c <= 0 || in->h <= 0 || in->w <= 0)
		return dd_err_set(err, DD_EINVAL,
				  "no input shape: give the dataset's image shape (channels x height x width)");
	if (in->c > 4096 || in->h > 65536 || in->w > 65536)
		return dd_err_set(err, DD_EINVAL, "input %dx%dx%d is too large (at most 4096 channels, 65536x65536)",
				  in->c, in->h, in->w);
	if (in->n < 0 || in->n > (1 << 20))
		return dd_err_set(err, DD_EINVAL, "batch size %d is out of range (1 to %d)", in->n, 1 << 20);
	if (in->classes < 0 || in->classes > (1 << 24))
		return dd_err_set(err, DD_EINVAL, "class count %d is out of range", in->classes);
	if (in->crop < 0 || (in->crop && (in->crop > in->h || in->crop > in->w)))
		return dd_err_set(err, DD_EINVAL,
				  "crop size %d does not fit the %dx%d images: choose a crop size of at most %d, or build "
				  "the dataset with larger images",
				  in->crop, in->h, in->w, in->h < in->w ? in->h : in->w);
	return DD_OK;
}

struct added {
	struct net_layer l;
	const char *top[2];
	struct net_shape shape;
};

int net_instantiate(const struct net *def, enum net_stage stage, const struct net_input *in,
		    struct net_graph **out, struct dd_err *err)
{
	struct ic x = { .def = def, .err = err };
	struct net_graph *g = NULL;
	int *pick = NULL, rc;
	*out = NULL;
	if ((rc = check_input(in, err)))
		return rc;
	if ((unsigned)stage > NET_STAGE_DEPLOY)
		return dd_err_set(err, DD_EINVAL, "unknown stage %d", (int)stage);
	int phase = stage == NET_STAGE_TRAIN ? NET_PHASE_TRAIN : NET_PHASE_TEST;
	const char *sname = net_stage_name(stage);

	g = calloc(1, sizeof *g);
	pick = malloc((size_t)(def->nlayer + 1) * sizeof *pick);
	struct added *add = calloc(1, sizeof *add);
	if (!g || !pick || !add) {
		free(add);
		rc = dd_err_set(err, DD_ENOMEM, "out of memory");
		goto fail;
	}
	g->added_ = add;
	g->stage = stage;
	g->name = def->name;
	g->in = *in;
	x.g = g;

	/* 1. the layers of this stage, less what DIGITS removes */
	int npick = 0, data = -1;
	for (int i = 0; i < def->nlayer; i++) {
		const struct net_layer *l = &def->layer[i];
		if (!layer_in_state(l, phase, sname) || l->type == NET_INPUT)
			continue;
		if (l->type == NET_ACCURACY && in->classes > 0 && l->accuracy.top_k > in->classes)
			continue;
		if (l->type == NET_DATA) {
			if (stage == NET_STAGE_DEPLOY)
				continue;
			if (data >= 0) {
				char a[100], b[100];
				net_layer_label(&def->layer[data], data, a, sizeof a);
				net_layer_label(l, i, b, sizeof b);
				rc = dd_err_set(err, DD_EINVAL,
						"%d:%d: layer %s: a second data layer in the %s stage (the first is %s): "
						"give each its stage with include { stage: \"train\" } or { stage: \"val\" }",
						l->line, l->col, b, sname, a);
				goto fail;
			}
			data = i;
		}
		pick[npick++] = i;
	}

	/* 2. the data: the stage's Data layer, or the one DIGITS adds */
	const char *data_top = NULL;
	int crop_def = 0;
	for (int i = 0; i < def->nlayer; i++)
		if (def->layer[i].type == NET_DATA) {
			if (!data_top)
				data_top = def->layer[i].top[0];
			if (!crop_def && def->layer[i].data.crop_size)
				crop_def = def->layer[i].data.crop_size;
		}
	int adding = data < 0;
	g->nnode = npick + adding;
	g->node = calloc((size_t)g->nnode, sizeof *g->node);
	if (!g->node) {
		rc = dd_err_set(err, DD_ENOMEM, "out of memory");
		goto fail;
	}
	int k = 0;
	if (adding) {
		struct net_layer *l = &add->l;
		l->name = "data";
		l->top = add->top;
		if (stage == NET_STAGE_DEPLOY) {
			l->type = NET_INPUT;
			add->top[0] = data_top ? data_top : "data";
			l->ntop = 1;
			l->input.shape = &add->shape;
			l->input.nshape = 1;
		} else {
			l->type = NET_DATA;
			add->top[0] = "data";
			add->top[1] = "label";
			l->ntop = 2;
			layer_defaults(l);
		}
		g->node[k].l = *l;
		g->node[k].index = -1;
		k++;
	}
	for (int i = 0; i < npick; i++, k++) {
		g->node[k].l = def->layer[pick[i]];
		g->node[k].index = pick[i];
	}

	/* the batch and the crop, as DIGITS settles them */
	struct net_node *d0 = &g->node[0];
	if (data >= 0)
		for (k = 0; k < g->nnode; k++)
			if (g->node[k].index == data)
				d0 = &g->node[k];
	int crop = in->crop;
	if (!crop) {
		int c0 = stage == NET_STAGE_DEPLOY ? crop_def : d0->l.data.crop_size;
		int m = in->h < in->w ? in->h : in->w;
		crop = c0 > m ? m : c0; /* the prototxt's crop is clamped to the image */
	}
	g->in.crop = crop;
	if (stage == NET_STAGE_DEPLOY) {
		g->in.n = in->n ? in->n : 1;
		add->shape.ndim = 4;
		add->shape.dim[0] = g->in.n;
		add->shape.dim[1] = in->c;
		add->shape.dim[2] = crop ? crop : in->h;
		add->shape.dim[3] = crop ? crop : in->w;
	} else {
		g->in.n = in->n ? in->n : d0->l.data.batch_size ? d0->l.data.batch_size : 16;
		d0->l.data.batch_size = g->in.n;
		d0->l.data.crop_size = crop;
	}

	/* 3. walk the layers: look up bottoms, create tops, infer shapes */
	int nio = 0, ntops = 0;
	for (k = 0; k < g->nnode; k++) {
		nio += g->node[k].l.nbottom + g->node[k].l.ntop;
		ntops += g->node[k].l.ntop;
	}
	unsigned cap = 16;
	while (cap < 2u * (unsigned)(ntops > g->nnode ? ntops : g->nnode) + 2u)
		cap *= 2;
	x.hmask = cap - 1;
	g->io_ = malloc((size_t)(nio ? nio : 1) * sizeof *g->io_);
	g->blob = calloc((size_t)(ntops ? ntops : 1), sizeof *g->blob);
	x.hash = malloc(cap * sizeof *x.hash);
	x.lhash = malloc(cap * sizeof *x.lhash);
	if (!g->io_ || !g->blob || !x.hash || !x.lhash) {
		rc = dd_err_set(err, DD_ENOMEM, "out of memory");
		goto fail;
	}
	memset(x.hash, 0xff, cap * sizeof *x.hash);
	memset(x.lhash, 0xff, cap * sizeof *x.lhash);
	int *io = g->io_;
	int has_softmax = 0, has_loss = 0;
	for (k = 0; k < g->nnode; k++) {
		struct net_node *nd = &g->node[k];
		struct net_layer *l = &nd->l;
		if (l->name[0]) {
			int other = layer_name_seen(&x, k);
			if (other >= 0) {
				if (g->node[other].index < 0)
					rc = net_lerr(&x, nd, "the name is already used by the data layer deepdesk adds for "
							  "this stage; rename it");
				else
					rc = net_lerr(&x, nd, "the name is already used by the layer at line %d",
						      g->node[other].l.line);
				goto fail;
			}
		}
		int *bot = io, *top = io + l->nbottom;
		io += l->nbottom + l->ntop;
		nd->bottom = bot;
		nd->top = top;
		for (int i = 0; i < l->nbottom; i++) {
			bot[i] = blob_find(&x, l->bottom[i]);
			if (bot[i] < 0) {
				rc = missing_bottom(&x, k, l->bottom[i]);
				goto fail;
			}
		}
		for (int i = 0; i < l->ntop; i++) {
			if (i < l->nbottom && !strcmp(l->top[i], l->bottom[i])) {
				top[i] = bot[i]; /* in place (parse_layer allowed it for this type) */
				nd->in_place = 1;
				continue;
			}
			int b = blob_find(&x, l->top[i]);
			if (b < 0) {
				for (int j = 0; j < i; j++)
					if (!strcmp(l->top[j], l->top[i]))
						b = top[j];
			}
			if (b >= 0) {
				char s[80], other[100];
				const struct net_node *p = &g->node[g->blob[b].producer];
				net_layer_label(&p->l, p->index, other, sizeof other);
				rc = net_lerr(&x, nd,
					      "top '%s' is already made by layer %s: each blob is made once (only an "
					      "element-wise layer may rewrite its bottom, in place)",
					  net_blob_name(&x, b, s, sizeof s), other);
				goto fail;
			}
			b = g->nblob++;
			g->blob[b].name = l->top[i];
			g->blob[b].producer = k;
			top[i] = b;
			blob_insert(&x, b);
		}
		if ((rc = infer(&x, nd)))
			goto fail;
		if (l->nparam > nd->nparam) {
			rc = net_lerr(&x, nd, "%d param { } blocks for %d parameter blob%s", l->nparam, nd->nparam,
				      nd->nparam == 1 ? "" : "s");
			goto fail;
		}
		nd->loss_weight = l->nloss_weight ? l->loss_weight[0] : net_layer_types[l->type].loss;
		has_softmax |= l->type == NET_SOFTMAX;
		has_loss |= net_layer_types[l->type].loss;
		g->params += nd->nparams;
		for (int p = 0; p < nd->nparam; p++)
			if (nd->param[p].learned)
				g->learned += nd->param[p].count;
	}
	for (int b = 0; b < g->nblob; b++)
		g->activations += g->blob[b].count;
	if ((stage == NET_STAGE_DEPLOY && !has_softmax) || (stage == NET_STAGE_TRAIN && !has_loss)) {
		/* name the layer whose output the missing layer should read: the last one with scores */
		char after[200] = "", lbl[100], top[80];
		for (k = g->nnode - 1; k >= 0; k--) {
			const struct net_node *nd = &g->node[k];
			if (nd->l.ntop > 0 && g->blob[nd->top[0]].shape.ndim >= 2 && nd->l.type != NET_DATA &&
			    nd->l.type != NET_INPUT && nd->l.type != NET_SOFTMAX) {
				net_layer_label(&nd->l, nd->index, lbl, sizeof lbl);
				snprintf(after, sizeof after, " after layer %s (bottom: \"%s\"%s)", lbl,
					 net_blob_name(&x, nd->top[0], top, sizeof top),
					 stage == NET_STAGE_TRAIN ? " bottom: \"label\"" : "");
				break;
			}
		}
		if (stage == NET_STAGE_DEPLOY)
			rc = dd_err_set(err, DD_EINVAL,
					"the deploy stage has no Softmax layer, which DIGITS requires to turn scores into "
					"probabilities: add one%s with include { stage: \"deploy\" }",
					after);
		else
			rc = dd_err_set(err, DD_EINVAL,
					"the train stage has no loss layer (SoftmaxWithLoss, EuclideanLoss), so there is nothing to learn: "
					"add a SoftmaxWithLoss layer%s",
					after);
		goto fail;
	}
	free(pick);
	free(x.hash);
	free(x.lhash);
	*out = g;
	return DD_OK;
fail:
	free(pick);
	free(x.hash);
	free(x.lhash);
	net_graph_free(g);
	return rc;
}

void net_graph_free(struct net_graph *g)
{
	if (!g)
		return;
	free(g->node);
	free(g->blob);
	free(g->io_);
	free(g->added_);
	free(g);
}

/* ---- reports ------------------------------------------------------------------------ */

/* 1234567 -> "1,234,567" */
static const char *thousands(int64_t v, char *buf, size_t n)
{
	char raw[32];
	snprintf(raw, sizeof raw, "%lld", (long long)(v < 0 ? -v : v));
	size_t len = strlen(raw), j = 0;
	if (v < 0 && j + 1 < n)
		buf[j++] = '-';
	for (size_t i = 0; i < len && j + 2 < n; i++) {
		if (i && (len - i) % 3 == 0)
			buf[j++] = ',';
		buf[j++] = raw[i];
	}
	buf[j] = 0;
	return buf;
}

int net_graph_print(const struct net_graph *g, FILE *f)
{
	int wn = 5, wt = 4, wb = 3, ws = 5;
	char sh[80], num[32], s[80];
	for (int k = 0; k < g->nnode; k++) {
		const struct net_node *nd = &g->node[k];
		char label[100];
		net_layer_label(&nd->l, nd->index, label, sizeof label);
		int n = (int)strlen(nd->l.name[0] ? nd->l.name : label);
		wn = n > wn ? n : wn;
		n = (int)strlen(net_layer_type_name(nd->l.type));
		wt = n > wt ? n : wt;
		for (int t = 0; t < nd->l.ntop; t++) {
			n = (int)strlen(g->blob[nd->top[t]].name);
			wb = n > wb ? n : wb;
			net_shape_str(&g->blob[nd->top[t]].shape, sh, sizeof sh);
			n = (int)strlen(sh);
			ws = n > ws ? n : ws;
		}
	}
	wn = wn > 60 ? 60 : wn;
	wb = wb > 60 ? 60 : wb;
	char in[64];
	if (g->in.crop)
		snprintf(in, sizeof in, "%dx%dx%d cropped to %dx%d", g->in.c, g->in.h, g->in.w, g->in.crop, g->in.crop);
	else
		snprintf(in, sizeof in, "%dx%dx%d", g->in.c, g->in.h, g->in.w);
	sanitize(s, sizeof s, g->name && g->name[0] ? g->name : "(unnamed)", 60);
	fprintf(f, "%s, %s stage: batch %d, input %s", s, net_stage_name(g->stage), g->in.n, in);
	if (g->in.classes)
		fprintf(f, ", %d classes", g->in.classes);
	fprintf(f, "\n\n%-*s  %-*s  %-*s  %-*s  %12s\n", wn, "layer", wt, "type", wb, "top", ws, "shape", "params");
	for (int k = 0; k < g->nnode; k++) {
		const struct net_node *nd = &g->node[k];
		char label[100];
		net_layer_label(&nd->l, nd->index, label, sizeof label);
		sanitize(s, sizeof s, nd->l.name[0] ? nd->l.name : label, 60);
		for (int t = 0; t < nd->l.ntop || t == 0; t++) {
			char b[80] = "";
			sh[0] = 0;
			if (t < nd->l.ntop) {
				sanitize(b, sizeof b, g->blob[nd->top[t]].name, 60);
				net_shape_str(&g->blob[nd->top[t]].shape, sh, sizeof sh);
			}
			if (t == 0)
				fprintf(f, "%-*s  %-*s  %-*s  %-*s  %12s\n", wn, s, wt, net_layer_type_name(nd->l.type), wb,
					b, ws, sh, thousands(nd->nparams, num, sizeof num));
			else
				fprintf(f, "%-*s  %-*s  %-*s  %s\n", wn, "", wt, "", wb, b, sh);
		}
	}
	char p[32], lr[32], act[32], mem[32];
	double bytes = (double)g->activations * 4.0;
	if (bytes < 1024.0 * 1024.0)
		snprintf(mem, sizeof mem, "%.1f KiB", bytes / 1024.0);
	else if (bytes < 1024.0 * 1024.0 * 1024.0)
		snprintf(mem, sizeof mem, "%.1f MiB", bytes / (1024.0 * 1024.0));
	else
		snprintf(mem, sizeof mem, "%.2f GiB", bytes / (1024.0 * 1024.0 * 1024.0));
	fprintf(f, "\n%d layers, %s parameters (%s learned), %s activation values per batch (%s as float)\n",
		g->nnode, thousands(g->params, p, sizeof p), thousands(g->learned, lr, sizeof lr),
		thousands(g->activations, act, sizeof act), mem);
	return ferror(f) ? dd_err_set(NULL, DD_EIO, "write") : DD_OK;
}

static cJSON *shape_json(const struct net_shape *s)
{
	cJSON *a = cJSON_CreateArray();
	for (int i = 0; a && i < s->ndim; i++) {
		cJSON *n = cJSON_CreateNumber((double)s->dim[i]);
		if (!n || !cJSON_AddItemToArray(a, n)) {
			cJSON_Delete(n);
			cJSON_Delete(a);
			return NULL;
		}
	}
	return a;
}

/* Add item to obj (array if name is NULL); on failure delete item and return 0. */
static int put(cJSON *obj, const char *name, cJSON *item)
{
	if (!item)
		return 0;
	if (name ? cJSON_AddItemToObject(obj, name, item) : cJSON_AddItemToArray(obj, item))
		return 1;
	cJSON_Delete(item);
	return 0;
}

static int node_json(const struct net_graph *g, const struct net_node *nd, cJSON *o)
{
	cJSON *bots, *tops, *params;
	if (!put(o, "name", cJSON_CreateString(nd->l.name)) ||
	    !put(o, "type", cJSON_CreateString(net_layer_type_name(nd->l.type))) ||
	    !put(o, "line", cJSON_CreateNumber(nd->l.line)) || !put(o, "col", cJSON_CreateNumber(nd->l.col)) ||
	    !put(o, "in_place", cJSON_CreateBool(nd->in_place)) ||
	    !put(o, "bottoms", bots = cJSON_CreateArray()) || !put(o, "tops", tops = cJSON_CreateArray()) ||
	    !put(o, "params", params = cJSON_CreateArray()))
		return 0;
	for (int i = 0; i < nd->l.nbottom; i++)
		if (!put(bots, NULL, cJSON_CreateString(g->blob[nd->bottom[i]].name)))
			return 0;
	for (int i = 0; i < nd->l.ntop; i++) {
		cJSON *t = cJSON_CreateObject();
		if (!put(tops, NULL, t) || !put(t, "name", cJSON_CreateString(g->blob[nd->top[i]].name)) ||
		    !put(t, "shape", shape_json(&g->blob[nd->top[i]].shape)))
			return 0;
	}
	for (int i = 0; i < nd->nparam; i++) {
		cJSON *p = cJSON_CreateObject();
		if (!put(params, NULL, p) || !put(p, "role", cJSON_CreateString(nd->param[i].role)) ||
		    !put(p, "shape", shape_json(&nd->param[i].shape)) ||
		    !put(p, "count", cJSON_CreateNumber((double)nd->param[i].count)) ||
		    !put(p, "learned", cJSON_CreateBool(nd->param[i].learned)))
			return 0;
	}
	return put(o, "param_count", cJSON_CreateNumber((double)nd->nparams));
}

cJSON *net_graph_json(const struct net_graph *g)
{
	cJSON *root = cJSON_CreateObject(), *in, *layers;
	if (!root)
		return NULL;
	int ok = put(root, "name", cJSON_CreateString(g->name ? g->name : "")) &&
		 put(root, "stage", cJSON_CreateString(net_stage_name(g->stage))) &&
		 put(root, "input", in = cJSON_CreateObject()) && put(root, "layers", layers = cJSON_CreateArray());
	ok = ok && put(in, "n", cJSON_CreateNumber(g->in.n)) && put(in, "c", cJSON_CreateNumber(g->in.c)) &&
	     put(in, "h", cJSON_CreateNumber(g->in.h)) && put(in, "w", cJSON_CreateNumber(g->in.w)) &&
	     put(in, "crop", cJSON_CreateNumber(g->in.crop)) && put(in, "classes", cJSON_CreateNumber(g->in.classes));
	for (int k = 0; ok && k < g->nnode; k++) {
		cJSON *o = cJSON_CreateObject();
		ok = put(layers, NULL, o) && node_json(g, &g->node[k], o);
	}
	ok = ok && put(root, "params", cJSON_CreateNumber((double)g->params)) &&
	     put(root, "learned", cJSON_CreateNumber((double)g->learned)) &&
	     put(root, "activations", cJSON_CreateNumber((double)g->activations));
	if (!ok) {
		cJSON_Delete(root);
		return NULL;
	}
	return root;
}

/* ---- the standard networks ---------------------------------------------------------- */

/* Generated at build time from networks/standard/NAME.prototxt by tools/embed. */
extern const char net_std_lenet[], net_std_alexnet[], net_std_googlenet[], net_std_resnet_small[];

const struct net_standard net_standards[] = {
	{ "lenet", "LeNet", "DIGITS' LeNet for 28x28 grayscale images (MNIST-like)", 1, 28, 28, 10, net_std_lenet },
	{ "alexnet", "AlexNet", "DIGITS' AlexNet for 256x256 colour images, cropped to 227", 3, 256, 256, 1000,
	  net_std_alexnet },
	{ "googlenet", "GoogLeNet", "DIGITS' GoogLeNet (Inception v1) for 256x256 colour images, cropped to 224", 3,
	  256, 256, 1000, net_std_googlenet },
	{ "resnet_small", "ResNet-20", "a small ResNet for 32x32 colour images (CIFAR-like); fast on a CPU", 3, 32, 32,
	  10, net_std_resnet_small },
	{ NULL, NULL, NULL, 0, 0, 0, 0, NULL },
};

const struct net_standard *net_standard_find(const char *name)
{
	for (int i = 0; name && net_standards[i].name; i++)
		if (!strcmp(net_standards[i].name, name))
			return &net_standards[i];
	return NULL;
}

const char *net_standard_text(const char *name)
{
	const struct net_standard *s = net_standard_find(name);
	return s ? s->text : NULL;
}
