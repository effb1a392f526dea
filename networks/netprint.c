/* netprint.c — an instantiated graph back to Caffe prototxt (net.h:
 * net_graph_prototxt): what a bundle ships as deploy.prototxt.
 *
 * The text is the graph as instantiated, not the description it came from: the
 * layers of its stage only, each with its params resolved (an InnerProduct's
 * num_output filled in, BatchNorm's use_global_stats settled), the input declared
 * Caffe's deploy way (input: "data" with an input_shape), and nothing that only
 * training reads (fillers, lr_mult, include/exclude rules).  Parsing it and
 * instantiating its deploy stage for the same input gives the same layers and
 * parameter blobs, so the same weights load into it (tests/unit/test_infer.c). */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "net.h"

static void str(FILE *f, const char *s)
{
	fputc('"', f);
	for (; *s; s++) {
		if (*s == '"' || *s == '\\')
			fputc('\\', f);
		fputc(*s, f);
	}
	fputc('"', f);
}

static void hw(FILE *f, const char *name, int h, int w, int skip)
{
	if (h == skip && w == skip)
		return;
	if (h == w)
		fprintf(f, " %s: %d", name, h);
	else
		fprintf(f, " %s_h: %d %s_w: %d", name, h, name, w);
}

/* A window's kernel, stride and pad, each in Caffe's shortest form. */
static void window(FILE *f, int kh, int kw, int sh, int sw, int ph, int pw)
{
	if (kh == kw)
		fprintf(f, " kernel_size: %d", kh);
	else
		fprintf(f, " kernel_h: %d kernel_w: %d", kh, kw);
	hw(f, "stride", sh, sw, 1);
	hw(f, "pad", ph, pw, 0);
}

static void params(FILE *f, const struct net_layer *l)
{
	switch (l->type) {
	case NET_CONVOLUTION:
	case NET_DECONVOLUTION: { /* Caffe's Deconvolution reads convolution_param too */
		const struct net_conv_param *p = &l->conv;
		fprintf(f, "  convolution_param { num_output: %d", p->num_output);
		window(f, p->kh, p->kw, p->sh, p->sw, p->ph, p->pw);
		if (p->dh != 1 || p->dw != 1)
			fprintf(f, " dilation: %d dilation: %d", p->dh, p->dw);
		if (p->group != 1)
			fprintf(f, " group: %d", p->group);
		if (!p->bias_term)
			fprintf(f, " bias_term: false");
		fprintf(f, " }\n");
		break;
	}
	case NET_POOLING: {
		const struct net_pool_param *p = &l->pool;
		fprintf(f, "  pooling_param { pool: %s", p->pool == NET_POOL_MAX ? "MAX" : "AVE");
		if (p->global)
			fprintf(f, " global_pooling: true");
		else
			window(f, p->kh, p->kw, p->sh, p->sw, p->ph, p->pw);
		fprintf(f, " }\n");
		break;
	}
	case NET_INNER_PRODUCT:
		fprintf(f, "  inner_product_param { num_output: %d%s }\n", l->ip.num_output,
			l->ip.bias_term ? "" : " bias_term: false");
		break;
	case NET_RELU:
		if (l->relu.negative_slope != 0)
			fprintf(f, "  relu_param { negative_slope: %.9g }\n", l->relu.negative_slope);
		break;
	case NET_POWER:
		fprintf(f, "  power_param { power: %.9g scale: %.9g shift: %.9g }\n", l->power.power, l->power.scale,
			l->power.shift);
		break;
	case NET_DROPOUT:
		fprintf(f, "  dropout_param { dropout_ratio: %.9g }\n", l->dropout.ratio);
		break;
	case NET_LRN:
		fprintf(f, "  lrn_param { local_size: %d alpha: %.9g beta: %.9g k: %.9g }\n", l->lrn.local_size,
			l->lrn.alpha, l->lrn.beta, l->lrn.k);
		break;
	case NET_BATCH_NORM:
		fprintf(f, "  batch_norm_param { use_global_stats: %s moving_average_fraction: %.9g eps: %.9g }\n",
			l->bn.use_global_stats == 0 ? "false" : "true", l->bn.moving_average_fraction, l->bn.eps);
		break;
	case NET_SCALE:
		if (l->scale.bias_term)
			fprintf(f, "  scale_param { bias_term: true }\n");
		break;
	case NET_ELTWISE: {
		static const char *const ops[] = { "PROD", "SUM", "MAX" };
		fprintf(f, "  eltwise_param { operation: %s", ops[l->eltwise.op]);
		for (int i = 0; i < l->eltwise.ncoeff; i++)
			fprintf(f, " coeff: %.9g", l->eltwise.coeff[i]);
		fprintf(f, " }\n");
		break;
	}
	case NET_ACCURACY:
		if (l->accuracy.top_k != 1 || l->accuracy.has_ignore_label) {
			fprintf(f, "  accuracy_param {");
			if (l->accuracy.top_k != 1)
				fprintf(f, " top_k: %d", l->accuracy.top_k);
			if (l->accuracy.has_ignore_label)
				fprintf(f, " ignore_label: %d", l->accuracy.ignore_label);
			fprintf(f, " }\n");
		}
		break;
	case NET_SOFTMAX_LOSS: {
		static const char *const norms[] = { "FULL", "VALID", "BATCH_SIZE", "NONE" };
		if (l->loss.has_ignore_label || l->loss.normalization != NET_NORM_VALID) {
			fprintf(f, "  loss_param {");
			if (l->loss.has_ignore_label)
				fprintf(f, " ignore_label: %d", l->loss.ignore_label);
			if (l->loss.normalization != NET_NORM_VALID)
				fprintf(f, " normalization: %s", norms[l->loss.normalization]);
			fprintf(f, " }\n");
		}
		break;
	}
	case NET_CROP: /* axis resolved, one offset per axis from it (net.h) */
		fprintf(f, "  crop_param { axis: %d", l->crop.axis);
		for (int a = l->crop.axis; a < l->crop.noffset; a++)
			fprintf(f, " offset: %lld", (long long)l->crop.offset[a]);
		fprintf(f, " }\n");
		break;
	case NET_DATA: /* not printed: the graph's input is declared instead */
	case NET_INPUT:
	case NET_SIGMOID: /* no params, or only the ones deepdesk takes as given */
	case NET_TANH:
	case NET_CONCAT: /* axis 1 */
	case NET_FLATTEN:
	case NET_SOFTMAX: /* axis 1 */
	case NET_EUCLIDEAN_LOSS:
	case NET_LAYER_TYPE_COUNT:
		break;
	}
}

