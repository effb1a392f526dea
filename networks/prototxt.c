/* prototxt.c — protobuf text format into a generic tree (see prototxt.h).
 *
 * A hand-written lexer and a recursive-descent parser with one token of lookahead.
 * Recursion is bounded by PTX_MAX_DEPTH, so no input can exhaust the stack.
 *
 * Memory: everything the tree holds is carved from the document's arena (a list of
 * chunks freed together by ptx_free).  While a message is being parsed its fields
 * collect in a growable vector, one per nesting level and reused, and are copied
 * into the arena when the message closes; so a failed parse leaves nothing behind
 * but the arena, which the one exit path frees. */
#include "prototxt.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- arena ------------------------------------------------------------------ */

struct chunk {
	struct chunk *next;
	size_t used, cap;
	unsigned char data[]; /* offset 24: 8-aligned */
};

struct ptx_doc {
	struct chunk *chunks;
	struct ptx_msg root;
};

#define CHUNK_MIN (64u * 1024u)

void *ptx_alloc(struct ptx_doc *doc, size_t n)
{
	n = (n + 7u) & ~(size_t)7u;
	if (n == 0)
		n = 8;
	struct chunk *c = doc->chunks;
	if (!c || c->cap - c->used < n) {
		size_t cap = n > CHUNK_MIN ? n : CHUNK_MIN;
		c = malloc(sizeof *c + cap);
		if (!c)
			return NULL;
		c->used = 0;
		c->cap = cap;
		c->next = doc->chunks;
		doc->chunks = c;
	}
	void *p = c->data + c->used;
	c->used += n;
	memset(p, 0, n);
	return p;
}

void ptx_free(struct ptx_doc *doc)
{
	if (!doc)
		return;
	struct chunk *c = doc->chunks;
	while (c) {
		struct chunk *next = c->next;
		free(c);
		c = next;
	}
	free(doc);
}

const struct ptx_msg *ptx_root(const struct ptx_doc *doc)
{
	return &doc->root;
}

const char *ptx_kind_name(enum ptx_kind kind)
{
	switch (kind) {
	case PTX_NUMBER: return "a number";
	case PTX_STRING: return "a string";
	case PTX_IDENT: return "an identifier";
	case PTX_MESSAGE: return "a message";
	}
	return "a value";
}

/* ---- lexer ------------------------------------------------------------------ */

enum tok_kind { T_EOF, T_IDENT, T_NUMBER, T_STRING, T_SYM };

struct token {
	enum tok_kind kind;
	const char *start; /* raw bytes in the input */
	size_t len;
	int line, col;
	char sym;      /* T_SYM */
	size_t slen;   /* T_STRING: bytes once unescaped */
	int is_int;    /* T_NUMBER */
	int overflow;  /* integer beyond uint64 */
	uint64_t u;    /* integer magnitude */
	double num;    /* value */
};

struct vec {
	struct ptx_field *f;
	int n, cap;
};

struct parser {
	const char *p, *end;
	int line, col; /* of *p */
	struct token tok; /* the lookahead */
	struct ptx_doc *doc;
	struct dd_err *err;
	struct vec vec[PTX_MAX_DEPTH + 1];
	int nfields;
	char *sbuf; /* scratch for concatenating adjacent strings */
	size_t scap;
};

static int is_alpha(int c)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_';
}
static int is_digit(int c)
{
	return c >= '0' && c <= '9';
}
static int is_hex(int c)
{
	return is_digit(c) || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F');
}
static int hex_val(int c)
{
	return is_digit(c) ? c - '0' : (c | 0x20) - 'a' + 10;
}

/* Step over one byte, keeping line and column (columns count UTF-8 characters:
 * continuation bytes do not move the column). */
static void adv(struct parser *ps)
{
	unsigned char c = (unsigned char)*ps->p++;
	if (c == '\n') {
		ps->line++;
		ps->col = 1;
	} else if ((c & 0xC0) != 0x80) {
		ps->col++;
	}
}

static int peekc(const struct parser *ps, size_t ahead)
{
	return (size_t)(ps->end - ps->p) > ahead ? (unsigned char)ps->p[ahead] : -1;
}

