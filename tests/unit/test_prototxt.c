/* test_prototxt.c — the protobuf text-format reader: every syntax feature Caffe
 * files use (scalars of each kind, strings with every escape, nested messages with
 * '{' and '<', lists, comments, separators), positions in lines and characters,
 * every error with its exact LINE:COL and sentence, the limits (nesting, input
 * size, field count, number length), inputs that are not NUL-terminated, and a
 * seeded mutation run of the standard networks through the fuzz target. */
#define _GNU_SOURCE
#include <math.h>
#include <stdint.h>

#include "../../networks/prototxt.h"
#include "check.h"
#include "mutate.h"

/* The fuzz target's invariants become CHECKs here instead of traps. */
#define FUZZ_REQUIRE(cond) CHECK(cond)
#include "../fuzz/fuzz_prototxt.c"

/* Parse from an exact-size heap copy (no NUL after it), so valgrind sees any read
 * past the end. */
static int parse(const char *text, size_t len, struct ptx_doc **doc, struct dd_err *err)
{
	char *copy = malloc(len ? len : 1);
	memcpy(copy, text, len);
	int rc = ptx_parse(copy, len, doc, err);
	free(copy);
	return rc;
}

static struct ptx_doc *ok(const char *text)
{
	struct ptx_doc *doc = NULL;
	struct dd_err err = { 0, "" };
	int rc = parse(text, strlen(text), &doc, &err);
	if (rc != DD_OK)
		fprintf(stderr, "  unexpected error: %s\n", err.msg);
	CHECK(rc == DD_OK && doc);
	return doc;
}

/* The error an input gives: its sentence, or "" when it parsed. */
static const char *error_of(const char *text, size_t len)
{
	static struct dd_err err;
	struct ptx_doc *doc = NULL;
	memset(&err, 0, sizeof err);
	if (parse(text, len, &doc, &err) == DD_OK) {
		ptx_free(doc);
		return "";
	}
	CHECK(doc == NULL);
	return err.msg;
}
#define ERR(s) error_of(s, sizeof(s) - 1)

static const struct ptx_field *field(const struct ptx_msg *m, int i)
{
	CHECK(i < m->nfield);
	return i < m->nfield ? &m->field[i] : NULL;
}

static void test_scalars(void)
{
	struct ptx_doc *doc = ok("a: 1 b: -2 c: 1.5 d: 1e-4 e: .5 f: 2.5f g: 0x1F h: 017 i: 0\n"
				 "j: MAX k: true l: -inf m: inf n: nan o: 1E+3 p: -0.25e2");
	if (!doc)
		return;
	const struct ptx_msg *r = ptx_root(doc);
	CHECK_EQ_INT(r->nfield, 16);
	const struct ptx_field *f = field(r, 0);
	CHECK_STR(f->name, "a");
	CHECK(f->kind == PTX_NUMBER && f->is_int && f->int_ok && f->i == 1 && f->num == 1);
	CHECK_STR(f->text, "1");
	f = field(r, 1);
	CHECK(f->kind == PTX_NUMBER && f->int_ok && f->i == -2 && f->num == -2);
	CHECK_STR(f->text, "-2");
	f = field(r, 2);
	CHECK(f->kind == PTX_NUMBER && !f->is_int && !f->int_ok && f->num == 1.5);
	CHECK(field(r, 3)->num == 1e-4 && !field(r, 3)->is_int);
	CHECK(field(r, 4)->num == 0.5);
	CHECK(field(r, 5)->num == 2.5 && !field(r, 5)->is_int);
	CHECK_STR(field(r, 5)->text, "2.5f");
	CHECK(field(r, 6)->int_ok && field(r, 6)->i == 31);
	CHECK(field(r, 7)->int_ok && field(r, 7)->i == 15); /* octal, as protobuf reads it */
	CHECK(field(r, 8)->int_ok && field(r, 8)->i == 0);
	f = field(r, 9);
	CHECK(f->kind == PTX_IDENT);
	CHECK_STR(f->text, "MAX");
	CHECK_EQ_INT(f->len, 3);
	CHECK(field(r, 10)->kind == PTX_IDENT);
	CHECK_STR(field(r, 10)->text, "true");
	f = field(r, 11);
	CHECK(f->kind == PTX_NUMBER && isinf(f->num) && f->num < 0 && !f->is_int);
	CHECK_STR(f->text, "-inf");
	CHECK(field(r, 12)->kind == PTX_IDENT); /* inf/nan alone are identifiers: a float field reads them */
	CHECK(field(r, 13)->kind == PTX_IDENT);
	CHECK(field(r, 14)->num == 1000 && !field(r, 14)->is_int);
	CHECK(field(r, 15)->num == -25);
	ptx_free(doc);
}

