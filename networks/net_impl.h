/* net_impl.h — what networks/net.c and networks/layers.c share, and nothing else
 * includes: the parse context, the field descriptors a parameter message is made of,
 * the instantiation context, and struct layer_type, the row each layer type has in
 * net_layer_types[] (layers.c).
 *
 * net.c owns the machinery: the readers and the one loop that reads a message by its
 * descriptors (parse_msg), the layer and net loops, instantiation.  layers.c owns
 * what is particular to a type: its messages' descriptors and cross-field checks,
 * its shape rule, its row.  Errors follow net.h's rule: a sentence that starts
 * "LINE:COL: layer 'x': " (net_perr at parse time, net_lerr at instantiation). */
#ifndef DD_NET_IMPL_H
#define DD_NET_IMPL_H

#include <stddef.h>
#include <stdint.h>

#include "net.h"
#include "prototxt.h"

#define MAX_KERNEL 65535 /* kernel, stride, pad, crop: at most this */

/* ---- parsing ------------------------------------------------------------------ */

struct pc {
	struct dd_err *err;
	struct ptx_doc *doc;
	char prefix[128];  /* "layer 'conv1': " or "" at the top level */
	const char *where; /* the message being read: "convolution_param", "" for a layer */
};

/* "LINE:COL: <prefix><message>" into c->err; returns DD_EINVAL. */
int net_perr(struct pc *c, int line, int col, const char *fmt, ...) __attribute__((format(printf, 4, 5)));
/* How many fields of m are called name. */
int net_count_of(const struct ptx_msg *m, const char *name);

/* Caffe's per-axis values: `rep` (repeated: one value for both axes or h then w)
 * or `name_h`/`name_w`; the two ways exclude each other. */
struct axes {
	int v[2], n;       /* from the repeated field */
	int h, w, has_h, has_w;
	const struct ptx_field *first; /* for messages */
};

/* Every *_param message (and the filler, rule, param and shape messages inside a
 * layer) is a table of field descriptors read by parse_msg: the descriptor says the
 * field's kind, where it goes in the message's struct, its bounds and its default;
 * a message's check function holds the rules between its fields.  The error texts
 * are the readers' (get_int, get_float, ...), so every message words them alike. */

enum fkind {
	F_INT,     /* int at off, within [min, max] */
	F_FLOAT,   /* float at off, within [min, max] */
	F_BOOL,    /* int 0 or 1 at off */
	F_ENUM,    /* int at off: the index in names[] (Caffe's numbering, NULL: unsupported) */
	F_NAMED,   /* a string in quotes that must be one of names[]: its index at off */
	F_STRING,  /* const char * at off */
	F_REFUSED, /* never accepted: `only` is the message */
	F_FLOATS,  /* repeated float: const float * at off, the int count at cnt */
	F_STRINGS, /* repeated string: const char *const * at off, count at cnt; read after the rest */
	F_DIMS,    /* repeated integer: int64_t[NET_MAX_DIMS] at off, the int count at cnt */
	F_MSG,     /* a sub-message `sub` into the struct at off */
	F_MSGS,    /* repeated sub-message: an array of sub->size bytes each at off, count at cnt */
	F_AXES,    /* Caffe's per-axis ints: `name` (or base_h and base_w) into ax[slot];
		    * off and cnt are where the h and w values go, def their default */
};

#define NOWHERE SIZE_MAX /* off of a field that is read and checked but not kept */

/* F_ENUM and F_NAMED values land in enum members through an int */
_Static_assert(sizeof(enum net_filler_type) == sizeof(int) && sizeof(enum net_variance_norm) == sizeof(int) &&
		       sizeof(enum net_pool_method) == sizeof(int) && sizeof(enum net_eltwise_op) == sizeof(int),
	       "an enum member is as wide as an int");