static int fail_at(struct parser *ps, int line, int col, const char *what)
{
	return dd_err_set(ps->err, DD_EINVAL, "%d:%d: %s", line, col, what);
}

/* How a token reads in a message: 'x', "end of input", a string... */
static void describe(const struct token *t, char *buf, size_t n)
{
	switch (t->kind) {
	case T_EOF: snprintf(buf, n, "the end of the input"); break;
	case T_SYM: snprintf(buf, n, "'%c'", t->sym); break;
	case T_STRING: snprintf(buf, n, "a string"); break;
	default: snprintf(buf, n, "'%.*s'", (int)(t->len > 40 ? 40 : t->len), t->start); break;
	}
}

/* Scan a quoted string at ps->p, checking its escapes; the decoded length goes to
 * t->slen.  decode_string() later trusts what this accepted. */
static int lex_string(struct parser *ps, struct token *t)
{
	char q = *ps->p;
	adv(ps);
	size_t n = 0;
	for (;;) {
		int c = peekc(ps, 0);
		if (c < 0)
			return fail_at(ps, t->line, t->col,
				       q == '"' ? "unterminated string: the input ends before its closing \""
						: "unterminated string: the input ends before its closing '");
		if (c == '\n')
			return fail_at(ps, t->line, t->col,
				       "unterminated string: a string must close on the line it opens");
		if (c == q) {
			adv(ps);
			break;
		}
		if (c != '\\') {
			adv(ps);
			n++;
			continue;
		}
		int eline = ps->line, ecol = ps->col;
		adv(ps);
		c = peekc(ps, 0);
		if (c < 0)
			return fail_at(ps, t->line, t->col,
				       "unterminated string: the input ends in an escape");
		if (c != 0 && strchr("abfnrtv\\?'\"", c)) {
			adv(ps);
			n++;
		} else if (c >= '0' && c <= '7') {
			int v = 0, k = 0;
			while (k < 3 && (c = peekc(ps, 0)) >= '0' && c <= '7') {
				v = v * 8 + (c - '0');
				adv(ps);
				k++;
			}
			if (v > 255)
				return fail_at(ps, eline, ecol, "octal escape above \\377 in a string");
			n++;
		} else if (c == 'x' || c == 'X') {
			adv(ps);
			int k = 0;
			while (k < 2 && is_hex(peekc(ps, 0))) {
				adv(ps);
				k++;
			}
			if (k == 0)
				return fail_at(ps, eline, ecol, "\\x in a string needs a hex digit after it");
			n++;
		} else if (c == 'u' || c == 'U') {
			int want = c == 'u' ? 4 : 8;
			uint32_t v = 0;
			adv(ps);
			for (int k = 0; k < want; k++) {
				if (!is_hex(peekc(ps, 0)))
					return fail_at(ps, eline, ecol,
						       want == 4 ? "\\u in a string needs 4 hex digits"
								 : "\\U in a string needs 8 hex digits");
				v = v * 16 + (uint32_t)hex_val(peekc(ps, 0));
				adv(ps);
			}
			if (v > 0x10FFFF || (v >= 0xD800 && v <= 0xDFFF))
				return fail_at(ps, eline, ecol, "\\u escape is not a Unicode character");
			n += v < 0x80 ? 1 : v < 0x800 ? 2 : v < 0x10000 ? 3 : 4;
		} else {
			char msg[80];
			if (c > 32 && c < 127)
				snprintf(msg, sizeof msg, "unknown escape '\\%c' in a string", c);
			else
				snprintf(msg, sizeof msg, "unknown escape in a string (byte 0x%02X after '\\')", c);
			return fail_at(ps, eline, ecol, msg);
		}
	}
	t->kind = T_STRING;
	t->len = (size_t)(ps->p - t->start);
	t->slen = n;
	return DD_OK;
}