static void test_strings_and_escapes(void)
{
	struct ptx_doc *doc = ok("a: \"x\\n\\t\\\\\\\"\\'\\x41\\101\\u00e9\\U0001F600\\a\\b\\f\\v\\r\\?\"\n"
				 "b: 'single \"quoted\"'\n"
				 "c: \"con\" 'cat' \"enated\"\n"
				 "d: \"nul\\0inside\"\n"
				 "e: \"\"\n"
				 "f: \"caf\xc3\xa9\"\n");
	if (!doc)
		return;
	const struct ptx_msg *r = ptx_root(doc);
	CHECK_EQ_INT(r->nfield, 6);
	const struct ptx_field *f = field(r, 0);
	CHECK(f->kind == PTX_STRING);
	const char want[] = "x\n\t\\\"'AA\xc3\xa9\xf0\x9f\x98\x80\a\b\f\v\r?";
	CHECK_EQ_INT(f->len, sizeof want - 1);
	CHECK(memcmp(f->text, want, sizeof want) == 0);
	CHECK_STR(field(r, 1)->text, "single \"quoted\"");
	CHECK_STR(field(r, 2)->text, "concatenated");
	f = field(r, 3);
	CHECK_EQ_INT(f->len, 10);
	CHECK(memcmp(f->text, "nul\0inside", 11) == 0);
	CHECK(field(r, 4)->kind == PTX_STRING && field(r, 4)->len == 0);
	CHECK_STR(field(r, 4)->text, "");
	CHECK_STR(field(r, 5)->text, "caf\xc3\xa9");
	ptx_free(doc);
}

static void test_messages(void)
{
	struct ptx_doc *doc = ok("layer {\n"
				 "  name: \"conv1\"\n"
				 "  param { lr_mult: 1 }\n"
				 "  param: { lr_mult: 2 }\n"
				 "  convolution_param < num_output: 20 weight_filler { type: \"xavier\" } >\n"
				 "  empty { }\n"
				 "}\n"
				 "layer { }");
	if (!doc)
		return;
	const struct ptx_msg *r = ptx_root(doc);
	CHECK_EQ_INT(r->nfield, 2);
	const struct ptx_field *l = field(r, 0);
	CHECK(l->kind == PTX_MESSAGE);
	CHECK_EQ_INT(l->msg->line, 1);
	CHECK_EQ_INT(l->msg->col, 7);
	const struct ptx_msg *m = l->msg;
	CHECK_EQ_INT(m->nfield, 5);
	CHECK_STR(field(m, 0)->text, "conv1");
	CHECK_STR(field(m, 1)->name, "param"); /* repeated fields keep their order */
	CHECK(field(m, 1)->msg->field[0].num == 1);
	CHECK(field(m, 2)->msg->field[0].num == 2);
	const struct ptx_msg *cp = field(m, 3)->msg;
	CHECK_EQ_INT(cp->nfield, 2);
	CHECK_STR(cp->field[1].name, "weight_filler");
	CHECK_STR(cp->field[1].msg->field[0].text, "xavier");
	CHECK(field(m, 4)->kind == PTX_MESSAGE && field(m, 4)->msg->nfield == 0);
	CHECK(field(r, 1)->msg->nfield == 0);
	ptx_free(doc);
}