struct field {
	const char *name;
	enum fkind kind;
	size_t off;               /* into the message's struct, or NOWHERE */
	double min, max;          /* INT, FLOAT, FLOATS, DIMS, AXES */
	double def;               /* INT, FLOAT, BOOL, ENUM, NAMED, AXES: before it is read */
	const char *const *names; /* ENUM, NAMED */
	int nnames;
	const char *noun;         /* NAMED: 'filler "x" is not supported' */
	size_t has;               /* 0, or an int set to 1 when the field is given */
	size_t cnt;               /* FLOATS, STRINGS, DIMS, MSGS: the int count; AXES: w */
	int want;                 /* INT, BOOL with only: the one value accepted */
	const char *only;         /* INT, BOOL: the message when the value is not want; REFUSED */
	int (*valid)(double v);   /* INT, FLOAT: a rule beyond the bounds, or NULL ... */
	const char *expect;       /* ... and what bad_value says the value should be */
	const struct pmsg *sub;   /* MSG, MSGS */
	const char *base;         /* AXES: "kernel" for kernel_h and kernel_w; NULL: none */
	int slot, repeated;       /* AXES: ax[slot]; repeated: name holds up to two values */
};

struct pmsg {
	const char *name;         /* "convolution_param" */
	size_t size;              /* of its struct (for F_MSGS) */
	const struct field *field;
	int nfield;
	/* optional: the rules between fields, once all are read (ax: the F_AXES values) */
	int (*check)(struct pc *c, const struct ptx_msg *m, void *p, const struct axes *ax);
	/* optional: defaults the fields' own do not give */
	void (*init)(void *p);
};

/* The messages that are not a layer type's own, for net.c's layer and net loops. */
extern const struct pmsg net_rule_msg, net_param_spec_msg, net_shape_msg;

/* ---- instantiation -------------------------------------------------------------- */

struct ic {
	const struct net *def;
	struct net_graph *g;
	struct dd_err *err;
	int *hash; /* blob name -> blob index; -1 empty */
	unsigned hmask;
	int *lhash; /* layer name -> node index */
};

/* "LINE:COL: layer 'x': <message>" (or "layer 'x' (added by deepdesk): ") into
 * x->err; returns DD_EINVAL. */
int net_lerr(struct ic *x, const struct net_node *nd, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
/* "1x3x32x32", or "scalar". */
void net_shape_str(const struct net_shape *s, char *buf, size_t n);
/* Blob b's name, made safe for a message, in buf. */
const char *net_blob_name(const struct ic *x, int b, char *buf, size_t n);
/* Give top i of nd its shape; an error when it would hold more than INT32_MAX values. */
int net_set_top(struct ic *x, struct net_node *nd, int i, int ndim, const int64_t *dim);
/* Append a parameter blob to nd (stat: BatchNorm's statistics, never learned), with
 * the lr_mult and decay_mult of the layer's param { } at its index. */
int net_add_param(struct ic *x, struct net_node *nd, const char *role, int ndim, const int64_t *dim, int stat);

/* ---- the rows ------------------------------------------------------------------------ */

/* Everything deepdesk knows of a layer type, but its kernels (ref.c and each backend)
 * and its descriptor in a backend (graph.c).  Adding a type is a row here, its
 * enum value in net.h, its kernels and its tests. */
struct layer_type {
	struct net_layer_type_info info; /* what the rest of the engine asks (net.h) */
	const struct pmsg *msg[2];       /* the *_param messages it reads; NULL: fewer */
	const char *required;            /* NULL, or the error when msg[0] is not given */
	int loss;                        /* its top may carry a loss_weight (1 unless given) */
	/* optional: a rule between its params and its bottoms or tops, once all are read */
	int (*check)(struct pc *c, const struct ptx_field *lf, const struct net_layer *l);
	int axes_min, axes_max;          /* how many axes bottom 0 must have ... */
	const char *axes_what;           /* ... said as "needs ...; bottom 'x' is 2x3"; NULL: any */
	int (*infer)(struct ic *x, struct net_node *nd); /* its shape rule */
};

/* One row per enum net_layer_type value (layers.c). */
extern const struct layer_type net_layer_types[]; /* sized where defined, for its _Static_assert */

#endif