/* Unescape a string token lex_string accepted; writes t->slen bytes at out. */
static void decode_string(const struct token *t, char *out)
{
	const char *s = t->start + 1, *e = t->start + t->len - 1;
	while (s < e) {
		if (*s != '\\') {
			*out++ = *s++;
			continue;
		}
		s++;
		char c = *s;
		switch (c) {
		case 'a': *out++ = '\a'; s++; break;
		case 'b': *out++ = '\b'; s++; break;
		case 'f': *out++ = '\f'; s++; break;
		case 'n': *out++ = '\n'; s++; break;
		case 'r': *out++ = '\r'; s++; break;
		case 't': *out++ = '\t'; s++; break;
		case 'v': *out++ = '\v'; s++; break;
		case 'x':
		case 'X': {
			int v = 0, k = 0;
			s++;
			while (k < 2 && s < e && is_hex((unsigned char)*s)) {
				v = v * 16 + hex_val((unsigned char)*s++);
				k++;
			}
			*out++ = (char)v;
			break;
		}
		case 'u':
		case 'U': {
			int want = c == 'u' ? 4 : 8;
			uint32_t v = 0;
			s++;
			for (int k = 0; k < want; k++)
				v = v * 16 + (uint32_t)hex_val((unsigned char)*s++);
			if (v < 0x80) {
				*out++ = (char)v;
			} else if (v < 0x800) {
				*out++ = (char)(0xC0 | (v >> 6));
				*out++ = (char)(0x80 | (v & 0x3F));
			} else if (v < 0x10000) {
				*out++ = (char)(0xE0 | (v >> 12));
				*out++ = (char)(0x80 | ((v >> 6) & 0x3F));
				*out++ = (char)(0x80 | (v & 0x3F));
			} else {
				*out++ = (char)(0xF0 | (v >> 18));
				*out++ = (char)(0x80 | ((v >> 12) & 0x3F));
				*out++ = (char)(0x80 | ((v >> 6) & 0x3F));
				*out++ = (char)(0x80 | (v & 0x3F));
			}
			break;
		}
		default:
			if (c >= '0' && c <= '7') {
				int v = 0, k = 0;
				while (k < 3 && s < e && *s >= '0' && *s <= '7') {
					v = v * 8 + (*s++ - '0');
					k++;
				}
				*out++ = (char)v;
			} else { /* \\ \? \' \" */
				*out++ = c;
				s++;
			}
		}
	}
}

#define MAX_NUMBER_LEN 400

/* A number token, as protobuf's tokenizer reads one: decimal, 0x hex, 0-led octal
 * integers; decimals with '.', an exponent or an 'f' suffix are floats.  A letter
 * or digit straight after it ("5x5") makes it invalid. */
