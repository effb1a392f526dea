/* fuzz_prototxt.c — libFuzzer target for the prototxt parser and the network layer
 * above it.
 *
 * Every input goes through ptx_parse and, when it parses, net_parse; every network
 * that parses is instantiated for the three stages on two inputs, and every graph
 * that comes out is printed and turned into JSON.  Each step must either succeed or
 * fail with a sentence (with LINE:COL inside the text when it is a syntax error);
 * a graph must hold its invariants (bottoms made by earlier layers, shapes that
 * count what they say).  AddressSanitizer catches any read past the input (which
 * is not NUL-terminated) and LeakSanitizer any leak on an error path.
 *
 * Not part of `make test` (it needs clang and runs for as long as one lets it):
 *   make build/gen/net_lenet.c build/gen/net_alexnet.c build/gen/net_googlenet.c \
 *        build/gen/net_resnet_small.c
 *   clang -std=c11 -g -O1 -fsanitize=fuzzer,address,undefined -o build/fuzz_prototxt \
 *         tests/fuzz/fuzz_prototxt.c networks/prototxt.c networks/net.c networks/layers.c common/err.c \
 *         build/gen/net_*.c -lcjson -lm
 *   mkdir -p build/fuzz-ptx && cp networks/standard/[a-z]*.prototxt build/fuzz-ptx/
 *   build/fuzz_prototxt -max_total_time=60 -max_len=65536 build/fuzz-ptx
 * tests/unit/test_prototxt.c includes this file and feeds it seeded mutations of the
 * standard networks, so the target always compiles and its checks run under
 * valgrind with the unit tests. */
#include <cjson/cJSON.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../networks/net.h"
#include "../../networks/prototxt.h"

#include "fuzz.h"

/* Touch every field of a tree (so ASan/valgrind see any bad pointer). */
static size_t fuzz_walk(const struct ptx_msg *m, int depth)
{
	size_t n = 0;
	FUZZ_REQUIRE(depth <= PTX_MAX_DEPTH);
	for (int i = 0; i < m->nfield; i++) {
		const struct ptx_field *f = &m->field[i];
		FUZZ_REQUIRE(f->name && f->name[0]);
		FUZZ_REQUIRE(f->line >= 1 && f->col >= 1);
		n += strlen(f->name);
		if (f->kind == PTX_MESSAGE)
			n += fuzz_walk(f->msg, depth + 1);
		else
			n += f->len + (f->text[f->len] == 0);
	}
	return n;
}

static void fuzz_error(const struct dd_err *err, int rc)
{
	FUZZ_REQUIRE(rc == DD_EINVAL || rc == DD_ETOOBIG || rc == DD_ENOMEM);
	FUZZ_REQUIRE(err->code == rc && err->msg[0] != '\0');
	FUZZ_REQUIRE(memchr(err->msg, 0, sizeof err->msg) != NULL);
}

static void fuzz_graph(const struct net_graph *g)
{
	FUZZ_REQUIRE(g->nnode >= 1);
	for (int k = 0; k < g->nnode; k++) {
		const struct net_node *nd = &g->node[k];
		for (int i = 0; i < nd->l.nbottom; i++) {
			FUZZ_REQUIRE(nd->bottom[i] >= 0 && nd->bottom[i] < g->nblob);
			FUZZ_REQUIRE(g->blob[nd->bottom[i]].producer < k);
		}
		for (int i = 0; i < nd->l.ntop; i++) {
			const struct net_blob *b = &g->blob[nd->top[i]];
			int64_t c = 1;
			for (int d = 0; d < b->shape.ndim; d++) {
				FUZZ_REQUIRE(b->shape.dim[d] >= 1);
				c *= b->shape.dim[d];
			}
			FUZZ_REQUIRE(c == b->count && c <= INT32_MAX);
			FUZZ_REQUIRE(b->producer <= k);
		}
	}
	FILE *sink = fopen("/dev/null", "w");
	if (sink) {
		FUZZ_REQUIRE(net_graph_print(g, sink) == DD_OK);
		fclose(sink);
	}
	cJSON *j = net_graph_json(g);
	FUZZ_REQUIRE(j != NULL);
	cJSON_Delete(j);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct dd_err err = { 0, "" };
	struct ptx_doc *doc = NULL;
	int rc = ptx_parse((const char *)data, size, &doc, &err);
	if (rc != DD_OK) {
		fuzz_error(&err, rc);
		FUZZ_REQUIRE(doc == NULL);
		int line, col;
		if (rc == DD_EINVAL)
			FUZZ_REQUIRE(net_err_pos(&err, &line, &col) && line >= 1 && col >= 1);
		return 0;
	}
	fuzz_walk(ptx_root(doc), 0);
	ptx_free(doc);

	struct net *def = NULL;
	rc = net_parse((const char *)data, size, &def, &err);
	if (rc != DD_OK) {
		fuzz_error(&err, rc);
		FUZZ_REQUIRE(def == NULL);
		return 0;
	}
	static const struct net_input inputs[] = {
		{ .c = 1, .h = 28, .w = 28, .classes = 10 },
		{ .n = 2, .c = 3, .h = 40, .w = 32, .crop = 24, .classes = 3 },
	};
	for (size_t i = 0; i < sizeof inputs / sizeof inputs[0]; i++)
		for (int s = NET_STAGE_TRAIN; s <= NET_STAGE_DEPLOY; s++) {
			struct net_graph *g = NULL;
			rc = net_instantiate(def, (enum net_stage)s, &inputs[i], &g, &err);
			if (rc != DD_OK) {
				fuzz_error(&err, rc);
				FUZZ_REQUIRE(g == NULL);
				continue;
			}
			fuzz_graph(g);
			net_graph_free(g);
		}
	struct net_input decl = { 0 };
	net_declared_input(def, &decl);
	net_free(def);
	return 0;
}