static void test_lists(void)
{
	struct ptx_doc *doc = ok("dim: [1, 3, 224, 224] none: [] shape: [{ dim: 1 }, { dim: 2 }] s: [\"a\", 'b']");
	if (!doc)
		return;
	const struct ptx_msg *r = ptx_root(doc);
	CHECK_EQ_INT(r->nfield, 8);
	for (int i = 0; i < 4; i++) {
		CHECK_STR(field(r, i)->name, "dim");
		CHECK_EQ_INT(field(r, i)->line, 1);
		CHECK_EQ_INT(field(r, i)->col, 1);
	}
	CHECK(field(r, 1)->i == 3 && field(r, 3)->i == 224);
	CHECK_EQ_INT(field(r, 1)->vcol, 10);
	CHECK_STR(field(r, 4)->name, "shape");
	CHECK(field(r, 5)->msg->field[0].i == 2);
	CHECK_STR(field(r, 7)->text, "b");
	ptx_free(doc);
}

static void test_comments_and_separators(void)
{
	struct ptx_doc *doc = ok("# a comment\n"
				 "a: 1; b: 2, c: 3 # trailing comment\n"
				 "m { x: 1, y: 2; } ; # after a message\n"
				 "d: 4 # a comment at the end without a newline");
	if (doc) {
		const struct ptx_msg *r = ptx_root(doc);
		CHECK_EQ_INT(r->nfield, 5);
		CHECK_STR(field(r, 4)->name, "d");
		CHECK_EQ_INT(field(r, 4)->line, 4);
		CHECK_EQ_INT(field(r, 3)->msg->nfield, 2);
		ptx_free(doc);
	}
	static const char *const empties[] = { "", "   \n\t\r\n", "# only a comment", "#", "\n#\n#x\n" };
	for (size_t i = 0; i < sizeof empties / sizeof empties[0]; i++) {
		doc = ok(empties[i]);
		if (doc)
			CHECK_EQ_INT(ptx_root(doc)->nfield, 0);
		ptx_free(doc);
	}
	/* a NULL text of length 0 is an empty document */
	struct dd_err err;
	CHECK(ptx_parse(NULL, 0, &doc, &err) == DD_OK && ptx_root(doc)->nfield == 0);
	ptx_free(doc);
}

static void test_positions_count_characters(void)
{
	/* a tab is one column; a UTF-8 sequence is one column; lines start at 1 */
	struct ptx_doc *doc = ok("\ta: 1\n# caf\xc3\xa9\nb: \"\xc3\xa9\" c: 1\n");
	if (doc)
		CHECK_EQ_INT(ptx_root(doc)->field[2].col, 8); /* b: "é" c: the é is one column */
	ptx_free(doc);
	CHECK_STR(ERR("# \xc3\xa9\xc3\xa9\nb: 'caf\xc3\xa9' @"), "2:11: unexpected character '@'");
	CHECK_STR(ERR("\ta: 1\n\tb: }"), "2:5: expected a value after ':' (a number, a string, an identifier or '{')");
	doc = ok("m {\n  x: 1\n  y: \"s\"\n}");
	if (doc) {
		const struct ptx_field *y = &ptx_root(doc)->field[0].msg->field[1];
		CHECK_EQ_INT(y->line, 3);
		CHECK_EQ_INT(y->col, 3);
		CHECK_EQ_INT(y->vline, 3);
		CHECK_EQ_INT(y->vcol, 6);
	}
	ptx_free(doc);
}