static int lex_number(struct parser *ps, struct token *t)
{
	const char *s = ps->p;
	int is_float = 0, base = 10;
	if (s[0] == '0' && peekc(ps, 1) >= 0 && (s[1] == 'x' || s[1] == 'X')) {
		base = 16;
		adv(ps);
		adv(ps);
		if (!is_hex(peekc(ps, 0)))
			return fail_at(ps, t->line, t->col, "invalid number: 0x needs hex digits after it");
		while (is_hex(peekc(ps, 0)))
			adv(ps);
	} else {
		while (is_digit(peekc(ps, 0)))
			adv(ps);
		if (peekc(ps, 0) == '.') {
			is_float = 1;
			adv(ps);
			while (is_digit(peekc(ps, 0)))
				adv(ps);
		}
		int c = peekc(ps, 0);
		if (c == 'e' || c == 'E') {
			is_float = 1;
			adv(ps);
			c = peekc(ps, 0);
			if (c == '+' || c == '-')
				adv(ps);
			if (!is_digit(peekc(ps, 0)))
				return fail_at(ps, t->line, t->col,
					       "invalid number: the exponent needs digits after 'e'");
			while (is_digit(peekc(ps, 0)))
				adv(ps);
		}
		c = peekc(ps, 0);
		if (c == 'f' || c == 'F') {
			is_float = 1;
			adv(ps);
		}
		if (!is_float && s[0] == '0' && ps->p - s > 1)
			base = 8;
	}
	int c = peekc(ps, 0);
	if (is_alpha(c) || is_digit(c) || c == '.') {
		while (is_alpha(peekc(ps, 0)) || is_digit(peekc(ps, 0)) || peekc(ps, 0) == '.')
			adv(ps);
		char msg[120];
		int n = (int)(ps->p - s);
		snprintf(msg, sizeof msg, "invalid number '%.*s'%s", n > 40 ? 40 : n, s,
			 n > 40 ? "..." : "");
		return fail_at(ps, t->line, t->col, msg);
	}
	size_t len = (size_t)(ps->p - s);
	if (len > MAX_NUMBER_LEN)
		return fail_at(ps, t->line, t->col, "number too long (over 400 characters)");
	t->kind = T_NUMBER;
	t->len = len;
	t->is_int = !is_float;
	if (!is_float) {
		uint64_t u = 0;
		int over = 0;
		const char *d = s + (base == 16 ? 2 : base == 8 ? 1 : 0);
		for (; d < ps->p; d++) {
			int v = hex_val((unsigned char)*d);
			if (v >= base)
				return fail_at(ps, t->line, t->col,
					       "invalid number: a number that starts with 0 is octal (digits 0-7)");
			if (u > (UINT64_MAX - (uint64_t)v) / (uint64_t)base)
				over = 1;
			else
				u = u * (uint64_t)base + (uint64_t)v;
		}
		t->u = u;
		t->overflow = over;
		if (over) { /* keep an approximate value for float fields */
			char buf[MAX_NUMBER_LEN + 1];
			memcpy(buf, s, len);
			buf[len] = 0;
			t->num = base == 10 ? strtod(buf, NULL) : HUGE_VAL;
		} else {
			t->num = (double)u;
		}
	} else {
		char buf[MAX_NUMBER_LEN + 1];
		size_t n = len;
		if (s[n - 1] == 'f' || s[n - 1] == 'F')
			n--;
		memcpy(buf, s, n);
		buf[n] = 0;
		t->num = strtod(buf, NULL); /* overflow gives inf, underflow 0: both fine */
	}
	return DD_OK;
}

/* Read the next token into ps->tok, skipping blanks and comments. */
static int lex(struct parser *ps)
{
	struct token *t = &ps->tok;
	for (;;) {
		int c = peekc(ps, 0);
		if (c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f') {
			adv(ps);
		} else if (c == '#') {
			while (peekc(ps, 0) >= 0 && peekc(ps, 0) != '\n')
				adv(ps);
		} else {
			break;
		}
	}
	memset(t, 0, sizeof *t);
	t->start = ps->p;
	t->line = ps->line;
	t->col = ps->col;
	int c = peekc(ps, 0);
	if (c < 0) {
		t->kind = T_EOF;
		return DD_OK;
	}
	if (is_alpha(c)) {
		while (is_alpha(peekc(ps, 0)) || is_digit(peekc(ps, 0)))
			adv(ps);
		t->kind = T_IDENT;
		t->len = (size_t)(ps->p - t->start);
		return DD_OK;
	}
	if (is_digit(c) || (c == '.' && is_digit(peekc(ps, 1))))
		return lex_number(ps, t);
	if (c == '"' || c == '\'')
		return lex_string(ps, t);
	if (c != 0 && strchr("{}<>[]:,;-", c)) { /* strchr would find the NUL too */
		adv(ps);
		t->kind = T_SYM;
		t->sym = (char)c;
		t->len = 1;
		return DD_OK;
	}
	char msg[80];
	if (c > 32 && c < 127)
		snprintf(msg, sizeof msg, "unexpected character '%c'", c);
	else
		snprintf(msg, sizeof msg, "unexpected byte 0x%02X", c);
	return fail_at(ps, t->line, t->col, msg);
}

/* ---- parser ------------------------------------------------------------------ */

static int is_sym(const struct token *t, char c)
{
	return t->kind == T_SYM && t->sym == c;
}

static int nomem(struct parser *ps)
{
	return dd_err_set(ps->err, DD_ENOMEM, "out of memory while reading the network description");
}

