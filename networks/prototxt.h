/* prototxt.h — protobuf TEXT format, as Caffe's .prototxt files use it, read into a
 * generic tree that knows nothing of Caffe (networks/net.c gives it meaning).
 *
 * What is accepted (protobuf's own text-format grammar, the parts Caffe files use):
 *   name: "x"                 a scalar field; ':' is required before a scalar
 *   layer { ... }             a message; ':' before '{' is optional; '<' '>' work too
 *   dim: [1, 3, 224, 224]     a list: one field per element, all with the same name
 *   numbers                   12, -1, 0x1F, 017 (octal), 1.5, .5, 1e-4, 2.5f
 *   strings                   "..." or '...', C escapes (\n \t \\ \" \' \x41 \101 ...),
 *                             adjacent strings concatenated ("a" "b" is "ab")
 *   identifiers               MAX, TRAIN, true, inf, nan, -inf
 *   # comments                to the end of the line
 *   separators                ',' or ';' after a field are tolerated
 *
 * Limits: PTX_MAX_INPUT bytes of input, messages nested PTX_MAX_DEPTH deep,
 * PTX_MAX_FIELDS fields in all.  Any input, however broken, gives either a tree or
 * an error "LINE:COL: what was expected"; nothing crashes (fuzzed by
 * tests/fuzz/fuzz_prototxt.c).  Lines and columns are 1-based; a column counts
 * characters (UTF-8 sequences count once, a tab counts once), as an editor does.
 *
 * The whole tree lives in one arena owned by the `struct ptx_doc`: every pointer
 * below stays valid until ptx_free(). */
#ifndef DD_PROTOTXT_H
#define DD_PROTOTXT_H

#include <stddef.h>
#include <stdint.h>

#include "../common/err.h"

#define PTX_MAX_INPUT (4u << 20) /* bytes */
#define PTX_MAX_DEPTH 64         /* messages within messages */
#define PTX_MAX_FIELDS (1 << 20) /* in the whole document */

enum ptx_kind {
	PTX_NUMBER,  /* 12, -1.5e3, -inf: see num, is_int, int_ok, i */
	PTX_STRING,  /* "...": text (unescaped, NUL-terminated, may hold NULs), len */
	PTX_IDENT,   /* MAX, true, inf: text, len */
	PTX_MESSAGE  /* { ... }: msg */
};

struct ptx_msg;

/* One field occurrence.  A repeated field is simply several fields of one name. */
struct ptx_field {
	const char *name;
	int line, col;   /* where the name starts */
	int vline, vcol; /* where the value starts (its '{' for a message) */
	enum ptx_kind kind;
	const char *text; /* STRING, IDENT: the value; NUMBER: the token as written */
	size_t len;       /* bytes in text */
	double num;       /* NUMBER: the value (inf when too big for a double) */
	int is_int;       /* NUMBER written as an integer (no '.', exponent or 'f') */
	int int_ok;       /* is_int and it fits an int64_t: then i holds it */
	int64_t i;
	const struct ptx_msg *msg; /* MESSAGE */
};

/* A message: its fields in the order written. */
struct ptx_msg {
	const struct ptx_field *field;
	int nfield;
	int line, col; /* of its '{' (1:1 for the document itself) */
};

struct ptx_doc; /* opaque: the arena and the root message */

/* Parse text[0..len) (need not be NUL-terminated).  On success *out holds the
 * document; caller frees with ptx_free().  On failure *out is NULL and err says
 * "LINE:COL: ..." (DD_EINVAL), or DD_ETOOBIG / DD_ENOMEM. */
int ptx_parse(const char *text, size_t len, struct ptx_doc **out, struct dd_err *err);

/* The document's top-level message; borrowed, valid until ptx_free(). */
const struct ptx_msg *ptx_root(const struct ptx_doc *doc);

/* n bytes (8-aligned, zeroed) that live as long as the document, for structures
 * built from the tree (networks/net.c keeps its layers there).  NULL when out of
 * memory. */
void *ptx_alloc(struct ptx_doc *doc, size_t n);

/* Free a document and everything ptx_alloc'd in it.  NULL is fine. */
void ptx_free(struct ptx_doc *doc);

/* "a number", "a string", "an identifier", "a message": for error messages. */
const char *ptx_kind_name(enum ptx_kind kind);

#endif