static void test_every_error_names_its_place(void)
{
	static const struct {
		const char *in;
		const char *msg;
	} cases[] = {
		{ "a: ", "1:4: expected a value after ':' (a number, a string, an identifier or '{')" },
		{ "a: }", "1:4: expected a value after ':' (a number, a string, an identifier or '{')" },
		{ "name:\n  :", "2:3: expected a value after ':' (a number, a string, an identifier or '{')" },
		{ "a 1", "1:3: expected ':' or '{' after 'a', got '1'" },
		{ "a: 1 b", "1:7: expected ':' or '{' after 'b', got the end of the input" },
		{ "a \"s\"", "1:3: expected ':' or '{' after 'a', got a string" },
		{ "}", "1:1: unexpected '}': there is no open '{' to close" },
		{ "a: 1\n>", "2:1: unexpected '>': there is no open '<' to close" },
		{ "m {\n  a: 1\n", "3:1: unexpected end of input: the '{' at 1:3 is not closed" },
		{ "m <", "1:4: unexpected end of input: the '<' at 1:3 is not closed" },
		{ "m { a: 1 >", "1:10: expected '}' to close the '{' at 1:3, got '>'" },
		{ "1: 2", "1:1: expected a field name, got '1'" },
		{ ": 2", "1:1: expected a field name, got ':'" },
		{ "\"s\": 2", "1:1: expected a field name, got a string" },
		{ "a: \"abc", "1:4: unterminated string: the input ends before its closing \"" },
		{ "a: 'abc", "1:4: unterminated string: the input ends before its closing '" },
		{ "x: 1\na: 'abc\n'", "2:4: unterminated string: a string must close on the line it opens" },
		{ "a: \"x\\", "1:4: unterminated string: the input ends in an escape" },
		{ "a: \"\\q\"", "1:5: unknown escape '\\q' in a string" },
		{ "a: \"\\x\"", "1:5: \\x in a string needs a hex digit after it" },
		{ "a: \"\\777\"", "1:5: octal escape above \\377 in a string" },
		{ "a: \"\\u12\"", "1:5: \\u in a string needs 4 hex digits" },
		{ "a: \"\\U0011\"", "1:5: \\U in a string needs 8 hex digits" },
		{ "a: \"\\ud800\"", "1:5: \\u escape is not a Unicode character" },
		{ "a: \"\\U00110000\"", "1:5: \\u escape is not a Unicode character" },
		{ "a: 5x5", "1:4: invalid number '5x5'" },
		{ "a: 1.2.3", "1:4: invalid number '1.2.3'" },
		{ "a: 1e", "1:4: invalid number: the exponent needs digits after 'e'" },
		{ "a: 1e+", "1:4: invalid number: the exponent needs digits after 'e'" },
		{ "a: 0x", "1:4: invalid number: 0x needs hex digits after it" },
		{ "a: 08", "1:4: invalid number: a number that starts with 0 is octal (digits 0-7)" },
		{ "a: - b", "1:6: expected a number after '-', got 'b'" },
		{ "a: -", "1:5: expected a number after '-', got the end of the input" },
		{ "a: -\"s\"", "1:5: expected a number after '-', got a string" },
		{ "a: @", "1:4: unexpected character '@'" },
		{ "a: [1 2]", "1:7: expected ',' or ']' in the list opened at 1:4, got '2'" },
		{ "a: [1,", "1:7: expected a value after ':' (a number, a string, an identifier or '{')" },
		{ "a: [[1]]", "1:5: a list cannot hold another list" },
		{ "a [1]", "1:3: expected ':' or '{' after 'a', got '['" },
		{ "a: 1 /* c */", "1:6: unexpected character '/'" },
	};
	for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		const char *got = error_of(cases[i].in, strlen(cases[i].in));
		if (strcmp(got, cases[i].msg) != 0)
			fprintf(stderr, "  input %zu: %s\n", i, cases[i].in);
		CHECK_STR(got, cases[i].msg);
	}
	/* bytes that are not text */
	CHECK_STR(ERR("a: \x01"), "1:4: unexpected byte 0x01");
	CHECK_STR(ERR("a: 1\0b: 2"), "1:5: unexpected byte 0x00");
	CHECK_STR(ERR("a: \xff"), "1:4: unexpected byte 0xFF");
	CHECK_STR(ERR("a: \"\\\x01\""), "1:5: unknown escape in a string (byte 0x01 after '\\')");
	/* and every error is DD_EINVAL with no document */
	struct ptx_doc *doc = (struct ptx_doc *)1;
	struct dd_err err;
	CHECK_EQ_INT(ptx_parse("}", 1, &doc, &err), DD_EINVAL);
	CHECK_EQ_INT(err.code, DD_EINVAL);
	CHECK(doc == NULL);
	/* a NULL err is allowed */
	CHECK_EQ_INT(ptx_parse("}", 1, &doc, NULL), DD_EINVAL);
}