static char *arena_str(struct parser *ps, const char *s, size_t n)
{
	char *p = ptx_alloc(ps->doc, n + 1);
	if (p)
		memcpy(p, s, n);
	return p;
}

/* Append a zeroed field to the vector of nesting level `depth`; *idx is its index
 * (the vector may move while a message value is parsed, so callers keep the index,
 * not a pointer). */
static int push_field(struct parser *ps, int depth, const struct token *name, int *idx)
{
	struct vec *v = &ps->vec[depth];
	if (ps->nfields >= PTX_MAX_FIELDS)
		return dd_err_set(ps->err, DD_ETOOBIG, "%d:%d: more than %d fields in one network description",
				  name->line, name->col, PTX_MAX_FIELDS);
	if (v->n == v->cap) {
		int cap = v->cap ? v->cap * 2 : 16;
		struct ptx_field *f = realloc(v->f, (size_t)cap * sizeof *f);
		if (!f)
			return nomem(ps);
		v->f = f;
		v->cap = cap;
	}
	*idx = v->n++;
	memset(&v->f[*idx], 0, sizeof v->f[*idx]);
	ps->nfields++;
	return DD_OK;
}

static int parse_body(struct parser *ps, int depth, char closer, struct ptx_msg *out);

static int ident_is(const struct token *t, const char *word)
{
	size_t n = strlen(word);
	if (t->len != n)
		return 0;
	for (size_t i = 0; i < n; i++)
		if ((t->start[i] | 0x20) != word[i])
			return 0;
	return 1;
}

/* A string value: one or more adjacent string tokens, concatenated. */
static int parse_strings(struct parser *ps, struct ptx_field *f)
{
	size_t n = 0;
	int rc;
	while (ps->tok.kind == T_STRING) {
		size_t need = n + ps->tok.slen + 1;
		if (need > ps->scap) {
			size_t cap = need < 256 ? 256 : need * 2;
			char *b = realloc(ps->sbuf, cap);
			if (!b)
				return nomem(ps);
			ps->sbuf = b;
			ps->scap = cap;
		}
		decode_string(&ps->tok, ps->sbuf + n);
		n += ps->tok.slen;
		if ((rc = lex(ps)) != DD_OK)
			return rc;
	}
	char *s = arena_str(ps, ps->sbuf ? ps->sbuf : "", n);
	if (!s)
		return nomem(ps);
	f->kind = PTX_STRING;
	f->text = s;
	f->len = n;
	return DD_OK;
}