char *net_graph_prototxt(const struct net_graph *g)
{
	char *text = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&text, &len);
	if (!f)
		return NULL;
	fprintf(f, "# %s stage, as deepdesk instantiated it\n", net_stage_name(g->stage));
	if (g->name && *g->name) {
		fprintf(f, "name: ");
		str(f, g->name);
		fputc('\n', f);
	}
	for (int k = 0; k < g->nnode; k++) {
		const struct net_node *n = &g->node[k];
		if (n->l.type != NET_INPUT && n->l.type != NET_DATA)
			continue;
		for (int t = 0; t < n->l.ntop; t++) {
			const struct net_blob *b = &g->blob[n->top[t]];
			fprintf(f, "input: ");
			str(f, b->name);
			fprintf(f, "\ninput_shape {");
			for (int d = 0; d < b->shape.ndim; d++)
				fprintf(f, " dim: %lld", (long long)b->shape.dim[d]);
			fprintf(f, " }\n");
		}
	}
	for (int k = 0; k < g->nnode; k++) {
		const struct net_node *n = &g->node[k];
		const struct net_layer *l = &n->l;
		if (l->type == NET_INPUT || l->type == NET_DATA)
			continue;
		fprintf(f, "layer {\n  name: ");
		char label[128];
		net_layer_label(l, n->index, label, sizeof label);
		str(f, l->name && *l->name ? l->name : label);
		fprintf(f, "\n  type: \"%s\"\n", net_layer_type_name(l->type));
		for (int i = 0; i < l->nbottom; i++) {
			fprintf(f, "  bottom: ");
			str(f, g->blob[n->bottom[i]].name);
			fputc('\n', f);
		}
		for (int i = 0; i < l->ntop; i++) {
			fprintf(f, "  top: ");
			str(f, g->blob[n->top[i]].name);
			fputc('\n', f);
		}
		params(f, l);
		fprintf(f, "}\n");
	}
	if (fclose(f) != 0) {
		free(text);
		return NULL;
	}
	return text;
}