static void test_nesting_is_bounded(void)
{
	/* 64 levels are fine */
	char *s = check_repeat("m{", PTX_MAX_DEPTH, "a:1", "}", PTX_MAX_DEPTH);
	struct ptx_doc *doc = ok(s);
	if (doc) {
		const struct ptx_msg *m = ptx_root(doc);
		int depth = 0;
		while (m->nfield && m->field[0].kind == PTX_MESSAGE) {
			m = m->field[0].msg;
			depth++;
		}
		CHECK_EQ_INT(depth, PTX_MAX_DEPTH);
	}
	ptx_free(doc);
	free(s);
	/* 65 are not: the error points at the 65th '{' */
	s = check_repeat("m{", PTX_MAX_DEPTH + 1, "", "}", PTX_MAX_DEPTH + 1);
	CHECK_STR(error_of(s, strlen(s)), "1:130: messages nested deeper than 64 levels");
	free(s);
	/* a million opening braces neither overflow the stack nor take long */
	s = check_repeat("m <", 1000000, "", "", 0);
	CHECK_STR(error_of(s, strlen(s)), "1:195: messages nested deeper than 64 levels");
	free(s);
	s = check_repeat("[", 100000, "", "", 0);
	CHECK_STR(error_of(s, strlen(s)), "1:1: expected a field name, got '['");
	free(s);
}

static void test_huge_numbers(void)
{
	struct ptx_doc *doc = ok("a: 9223372036854775807 b: -9223372036854775808 c: 9223372036854775808\n"
				 "d: 18446744073709551615 e: 99999999999999999999999 f: 1e999 g: -1e999 h: 1e-999\n"
				 "i: 0xFFFFFFFFFFFFFFFFF j: -9223372036854775809");
	if (!doc)
		return;
	const struct ptx_msg *r = ptx_root(doc);
	CHECK(field(r, 0)->int_ok && field(r, 0)->i == INT64_MAX);
	CHECK(field(r, 1)->int_ok && field(r, 1)->i == INT64_MIN);
	CHECK(field(r, 2)->is_int && !field(r, 2)->int_ok && field(r, 2)->num == 9223372036854775808.0);
	CHECK(!field(r, 3)->int_ok && field(r, 3)->num > 1.8e19);
	CHECK(field(r, 4)->is_int && !field(r, 4)->int_ok && field(r, 4)->num > 9e22);
	CHECK(isinf(field(r, 5)->num) && field(r, 5)->num > 0);
	CHECK(isinf(field(r, 6)->num) && field(r, 6)->num < 0);
	CHECK(field(r, 7)->num == 0);
	CHECK(!field(r, 8)->int_ok && isinf(field(r, 8)->num));
	CHECK(!field(r, 9)->int_ok && field(r, 9)->num < -9e18);
	ptx_free(doc);
	/* a number is at most 400 characters */
	char *s = check_repeat("a: ", 1, "", "1", 401);
	CHECK_STR(error_of(s, strlen(s)), "1:4: number too long (over 400 characters)");
	free(s);
	s = check_repeat("a: ", 1, "0.", "1", 398);
	doc = ok(s);
	ptx_free(doc);
	free(s);
}