/* One value at the lookahead into *f (whose name is set): a scalar or a message. */
static int parse_value(struct parser *ps, struct ptx_field *f, int depth)
{
	struct token *t = &ps->tok;
	int rc;
	f->vline = t->line;
	f->vcol = t->col;
	if (is_sym(t, '{') || is_sym(t, '<')) {
		if (depth + 1 > PTX_MAX_DEPTH) {
			char msg[80];
			snprintf(msg, sizeof msg, "messages nested deeper than %d levels", PTX_MAX_DEPTH);
			return fail_at(ps, t->line, t->col, msg);
		}
		char closer = t->sym == '{' ? '}' : '>';
		struct ptx_msg *m = ptx_alloc(ps->doc, sizeof *m);
		if (!m)
			return nomem(ps);
		m->line = t->line;
		m->col = t->col;
		if ((rc = lex(ps)) != DD_OK)
			return rc;
		if ((rc = parse_body(ps, depth + 1, closer, m)) != DD_OK)
			return rc;
		f->kind = PTX_MESSAGE;
		f->msg = m;
		return DD_OK;
	}
	if (t->kind == T_STRING)
		return parse_strings(ps, f);
	int neg = 0;
	const char *start = t->start;
	if (is_sym(t, '-')) {
		neg = 1;
		if ((rc = lex(ps)) != DD_OK)
			return rc;
		if (t->kind != T_NUMBER &&
		    !(t->kind == T_IDENT && (ident_is(t, "inf") || ident_is(t, "infinity") || ident_is(t, "nan")))) {
			char got[64], msg[128];
			describe(t, got, sizeof got);
			snprintf(msg, sizeof msg, "expected a number after '-', got %s", got);
			return fail_at(ps, t->line, t->col, msg);
		}
	}
	if (t->kind == T_NUMBER) {
		f->kind = PTX_NUMBER;
		f->is_int = t->is_int;
		f->num = neg ? -t->num : t->num;
		if (t->is_int && !t->overflow) {
			if (!neg && t->u <= (uint64_t)INT64_MAX) {
				f->int_ok = 1;
				f->i = (int64_t)t->u;
			} else if (neg && t->u <= (uint64_t)INT64_MAX + 1u) {
				f->int_ok = 1;
				f->i = t->u == (uint64_t)INT64_MAX + 1u ? INT64_MIN : -(int64_t)t->u;
			}
		}
	} else if (t->kind == T_IDENT) {
		if (neg) { /* -inf, -nan */
			f->kind = PTX_NUMBER;
			f->num = ident_is(t, "nan") ? -NAN : -INFINITY;
		} else {
			f->kind = PTX_IDENT;
		}
	} else {
		return fail_at(ps, t->line, t->col,
			       "expected a value after ':' (a number, a string, an identifier or '{')");
	}
	/* the text as written, with the sign joined to the token */
	size_t n = (size_t)(t->start + t->len - start);
	char *s;
	if (neg) {
		s = ptx_alloc(ps->doc, t->len + 2);
		if (s) {
			s[0] = '-';
			memcpy(s + 1, t->start, t->len);
		}
		n = t->len + 1;
	} else {
		s = arena_str(ps, start, n);
	}
	if (!s)
		return nomem(ps);
	f->text = s;
	f->len = n;
	return lex(ps);
}

/* One field called nm (its name token at `name`) and its value, appended at depth. */
static int parse_one(struct parser *ps, int depth, const struct token *name, const char *nm)
{
	int idx = 0, rc = push_field(ps, depth, name, &idx);
	struct ptx_field tmp;
	if (rc != DD_OK)
		return rc;
	memset(&tmp, 0, sizeof tmp);
	tmp.name = nm;
	tmp.line = name->line;
	tmp.col = name->col;
	rc = parse_value(ps, &tmp, depth);
	ps->vec[depth].f[idx] = tmp;
	return rc;
}

/* After a field name and ':': one value, or a [list] of them (one field each). */
static int parse_field(struct parser *ps, int depth, const struct token *name, const char *nm,
		       int colon)
{
	int rc;
	if (!colon || !is_sym(&ps->tok, '['))
		return parse_one(ps, depth, name, nm);
	int open_line = ps->tok.line, open_col = ps->tok.col;
	if ((rc = lex(ps)) != DD_OK)
		return rc;
	if (is_sym(&ps->tok, ']'))
		return lex(ps);
	for (;;) {
		if (is_sym(&ps->tok, '['))
			return fail_at(ps, ps->tok.line, ps->tok.col, "a list cannot hold another list");
		if ((rc = parse_one(ps, depth, name, nm)) != DD_OK)
			return rc;
		if (is_sym(&ps->tok, ','))  {
			if ((rc = lex(ps)) != DD_OK)
				return rc;
			continue;
		}
		if (is_sym(&ps->tok, ']'))
			return lex(ps);
		char got[64], msg[160];
		describe(&ps->tok, got, sizeof got);
		snprintf(msg, sizeof msg, "expected ',' or ']' in the list opened at %d:%d, got %s", open_line,
			 open_col, got);
		return fail_at(ps, ps->tok.line, ps->tok.col, msg);
	}
}

/* The fields of a message up to `closer` ('}' or '>'; 0 for the document, which
 * ends at the end of the input), into *out.  The lookahead is the first token of
 * the body; on return it is the token after the closer. */
