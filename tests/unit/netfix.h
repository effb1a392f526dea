/* netfix.h — a network for a unit test: prototxt text parsed, its train stage
 * instantiated on given inputs and made a graph on a backend, and all of it freed.
 *
 *   struct netfix f;
 *   struct net_input in = { .n = 2, .c = 1, .h = 6, .w = 6, .classes = 4 };
 *   if (netfix_open(&f, text, &in, NULL, 7)) { CHECK(0); return; }
 *   ... f.gr ...
 *   netfix_close(&f);
 *
 * Shared by test_graph.c, test_snapshot.c and test_solver.c. */
#ifndef DD_TEST_NETFIX_H
#define DD_TEST_NETFIX_H

#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "../../networks/graph.h"
#include "../../networks/net.h"

/* A parsed and instantiated network with its graph; all NULL where netfix_open failed early. */
struct netfix {
	struct net *def;
	struct net_graph *g;
	struct graph *gr;
};

/* text's train stage on in, a graph of it on be (NULL: the reference backend) with
 * parameters filled from seed.  0, or -1 with the reason on stderr; either way
 * netfix_close undoes it. */
static inline int netfix_open(struct netfix *f, const char *text, const struct net_input *in, struct backend *be,
			      uint64_t seed)
{
	struct dd_err err = { 0 };
	memset(f, 0, sizeof *f);
	if (net_parse(text, strlen(text), &f->def, &err) != DD_OK ||
	    net_instantiate(f->def, NET_STAGE_TRAIN, in, &f->g, &err) != DD_OK ||
	    graph_create(f->g, be, seed, &f->gr, &err) != DD_OK) {
		fprintf(stderr, "  setup: %s\n", err.msg);
		return -1;
	}
	return 0;
}

static inline void netfix_close(struct netfix *f)
{
	graph_free(f->gr);
	net_graph_free(f->g);
	net_free(f->def);
}

#endif