static void test_size_limits(void)
{
	struct dd_err err;
	struct ptx_doc *doc = NULL;
	size_t big = (size_t)PTX_MAX_INPUT + 1;
	char *s = malloc(big);
	memset(s, ' ', big);
	CHECK_EQ_INT(ptx_parse(s, big, &doc, &err), DD_ETOOBIG);
	CHECK_CONTAINS(err.msg, "the limit is 4 MiB");
	CHECK(doc == NULL);
	CHECK_EQ_INT(ptx_parse(s, big - 1, &doc, &err), DD_OK); /* exactly the limit is fine */
	ptx_free(doc);
	free(s);
	/* more than PTX_MAX_FIELDS fields, in a list (2 bytes an element) */
	s = check_repeat("a: [", 1, "", "1,", PTX_MAX_FIELDS);
	size_t n = strlen(s);
	s = realloc(s, n + 3);
	memcpy(s + n, "1]", 3);
	CHECK_EQ_INT(ptx_parse(s, n + 2, &doc, &err), DD_ETOOBIG);
	CHECK_STR(err.msg, "1:1: more than 1048576 fields in one network description");
	free(s);
}

static void test_kind_names(void)
{
	CHECK_STR(ptx_kind_name(PTX_NUMBER), "a number");
	CHECK_STR(ptx_kind_name(PTX_STRING), "a string");
	CHECK_STR(ptx_kind_name(PTX_IDENT), "an identifier");
	CHECK_STR(ptx_kind_name(PTX_MESSAGE), "a message");
	ptx_free(NULL);
}

/* Deterministic mutations of the standard networks through the fuzz target. */
static uint64_t rng = 0x9E3779B97F4A7C15ull;
static uint64_t next(void)
{
	return mutate_xorshift64(&rng);
}

static void test_fuzz_target_on_mutations(void)
{
	static const char *const tokens[] = { "{", "}", ":", "\"", "'", "#", "\\", "-", "[", "]", "<", ">",
					      "layer {", "bottom: \"data\"", "top: \"x\"", "kernel_size: 0",
					      "num_output: 99999999999", "include { stage: \"val\" }", "\xc3",
					      "type: \"Eltwise\"", "global_pooling: true", "1e999", "\n" };
	int runs = 0;
	for (int k = 0; net_standards[k].name; k++) {
		const char *text = net_standards[k].text;
		size_t len = strlen(text);
		int n = k == 2 ? 6 : 60; /* GoogLeNet is big: a few of it */
		for (int i = 0; i < n; i++) {
			char *m = malloc(len + 64);
			size_t ml = len;
			memcpy(m, text, len);
			int edits = 1 + (int)(next() % 4);
			for (int e = 0; e < edits; e++) {
				size_t at = (size_t)(next() % (ml ? ml : 1));
				switch (next() % 4) {
				case 0: m[at] = (char)(next() & 0xff); break;       /* flip a byte */
				case 1: ml = at; break;                              /* truncate */
				case 2: memmove(m + at, m + at + 1, ml - at - 1); ml--; break; /* delete */
				default: {                                          /* insert a token */
					const char *t = tokens[next() % (sizeof tokens / sizeof tokens[0])];
					size_t tl = strlen(t);
					if (ml + tl > len + 63)
						break;
					memmove(m + at + tl, m + at, ml - at);
					memcpy(m + at, t, tl);
					ml += tl;
				}
				}
				if (!ml)
					break;
			}
			LLVMFuzzerTestOneInput((const uint8_t *)m, ml);
			free(m);
			runs++;
		}
		/* and every standard network as it is */
		LLVMFuzzerTestOneInput((const uint8_t *)text, len);
	}
	CHECK(runs > 0);
}

int main(void)
{
	RUN(test_scalars);
	RUN(test_strings_and_escapes);
	RUN(test_messages);
	RUN(test_lists);
	RUN(test_comments_and_separators);
	RUN(test_positions_count_characters);
	RUN(test_every_error_names_its_place);
	RUN(test_nesting_is_bounded);
	RUN(test_huge_numbers);
	RUN(test_size_limits);
	RUN(test_kind_names);
	RUN(test_fuzz_target_on_mutations);
	return check_summary();
}