static int parse_body(struct parser *ps, int depth, char closer, struct ptx_msg *out)
{
	struct vec *v = &ps->vec[depth];
	int rc;
	v->n = 0;
	for (;;) {
		struct token *t = &ps->tok;
		char got[64], msg[200];
		if (t->kind == T_EOF) {
			if (!closer)
				break;
			snprintf(msg, sizeof msg, "unexpected end of input: the '%c' at %d:%d is not closed",
				 closer == '}' ? '{' : '<', out->line, out->col);
			return fail_at(ps, t->line, t->col, msg);
		}
		if (is_sym(t, '}') || is_sym(t, '>')) {
			if (t->sym == closer) {
				if ((rc = lex(ps)) != DD_OK)
					return rc;
				break;
			}
			if (!closer)
				snprintf(msg, sizeof msg, "unexpected '%c': there is no open '%c' to close", t->sym,
					 t->sym == '}' ? '{' : '<');
			else
				snprintf(msg, sizeof msg, "expected '%c' to close the '%c' at %d:%d, got '%c'",
					 closer, closer == '}' ? '{' : '<', out->line, out->col, t->sym);
			return fail_at(ps, t->line, t->col, msg);
		}
		if (t->kind != T_IDENT) {
			describe(t, got, sizeof got);
			snprintf(msg, sizeof msg, "expected a field name, got %s", got);
			return fail_at(ps, t->line, t->col, msg);
		}
		struct token name = *t;
		char *nm = arena_str(ps, t->start, t->len);
		if (!nm)
			return nomem(ps);
		if ((rc = lex(ps)) != DD_OK)
			return rc;
		if (is_sym(t, ':')) {
			if ((rc = lex(ps)) != DD_OK)
				return rc;
			if ((rc = parse_field(ps, depth, &name, nm, 1)) != DD_OK)
				return rc;
		} else if (is_sym(t, '{') || is_sym(t, '<')) {
			if ((rc = parse_field(ps, depth, &name, nm, 0)) != DD_OK)
				return rc;
		} else {
			describe(t, got, sizeof got);
			snprintf(msg, sizeof msg, "expected ':' or '{' after '%.*s', got %s",
				 (int)(name.len > 40 ? 40 : name.len), name.start, got);
			return fail_at(ps, t->line, t->col, msg);
		}
		if (is_sym(t, ',') || is_sym(t, ';'))
			if ((rc = lex(ps)) != DD_OK)
				return rc;
	}
	v = &ps->vec[depth];
	struct ptx_field *fields = NULL;
	if (v->n) {
		fields = ptx_alloc(ps->doc, (size_t)v->n * sizeof *fields);
		if (!fields)
			return nomem(ps);
		memcpy(fields, v->f, (size_t)v->n * sizeof *fields);
	}
	out->field = fields;
	out->nfield = v->n;
	v->n = 0;
	return DD_OK;
}

int ptx_parse(const char *text, size_t len, struct ptx_doc **out, struct dd_err *err)
{
	int rc;
	*out = NULL;
	if (len > PTX_MAX_INPUT)
		return dd_err_set(err, DD_ETOOBIG,
				  "the network description is %zu bytes; the limit is %u MiB", len,
				  PTX_MAX_INPUT >> 20);
	struct parser *ps = calloc(1, sizeof *ps);
	struct ptx_doc *doc = calloc(1, sizeof *doc);
	if (!ps || !doc) {
		rc = dd_err_set(err, DD_ENOMEM, "out of memory while reading the network description");
		goto fail;
	}
	ps->p = text ? text : "";
	ps->end = ps->p + (text ? len : 0);
	ps->line = 1;
	ps->col = 1;
	ps->doc = doc;
	ps->err = err;
	doc->root.line = 1;
	doc->root.col = 1;
	if ((rc = lex(ps)) != DD_OK)
		goto fail;
	if ((rc = parse_body(ps, 0, 0, &doc->root)) != DD_OK)
		goto fail;
	for (int i = 0; i <= PTX_MAX_DEPTH; i++)
		free(ps->vec[i].f);
	free(ps->sbuf);
	free(ps);
	*out = doc;
	return DD_OK;
fail:
	if (ps) {
		for (int i = 0; i <= PTX_MAX_DEPTH; i++)
			free(ps->vec[i].f);
		free(ps->sbuf);
	}
	free(ps);
	ptx_free(doc);
	return rc;
}
