/* infer.c — see infer.h.
 *
 * Invariants of struct infer: def, ng and gr are the deploy stage of the network
 * text, built on the handle's own cpu backend with the weights loaded; input and
 * probs point into gr (the Input layer's top, batch×C×H'×W', and the Softmax's top,
 * batch×`classes` values; batch is 1 but for infer_batch_open); img (c*h*w) is scratch for one image's BGR planes; mean is
 * c*h*w or NULL.  Nothing changes after infer_open but the scratch, the blobs and
 * the last probabilities. */
#define _GNU_SOURCE
#include "infer.h"

#include <limits.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../common/fsutil.h"
#include "../common/json.h"
#include "../common/version.h"
#include "../datasets/datum.h"
#include "../datasets/dsinfo.h"
#include "../datasets/image.h"
#include "backend.h"
#include "bundle.h"
#include "feed.h"
#include "graph.h"
#include "modeldir.h"
#include "net.h"
#include "snapshot.h"

#define MAX_TEXT (4u << 20)

struct infer {
	struct infer_prep prep;
	char resize_name[16], mean_name[16];
	enum resize_mode resize;
	enum feed_mean mean_mode;
	char *text;                   /* the network */
	struct net *def;
	struct net_graph *ng;         /* deploy stage, batch 1 */
	struct backend *be;
	struct graph *gr;
	float *input;                 /* (batch, C, H', W') in gr */
	const float *probs;           /* (classes) in gr */
	int ih, iw;                   /* H', W': after the crop */
	float *img;                   /* (C, H, W) scratch */
	float *mean;                  /* (C, H, W) or NULL */
	char mean_path[PATH_MAX];     /* "" when no mean file */
	char **labels;                /* classes strings */
	char *label_buf;              /* labels.txt, its lines cut in place */
	char *names;                  /* "class N" strings */
	size_t bytes;
	cJSON *settings;              /* a job folder's settings.json, or NULL */
	cJSON *manifest;              /* a bundle's info.json, or NULL */
	char input_blob[64], output_blob[64];
	int batch;                    /* images per forward pass (1 but for infer_batch_open) */
};


static int read_json(const char *path, cJSON **out, struct dd_err *err)
{
	int rc = json_read_file(path, 16u << 20, out, err);
	if (rc)
		return rc;
	if (!cJSON_IsObject(*out)) {
		cJSON_Delete(*out);
		*out = NULL;
		return dd_err_set(err, DD_EINVAL, "%s is not a JSON object", path);
	}
	return DD_OK;
}

static int int_in(const cJSON *v, int lo, int hi, int *out)
{
	if (!cJSON_IsNumber(v) || v->valuedouble != (double)(int)v->valuedouble || v->valueint < lo ||
	    v->valueint > hi)
		return 0;
	*out = v->valueint;
	return 1;
}

static int mean_parse(const char *s, enum feed_mean *out)
{
	if (!s)
		return 0;
	if (!strcmp(s, "none"))
		*out = FEED_MEAN_NONE;
	else if (!strcmp(s, "image"))
		*out = FEED_MEAN_IMAGE;
	else if (!strcmp(s, "pixel"))
		*out = FEED_MEAN_PIXEL;
	else
		return 0;
	return 1;
}

/* The dataset folder beside a job folder: DIR/../<settings.dataset>. */
static int dataset_dir(const char *dir, const cJSON *settings, char *buf, size_t len)
{
	const cJSON *ds = json_get(settings, "dataset");
	if (!cJSON_IsNumber(ds) || ds->valuedouble < 1)
		return 0;
	char parent[PATH_MAX];
	snprintf(parent, sizeof parent, "%s", dir);
	char *slash = strrchr(parent, '/');
	if (slash)
		*slash = 0;
	else
		snprintf(parent, sizeof parent, ".");
	snprintf(buf, len, "%s/%lld", parent, (long long)ds->valuedouble);
	return 1;
}

/* A job folder: settings.json, preprocess.json (or the dataset's dataset.json). */
static int read_job(struct infer *h, const char *dir, struct dd_err *err)
{
	char path[PATH_MAX + 32], ds[PATH_MAX];
	modeldir_path(dir, MODELDIR_SETTINGS, path, sizeof path);
	int rc = read_json(path, &h->settings, err);
	if (rc)
		return rc;
	const cJSON *in = json_get(h->settings, "input"), *crop = json_get(h->settings, "crop_size");
	if (!cJSON_IsArray(in) || cJSON_GetArraySize(in) != 3 || !int_in(cJSON_GetArrayItem(in, 0), 1, 4, &h->prep.c) ||
	    !int_in(cJSON_GetArrayItem(in, 1), 1, 1 << 16, &h->prep.h) ||
	    !int_in(cJSON_GetArrayItem(in, 2), 1, 1 << 16, &h->prep.w) ||
	    !int_in(json_get(h->settings, "classes"), 1, 1 << 20, &h->prep.classes) ||
	    (crop && !cJSON_IsNull(crop) && !int_in(crop, 0, 1 << 16, &h->prep.crop)))
		return dd_err_set(err, DD_EINVAL, "%s lacks input [C,H,W], classes or crop_size: was the model trained?",
				  path);
	h->mean_mode = FEED_MEAN_IMAGE;
	if (json_get(h->settings, "mean") && !mean_parse(cJSON_GetStringValue(json_get(h->settings, "mean")), &h->mean_mode))
		return dd_err_set(err, DD_EINVAL, "%s: mean must be none, image or pixel", path);
	int have_ds = dataset_dir(dir, h->settings, ds, sizeof ds);

	/* the resize mode: the model's copy, else the dataset's own record */
	cJSON *pre = NULL;
	const char *mode = NULL;
	modeldir_path(dir, MODELDIR_PREPROCESS, path, sizeof path);
	if (access(path, R_OK) != 0 && have_ds)
		dsinfo_path(ds, DSINFO_FILE, path, sizeof path);
	if (access(path, R_OK) == 0) {
		if ((rc = read_json(path, &pre, err)))
			return rc;
		mode = cJSON_GetStringValue(json_get(pre, "resize_mode"));
		if (!mode)
			mode = cJSON_GetStringValue(json_get(dsinfo_options(pre), "resize_mode"));
	}
	rc = DD_OK;
	if (!mode)
		mode = "squash"; /* DIGITS' default */
	if (resize_mode_parse(mode, &h->resize) != 0)
		rc = dd_err_set(err, DD_EINVAL, "%s: unknown resize mode \"%.32s\"", path, mode);
	cJSON_Delete(pre);
	if (rc)
		return rc;

	modeldir_path(dir, MODELDIR_MEAN, h->mean_path, sizeof h->mean_path);
	if (access(h->mean_path, R_OK) != 0 && have_ds)
		dsinfo_path(ds, DSINFO_MEAN, h->mean_path, sizeof h->mean_path);
	return DD_OK;
}

/* A bundle: info.json, checked against the files (bundle.h) before any is read. */
static int read_bundle(struct infer *h, const char *dir, struct dd_err *err)
{
	char path[PATH_MAX + 32];
	cJSON *j = NULL;
	snprintf(path, sizeof path, "%s/" BUNDLE_MANIFEST, dir);
	int rc = read_json(path, &j, err);
	if (rc)
		return rc;
	h->manifest = j;
	const cJSON *in = json_get(j, "input"), *mean = json_get(j, "mean");
	const char *mode = cJSON_GetStringValue(json_get(j, "resize_mode"));
	const char *order = cJSON_GetStringValue(json_get(in, "order"));
	if (!int_in(json_get(in, "channels"), 1, 4, &h->prep.c) || !int_in(json_get(in, "height"), 1, 1 << 16, &h->prep.h) ||
	    !int_in(json_get(in, "width"), 1, 1 << 16, &h->prep.w) || !int_in(json_get(j, "classes"), 1, 1 << 20, &h->prep.classes) ||
	    !int_in(json_get(j, "crop"), 0, 1 << 16, &h->prep.crop) || !mode || resize_mode_parse(mode, &h->resize) != 0 ||
	    !mean_parse(cJSON_GetStringValue(json_get(mean, "mode")), &h->mean_mode) || !order ||
	    strcmp(order, h->prep.c == 3 ? "BGR" : "gray") != 0)
		return dd_err_set(err, DD_EINVAL,
				  "%s is not a deepdesk bundle manifest (input.channels/height/width/order, classes, crop, "
				  "resize_mode and mean.mode are required and must be valid)",
				  path);
	if ((rc = bundle_verify(dir, j, err))) {
		dd_err_prefix(err, "bundle %s", dir);
		return rc;
	}
	snprintf(h->mean_path, sizeof h->mean_path, "%s/mean.binaryproto", dir);
	return DD_OK;
}

/* The manifest against the network, the weights and labels.txt, once the deploy
 * graph is built and before the weights are loaded: the input the network takes,
 * the crop and scale it applies, the classes of its last InnerProduct's weights
 * and the lines of labels.txt must all be what info.json says. */
static int check_bundle(struct infer *h, const char *dir, const char *wpath, struct dd_err *err)
{
	const cJSON *j = h->manifest;
	const cJSON *shape = json_get(json_get(j, "net_input"), "shape");
	int want[4] = { 1, h->prep.c, h->ih, h->iw };
	if (shape) {
		int ok = cJSON_IsArray(shape) && cJSON_GetArraySize(shape) == 4;
		for (int i = 0; ok && i < 4; i++) {
			int v;
			ok = int_in(cJSON_GetArrayItem(shape, i), 0, 1 << 16, &v) && v == want[i];
		}
		if (!ok)
			return dd_err_set(err, DD_EINVAL,
					  "info.json: net_input.shape is not [1, %d, %d, %d], the input network.prototxt takes",
					  want[1], want[2], want[3]);
	}
	int crop = -1;
	if (int_in(json_get(j, "crop"), 0, 1 << 16, &crop) && crop != h->prep.crop)
		return dd_err_set(err, DD_EINVAL, "info.json: crop %d, network.prototxt's deploy stage crops to %d", crop,
				  h->prep.crop);
	const cJSON *scale = json_get(j, "scale");
	if (cJSON_IsNumber(scale) && fabs(scale->valuedouble - h->prep.scale) > 1e-6 * fabs(h->prep.scale))
		return dd_err_set(err, DD_EINVAL, "info.json: scale %g, network.prototxt's data layer scales by %g",
				  scale->valuedouble, h->prep.scale);

	/* the last InnerProduct's weights: (classes, inputs) */
	const struct net_node *last = NULL;
	for (int k = 0; k < h->ng->nnode; k++)
		if (h->ng->node[k].l.type == NET_INNER_PRODUCT)
			last = &h->ng->node[k];
	if (last) {
		struct st_file *f = NULL;
		struct st_tensor t;
		char name[160];
		snprintf(name, sizeof name, "%s.0", last->l.name);
		int rc = st_open(wpath, &f, err);
		if (rc) {
			dd_err_prefix(err, "weights.safetensors");
			return rc;
		}
		rc = st_find(f, name, &t);
		int64_t rows = rc == DD_OK && t.ndim >= 1 ? t.shape[0] : -1;
		st_close(f);
		if (rows < 0)
			return dd_err_set(err, DD_EINVAL, "weights.safetensors has no tensor %s, the last layer's weights", name);
		if (rows != h->prep.classes)
			return dd_err_set(err, DD_EINVAL,
					  "weights.safetensors: the last layer %s has %lld outputs, info.json says %d classes",
					  last->l.name, (long long)rows, h->prep.classes);
	}

	/* labels.txt: one line a class */
	char path[PATH_MAX + 32];
	modeldir_path(dir, MODELDIR_LABELS, path, sizeof path);
	char *text = NULL;
	size_t len = 0;
	if (access(path, F_OK) == 0) {
		int rc = fs_read_file(path, 64u << 20, &text, &len, err);
		if (rc)
			return rc;
		int lines = 0;
		for (size_t i = 0; i < len; i++)
			if (text[i] == '\n' && (i == 0 || text[i - 1] != '\n'))
				lines++;
		if (len && text[len - 1] != '\n')
			lines++;
		free(text);
		if (lines != h->prep.classes)
			return dd_err_set(err, DD_EINVAL, "labels.txt: %d lines, info.json says %d classes", lines,
					  h->prep.classes);
	}
	return DD_OK;
}

static int read_labels(struct infer *h, const char *dir, struct dd_err *err)
{
	char path[PATH_MAX + 32];
	modeldir_path(dir, MODELDIR_LABELS, path, sizeof path);
	size_t len = 0;
	h->label_buf = NULL;
	if (access(path, R_OK) == 0) {
		int rc = fs_read_file(path, 64u << 20, &h->label_buf, &len, err);
		if (rc)
			return rc;
	}
	int n = h->prep.classes;
	h->labels = calloc((size_t)n, sizeof *h->labels);
	h->names = malloc((size_t)n * 16); /* "class N" for what labels.txt does not name */
	if (!h->labels || !h->names)
		return dd_err_set(err, DD_ENOMEM, "out of memory");
	char *p = h->label_buf;
	for (int i = 0; i < n; i++) {
		if (p && *p) {
			char *nl = strchr(p, '\n');
			if (nl)
				*nl = 0;
			size_t l = strlen(p);
			if (l && p[l - 1] == '\r')
				p[l - 1] = 0;
			h->labels[i] = p;
			p = nl ? nl + 1 : p + l;
		} else {
			snprintf(h->names + (size_t)i * 16, 16, "class %d", i);
			h->labels[i] = h->names + (size_t)i * 16;
		}
	}
	return DD_OK;
}

/* infer_open at batch `batch`: the deploy graph holds batch images at once. */
static int open_at(const char *dir, const char *weights, int batch, struct infer **out, struct dd_err *err)
{
	*out = NULL;
	struct infer *h = calloc(1, sizeof *h);
	if (!h)
		return dd_err_set(err, DD_ENOMEM, "out of memory");
	char path[PATH_MAX + 32], wpath[PATH_MAX + 32];
	int rc;
	snprintf(path, sizeof path, "%s/" BUNDLE_MANIFEST, dir);
	int bundle = access(path, R_OK) == 0;
	if ((rc = bundle ? read_bundle(h, dir, err) : read_job(h, dir, err)))
		goto fail;
	if (!weights && !bundle) {
		rc = dd_err_set(err, DD_EINVAL, "%s is a model job's folder: name one of its snapshots", dir);
		goto fail;
	}
	snprintf(wpath, sizeof wpath, "%s", weights ? weights : "");
	if (!weights)
		snprintf(wpath, sizeof wpath, "%s/weights.safetensors", dir);
	modeldir_path(dir, MODELDIR_NETWORK, path, sizeof path);
	if ((rc = fs_read_file(path, MAX_TEXT, &h->text, NULL, err)))
		goto fail;
	if ((rc = net_parse(h->text, strlen(h->text), &h->def, err))) {
		dd_err_prefix(err, "%s", path);
		goto fail;
	}
	h->batch = batch;
	struct net_input in = { .n = batch, .c = h->prep.c, .h = h->prep.h, .w = h->prep.w, .crop = h->prep.crop,
				.classes = h->prep.classes };
	if ((rc = net_instantiate(h->def, NET_STAGE_DEPLOY, &in, &h->ng, err))) {
		dd_err_prefix(err, "%s (deploy stage)", path);
		goto fail;
	}
	h->prep.crop = h->ng->in.crop;
	h->ih = h->prep.crop ? h->prep.crop : h->prep.h;
	h->iw = h->prep.crop ? h->prep.crop : h->prep.w;

	/* the val stage's data layer: the transform_param validation used */
	h->prep.scale = 1;
	const float *mean_value = NULL;
	int nmean_value = 0;
	struct net_graph *vg = NULL;
	struct net_input vin = in;
	vin.n = 0;
	if (net_instantiate(h->def, NET_STAGE_VAL, &vin, &vg, NULL) == DD_OK) {
		for (int k = 0; k < vg->nnode; k++)
			if (vg->node[k].l.type == NET_DATA) {
				const struct net_data_param *d = &vg->node[k].l.data;
				if (d->scale > 0 || d->scale < 0)
					h->prep.scale = d->scale;
				mean_value = d->mean_value; /* borrowed from def */
				nmean_value = d->nmean_value;
				break;
			}
		net_graph_free(vg);
	}
	snprintf(h->mean_name, sizeof h->mean_name, "%s",
		 mean_value ? "values" : h->mean_mode == FEED_MEAN_NONE ? "none" :
		 h->mean_mode == FEED_MEAN_PIXEL ? "pixel" : "image");
	snprintf(h->resize_name, sizeof h->resize_name, "%s", resize_mode_name(h->resize));
	h->prep.mean = h->mean_name;
	h->prep.resize = h->resize_name;
	if (mean_value || h->mean_mode == FEED_MEAN_NONE)
		h->mean_path[0] = 0;
	if ((rc = feed_mean_load(h->mean_path, h->mean_mode, mean_value, nmean_value, h->prep.c, h->prep.h, h->prep.w,
				 &h->mean, err))) {
		if (bundle)
			dd_err_prefix(err, "bundle %s: against info.json's input", dir);
		goto fail;
	}

	/* the graph and its weights */
	if ((rc = backend_create("cpu", &h->be, err)) || (rc = graph_create(h->ng, h->be, 0, &h->gr, err)))
		goto fail;
	if (bundle && (rc = check_bundle(h, dir, wpath, err))) {
		dd_err_prefix(err, "bundle %s", dir);
		goto fail;
	}
	if ((rc = snapshot_load_weights(h->gr, wpath, 0, NULL, 0, err)))
		goto fail;
	const struct net_node *first = &h->ng->node[0], *soft = NULL;
	for (int k = 0; k < h->ng->nnode; k++)
		if (h->ng->node[k].l.type == NET_SOFTMAX)
			soft = &h->ng->node[k];
	if (first->l.ntop < 1 || !soft) {
		rc = dd_err_set(err, DD_EINVAL, "%s: the deploy stage has no input or no Softmax", path);
		goto fail;
	}
	snprintf(h->input_blob, sizeof h->input_blob, "%s", h->ng->blob[first->top[0]].name);
	snprintf(h->output_blob, sizeof h->output_blob, "%s", h->ng->blob[soft->top[0]].name);
	struct net_shape is, os;
	h->input = graph_blob(h->gr, h->input_blob, &is);
	h->probs = graph_blob(h->gr, h->output_blob, &os);
	int64_t ocount = 1;
	for (int d = 0; d < os.ndim; d++)
		ocount *= os.dim[d];
	if (!h->input || !h->probs || ocount != (int64_t)batch * h->prep.classes) {
		rc = dd_err_set(err, DD_EINVAL, "%s: the Softmax gives %lld values, the model has %d classes", path,
				(long long)(ocount / batch), h->prep.classes);
		goto fail;
	}
	h->img = malloc((size_t)h->prep.c * h->prep.h * h->prep.w * sizeof(float));
	if (!h->img) {
		rc = dd_err_set(err, DD_ENOMEM, "out of memory");
		goto fail;
	}
	if ((rc = read_labels(h, dir, err)))
		goto fail;
	size_t px = (size_t)h->prep.c * h->prep.h * h->prep.w;
	h->bytes = sizeof *h + ((size_t)graph_param_count(h->gr) + (size_t)h->ng->activations + px * 2) * sizeof(float) +
		   strlen(h->text);
	*out = h;
	return DD_OK;
fail:
	infer_close(h);
	return rc;
}

int infer_open(const char *dir, const char *weights, struct infer **out, struct dd_err *err)
{
	return open_at(dir, weights, 1, out, err);
}

void infer_close(struct infer *h)
{
	if (!h)
		return;
	graph_free(h->gr);
	net_graph_free(h->ng);
	net_free(h->def);
	backend_free(h->be);
	free(h->labels);
	free(h->names);
	free(h->label_buf);
	free(h->text);
	free(h->img);
	free(h->mean);
	cJSON_Delete(h->settings);
	cJSON_Delete(h->manifest);
	free(h);
}

const struct infer_prep *infer_prep(const struct infer *h) { return &h->prep; }
size_t infer_bytes(const struct infer *h) { return h->bytes; }
const char *infer_label(const struct infer *h, int i) { return h->labels[i]; }
const float *infer_probabilities(const struct infer *h) { return h->probs; }
const float *infer_input(const struct infer *h, size_t *count)
{
	if (count)
		*count = (size_t)h->prep.c * h->ih * h->iw;
	return h->input;
}
char *infer_deploy_text(const struct infer *h) { return net_graph_prototxt(h->ng); }
const char *infer_network_text(const struct infer *h) { return h->text; }
const char *infer_mean_path(const struct infer *h) { return h->mean_path[0] ? h->mean_path : NULL; }

int infer_classify_image(struct infer *h, const struct image *im, int top, struct infer_pred *pred, int *npred,
			 struct dd_err *err)
{
	/* slot 0 of the batch (a handle from infer_open has a batch of one) */
	*npred = 0;
	int rc = infer_batch_set_image(h, 0, im, err);
	if (rc || (rc = graph_forward(h->gr, 0, NULL, err)))
		return rc;
	*npred = infer_top(h, h->probs, top, pred);
	return DD_OK;
}

/* A decode error named after the file.  image_decode is given no name (an upload's
 * name is no promise of its format, so its extension must not be checked) and
 * calls it "image": "cat.jpg: truncated JPEG (...)", not "cat.jpg: image: ...". */
static void name_decode_error(struct dd_err *err, const char *name)
{
	static const char anon[] = "image: ";
	if (!name)
		return;
	if (strncmp(err->msg, anon, sizeof anon - 1) != 0) {
		dd_err_prefix(err, "%s", name);
		return;
	}
	char rest[sizeof err->msg];
	snprintf(rest, sizeof rest, "%s", err->msg + sizeof anon - 1);
	snprintf(err->msg, sizeof err->msg, "%s: %s", name, rest);
}

int infer_classify(struct infer *h, const void *data, size_t len, const char *name, int top,
		   struct infer_pred *pred, int *npred, int *w, int *hgt, struct dd_err *err)
{
	*npred = 0;
	struct image im = { 0 };
	int rc = image_decode(data, len, NULL, 0, &im, err);
	if (rc) {
		name_decode_error(err, name);
		return rc;
	}
	if (w)
		*w = im.w;
	if (hgt)
		*hgt = im.h;
	rc = infer_classify_image(h, &im, top, pred, npred, err);
	image_free(&im);
	return rc;
}

cJSON *infer_manifest(const struct infer *h, const char *snapshot)
{
	cJSON *j = cJSON_CreateObject();
	if (!j)
		return NULL;
	cJSON_AddStringToObject(j, "format", "deepdesk-bundle");
	cJSON_AddNumberToObject(j, "format_version", BUNDLE_FORMAT_VERSION);
	cJSON_AddStringToObject(j, "deepdesk", DD_VERSION);
	cJSON_AddStringToObject(j, "network", "network.prototxt");
	cJSON_AddStringToObject(j, "stage", "deploy");
	cJSON_AddStringToObject(j, "deploy", "deploy.prototxt");
	cJSON_AddStringToObject(j, "weights", "weights.safetensors");
	if (snapshot)
		cJSON_AddStringToObject(j, "snapshot", snapshot);
	cJSON_AddStringToObject(j, "labels", "labels.txt");
	cJSON_AddNumberToObject(j, "classes", h->prep.classes);
	cJSON *in = cJSON_AddObjectToObject(j, "input");
	cJSON_AddNumberToObject(in, "channels", h->prep.c);
	cJSON_AddNumberToObject(in, "height", h->prep.h);
	cJSON_AddNumberToObject(in, "width", h->prep.w);
	cJSON_AddStringToObject(in, "order", h->prep.c == 3 ? "BGR" : "gray");
	cJSON_AddStringToObject(in, "layout", "CHW");
	cJSON_AddStringToObject(in, "range", "0-255");
	cJSON_AddStringToObject(j, "resize_mode", h->prep.resize);
	cJSON_AddNumberToObject(j, "crop", h->prep.crop);
	cJSON *mean = cJSON_AddObjectToObject(j, "mean");
	cJSON_AddStringToObject(mean, "mode", h->mean_mode == FEED_MEAN_NONE ? "none" :
					      h->mean_mode == FEED_MEAN_PIXEL ? "pixel" : "image");
	if (strcmp(h->prep.mean, "values") == 0)
		cJSON_AddStringToObject(mean, "values", "the data layer's transform_param mean_value (in network.prototxt)");
	else if (h->mean_path[0]) {
		cJSON_AddStringToObject(mean, "file", "mean.binaryproto");
		cJSON_AddStringToObject(mean, "png", "mean.png");
	}
	cJSON_AddNumberToObject(j, "scale", h->prep.scale);
	cJSON *net = cJSON_AddObjectToObject(j, "net_input");
	cJSON *shape = cJSON_AddArrayToObject(net, "shape");
	int dims[4] = { 1, h->prep.c, h->ih, h->iw };
	for (int i = 0; i < 4; i++)
		cJSON_AddItemToArray(shape, cJSON_CreateNumber(dims[i]));
	cJSON_AddStringToObject(net, "blob", h->input_blob);
	cJSON_AddStringToObject(j, "output_blob", h->output_blob);
	cJSON_AddStringToObject(j, "preprocess",
				"decode; convert to the channels; resize to width x height with resize_mode; "
				"C x H x W float planes in BGR order; subtract the mean; multiply by scale; "
				"take the centre crop x crop when crop > 0");
	if (h->settings)
		cJSON_AddItemToObject(j, "settings", cJSON_Duplicate(h->settings, 1));
	return j;
}

/* ---- inside the network ---- */

static void blob_shape(struct infer_blob *b, const struct net_shape *s)
{
	b->ndim = s->ndim < 4 ? s->ndim : 4;
	for (int d = 0; d < b->ndim; d++)
		b->dim[d] = s->dim[d];
}

int infer_visit(struct infer *h, int (*fn)(const struct infer_blob *b, void *ud), void *ud)
{
	const struct net_graph *ng = h->ng;
	for (int k = 0; k < ng->nnode; k++) {
		const struct net_node *nd = &ng->node[k];
		if (nd->in_place)
			continue; /* its values are already shown under the blob's maker */
		for (int t = 0; t < nd->l.ntop; t++) {
			const struct net_blob *nb = &ng->blob[nd->top[t]];
			struct net_shape sh;
			struct infer_blob b = { .name = nb->name, .layer = nd->l.name ? nd->l.name : "",
						.type = net_layer_type_name(nd->l.type) };
			b.data = graph_blob(h->gr, nb->name, &sh);
			if (!b.data)
				continue;
			blob_shape(&b, &sh);
			b.count = nb->count;
			if (nd->l.type == NET_CONVOLUTION && t == 0)
				for (int i = 0; i < graph_nparam(h->gr); i++) {
					const struct graph_param *p = graph_param(h->gr, i);
					if (strcmp(p->layer, b.layer) != 0 || strcmp(p->role, "weights") != 0 ||
					    p->shape.ndim != 4)
						continue;
					b.weights = p->w;
					b.wcount = p->count;
					for (int d = 0; d < 4; d++)
						b.wdim[d] = p->shape.dim[d];
					break;
				}
			int rc = fn(&b, ud);
			if (rc)
				return rc;
		}
	}
	return 0;
}

void infer_stats(const float *v, int64_t n, struct infer_stats *s)
{
	memset(s, 0, sizeof *s);
	if (n < 1)
		return;
	double sum = 0, sq = 0;
	float lo = v[0], hi = v[0];
	for (int64_t i = 0; i < n; i++) {
		sum += v[i];
		sq += (double)v[i] * v[i];
		if (v[i] < lo)
			lo = v[i];
		if (v[i] > hi)
			hi = v[i];
	}
	s->mean = sum / (double)n;
	double var = sq / (double)n - s->mean * s->mean;
	s->std = var > 0 ? sqrt(var) : 0;
	s->min = lo;
	s->max = hi;
	double width = ((double)hi - lo) / INFER_HIST_BINS;
	for (int64_t i = 0; i < n; i++) {
		int bin = width > 0 ? (int)(((double)v[i] - lo) / width) : 0;
		s->hist[bin < 0 ? 0 : bin >= INFER_HIST_BINS ? INFER_HIST_BINS - 1 : bin]++;
	}
}

/* A dark-blue to yellow colour map (five stops, linear between them), so that a
 * one-channel map reads as heat rather than as a photo. */
static void colour_map(uint8_t g, uint8_t *rgb)
{
	static const uint8_t stop[5][3] = {
		{ 48, 18, 59 }, { 50, 130, 220 }, { 40, 200, 120 }, { 240, 200, 40 }, { 250, 250, 180 },
	};
	int seg = g * 4 / 256, base = seg * 64;
	int f = (g - base) * 4; /* 0..255 within the segment */
	for (int c = 0; c < 3; c++)
		rgb[c] = (uint8_t)(stop[seg][c] + (stop[seg + 1][c] - stop[seg][c]) * f / 256);
}

int infer_tile(const float *v, int n, int h, int w, enum infer_tile_mode mode, int max_side, struct image *out,
	       int *shown, struct dd_err *err)
{
	*out = (struct image){ 0 };
	if (shown)
		*shown = 0;
	if (n < 1 || h < 1 || w < 1 || max_side < 8)
		return dd_err_set(err, DD_EINVAL, "nothing to draw");
	int per = mode == INFER_TILE_BGR ? 3 : 1;
	int64_t total = (int64_t)n * per * h * w;
	float lo = v[0], hi = v[0];
	for (int64_t i = 0; i < total; i++) {
		if (v[i] < lo)
			lo = v[i];
		if (v[i] > hi)
			hi = v[i];
	}
	float span = hi > lo ? hi - lo : 1;
	/* the tile's size: enlarged up to 8x while a tile is under 32 px, and at most
	 * the whole image */
	int tw = w, th = h;
	while (tw * 2 <= 32 && th * 2 <= 32 && tw <= w * 4) {
		tw *= 2;
		th *= 2;
	}
	if (tw > max_side || th > max_side) {
		int64_t m = tw > th ? tw : th;
		tw = (int)((int64_t)tw * max_side / m);
		th = (int)((int64_t)th * max_side / m);
		tw = tw > 0 ? tw : 1;
		th = th > 0 ? th : 1;
	}
	/* the grid: near square, as many planes as fit */
	int cols = 1;
	while (cols * cols < n)
		cols++;
	int maxcols = (max_side + 1) / (tw + 1), maxrows = (max_side + 1) / (th + 1);
	while (cols > 1 && cols > maxcols) {
		/* too wide: shrink the tiles if they were enlarged, else show fewer planes */
		if (tw > w && th > h) {
			tw /= 2;
			th /= 2;
			maxcols = (max_side + 1) / (tw + 1);
			maxrows = (max_side + 1) / (th + 1);
		} else
			cols = maxcols;
	}
	int rows = (n + cols - 1) / cols;
	if (rows > maxrows)
		rows = maxrows;
	int count = cols * rows < n ? cols * rows : n;
	if (rows * cols > count)
		rows = (count + cols - 1) / cols;
	int oc = mode == INFER_TILE_GRAY ? 1 : 3;
	int ow = cols * (tw + 1) - 1, oh = rows * (th + 1) - 1;
	out->w = ow;
	out->h = oh;
	out->c = oc;
	out->px = calloc((size_t)ow * oh * oc, 1);
	if (!out->px)
		return dd_err_set(err, DD_ENOMEM, "out of memory");
	if (oc == 3) /* the gaps: mid gray */
		memset(out->px, 96, (size_t)ow * oh * oc);
	for (int t = 0; t < count; t++) {
		int gx = (t % cols) * (tw + 1), gy = (t / cols) * (th + 1);
		const float *plane = v + (int64_t)t * per * h * w;
		for (int y = 0; y < th; y++) {
			int sy = (int)((int64_t)y * h / th);
			uint8_t *row = out->px + ((size_t)(gy + y) * ow + gx) * oc;
			for (int x = 0; x < tw; x++) {
				int sx = (int)((int64_t)x * w / tw);
				if (mode == INFER_TILE_BGR) {
					for (int c = 0; c < 3; c++) /* B G R planes -> R G B pixels */
						row[x * 3 + c] = (uint8_t)((plane[(int64_t)(2 - c) * h * w + sy * w + sx] - lo) /
									   span * 255.0f + 0.5f);
					continue;
				}
				uint8_t g = (uint8_t)((plane[sy * w + sx] - lo) / span * 255.0f + 0.5f);
				if (mode == INFER_TILE_GRAY)
					row[x] = g;
				else
					colour_map(g, row + x * 3);
			}
		}
	}
	if (shown)
		*shown = count;
	return DD_OK;
}

/* ---- the cache ---- */

struct entry {
	struct entry *next;
	struct infer *h;
	char dir[PATH_MAX], weights[PATH_MAX];
	dev_t dev;
	ino_t ino;
	off_t size;
	struct timespec mtime;
	int busy;
	uint64_t used;       /* the tick of its last lending */
};

struct infer_cache {
	pthread_mutex_t mu;
	pthread_cond_t cv;
	struct entry *head;
	int n, max_models;
	size_t bytes, max_bytes;
	uint64_t tick;
};

struct infer_cache *infer_cache_new(int max_models, size_t max_bytes)
{
	struct infer_cache *c = calloc(1, sizeof *c);
	if (!c)
		return NULL;
	pthread_mutex_init(&c->mu, NULL);
	pthread_cond_init(&c->cv, NULL);
	c->max_models = max_models > 0 ? max_models : 4;
	c->max_bytes = max_bytes > 0 ? max_bytes : (size_t)1 << 30;
	return c;
}

void infer_cache_free(struct infer_cache *c)
{
	if (!c)
		return;
	for (struct entry *e = c->head, *nx; e; e = nx) {
		nx = e->next;
		infer_close(e->h);
		free(e);
	}
	pthread_cond_destroy(&c->cv);
	pthread_mutex_destroy(&c->mu);
	free(c);
}

/* Unlink idle entries, least recently used first, while over a bound; they go on
 * the list *gone for the caller to close outside the lock.  Call with mu held. */
static void evict(struct infer_cache *c, struct entry **gone)
{
	while (c->n > c->max_models || c->bytes > c->max_bytes) {
		struct entry **victim = NULL;
		for (struct entry **p = &c->head; *p; p = &(*p)->next)
			if (!(*p)->busy && (!victim || (*p)->used < (*victim)->used))
				victim = p;
		if (!victim)
			return; /* all lent: the next release tries again */
		struct entry *e = *victim;
		*victim = e->next;
		c->n--;
		c->bytes -= infer_bytes(e->h);
		e->next = *gone;
		*gone = e;
	}
}

static void close_all(struct entry *gone)
{
	for (struct entry *nx; gone; gone = nx) {
		nx = gone->next;
		infer_close(gone->h);
		free(gone);
	}
}

int infer_cache_get(struct infer_cache *c, const char *dir, const char *weights, struct infer **out, int *hit,
		    struct dd_err *err)
{
	*out = NULL;
	if (hit)
		*hit = 0;
	char wpath[PATH_MAX];
	if (weights)
		snprintf(wpath, sizeof wpath, "%s", weights);
	else
		snprintf(wpath, sizeof wpath, "%s/weights.safetensors", dir);
	struct stat st;
	if (stat(wpath, &st) != 0)
		return dd_err_set(err, DD_ENOENT, "%s: no such weights file", wpath);
	pthread_mutex_lock(&c->mu);
	for (;;) {
		struct entry *same = NULL, *idle = NULL;
		for (struct entry *e = c->head; e; e = e->next)
			if (e->dev == st.st_dev && e->ino == st.st_ino && e->size == st.st_size &&
			    e->mtime.tv_sec == st.st_mtim.tv_sec && e->mtime.tv_nsec == st.st_mtim.tv_nsec &&
			    !strcmp(e->dir, dir) && !strcmp(e->weights, wpath)) {
				same = e;
				if (!e->busy) {
					idle = e;
					break;
				}
			}
		if (idle) {
			idle->busy = 1;
			idle->used = ++c->tick;
			*out = idle->h;
			if (hit)
				*hit = 1;
			pthread_mutex_unlock(&c->mu);
			return DD_OK;
		}
		if (!same)
			break;
		pthread_cond_wait(&c->cv, &c->mu); /* lent: wait for it rather than load it twice */
	}
	pthread_mutex_unlock(&c->mu);

	struct entry *e = calloc(1, sizeof *e);
	if (!e)
		return dd_err_set(err, DD_ENOMEM, "out of memory");
	int rc = infer_open(dir, weights, &e->h, err);
	if (rc) {
		free(e);
		return rc;
	}
	snprintf(e->dir, sizeof e->dir, "%s", dir);
	snprintf(e->weights, sizeof e->weights, "%s", wpath);
	e->dev = st.st_dev;
	e->ino = st.st_ino;
	e->size = st.st_size;
	e->mtime = st.st_mtim;
	e->busy = 1;
	struct entry *gone = NULL;
	pthread_mutex_lock(&c->mu);
	e->used = ++c->tick;
	e->next = c->head;
	c->head = e;
	c->n++;
	c->bytes += infer_bytes(e->h);
	evict(c, &gone);
	pthread_mutex_unlock(&c->mu);
	close_all(gone);
	*out = e->h;
	return DD_OK;
}

void infer_cache_release(struct infer_cache *c, struct infer *h)
{
	if (!h)
		return;
	struct entry *gone = NULL;
	pthread_mutex_lock(&c->mu);
	for (struct entry *e = c->head; e; e = e->next)
		if (e->h == h)
			e->busy = 0;
	evict(c, &gone);
	pthread_cond_broadcast(&c->cv);
	pthread_mutex_unlock(&c->mu);
	close_all(gone);
}

void infer_cache_stats(struct infer_cache *c, int *models, size_t *bytes)
{
	pthread_mutex_lock(&c->mu);
	if (models)
		*models = c->n;
	if (bytes)
		*bytes = c->bytes;
	pthread_mutex_unlock(&c->mu);
}

cJSON *infer_predictions_json(const struct infer_pred *pred, int n)
{
	cJSON *arr = cJSON_CreateArray();
	for (int i = 0; arr && i < n; i++) {
		cJSON *o = cJSON_CreateObject();
		if (!o || !cJSON_AddItemToArray(arr, o)) {
			cJSON_Delete(o);
			cJSON_Delete(arr);
			return NULL;
		}
		cJSON_AddStringToObject(o, "label", pred[i].label);
		cJSON_AddNumberToObject(o, "index", pred[i].index);
		cJSON_AddNumberToObject(o, "probability", pred[i].probability);
	}
	return arr;
}

/* ---- batches (infer_batch_*: classify many) ----
 *
 * A handle opened by infer_batch_open has a deploy graph of `batch` images: the
 * caller fills slots with infer_batch_set_*, runs one forward pass for all of them
 * and reads each slot's probabilities.  A slot is prepared exactly as
 * infer_classify_image prepares its one image, so a batch gives, slot for slot,
 * what classifying each image alone gives (tests/unit/test_eval.c checks it). */

int infer_batch_open(const char *dir, const char *weights, int batch, struct infer **out, struct dd_err *err)
{
	*out = NULL;
	if (batch < 1 || batch > 4096)
		return dd_err_set(err, DD_EINVAL, "batch size %d is out of range (1 to 4096)", batch);
	return open_at(dir, weights, batch, out, err);
}

int infer_batch_size(const struct infer *h) { return h->batch; }

/* The slot's part of the input: C×H'×W' floats. */
static float *slot_input(struct infer *h, int slot)
{
	return h->input + (size_t)slot * h->prep.c * h->ih * h->iw;
}

/* img (C×H×W BGR planes, the dataset's size) through mean, scale and the centre
 * crop into slot. */
static void slot_transform(struct infer *h, int slot)
{
	int y0 = (h->prep.h - h->ih) / 2, x0 = (h->prep.w - h->iw) / 2;
	feed_transform(h->img, h->prep.c, h->prep.h, h->prep.w, h->mean, h->prep.scale, y0, x0, h->ih, h->iw, 0,
		       slot_input(h, slot));
}

int infer_batch_set_image(struct infer *h, int slot, const struct image *im, struct dd_err *err)
{
	if (slot < 0 || slot >= h->batch)
		return dd_err_set(err, DD_EINVAL, "slot %d is outside the batch of %d", slot, h->batch);
	struct image conv = { 0 }, sized = { 0 };
	const struct image *src = im;
	int rc = DD_OK;
	if (im->c != h->prep.c) {
		conv = (struct image){ im->w, im->h, im->c, malloc((size_t)im->w * im->h * im->c) };
		if (!conv.px)
			return dd_err_set(err, DD_ENOMEM, "out of memory");
		memcpy(conv.px, im->px, (size_t)im->w * im->h * im->c);
		if ((rc = image_set_channels(&conv, h->prep.c, err)))
			goto out;
		src = &conv;
	}
	if (src->w != h->prep.w || src->h != h->prep.h) {
		if ((rc = image_resize(src, h->prep.w, h->prep.h, h->resize, 0, &sized, err)))
			goto out;
		src = &sized;
	}
	image_to_planes(src, NULL, h->img);
	slot_transform(h, slot);
out:
	image_free(&conv);
	image_free(&sized);
	return rc;
}

int infer_batch_set_encoded(struct infer *h, int slot, const void *data, size_t len, const char *name,
			    struct dd_err *err)
{
	struct image im = { 0 };
	int rc = image_decode(data, len, NULL, 0, &im, err);
	if (rc) {
		name_decode_error(err, name);
		return rc;
	}
	rc = infer_batch_set_image(h, slot, &im, err);
	image_free(&im);
	return rc;
}

int infer_batch_set_datum(struct infer *h, int slot, const struct datum *d, const char *name, struct dd_err *err)
{
	if (slot < 0 || slot >= h->batch)
		return dd_err_set(err, DD_EINVAL, "slot %d is outside the batch of %d", slot, h->batch);
	if (d->encoded)
		return infer_batch_set_encoded(h, slot, d->data, d->data_len, name, err);
	size_t plane = (size_t)d->width * d->height;
	if ((d->channels != 1 && d->channels != 3) || d->width < 1 || d->height < 1 ||
	    plane * d->channels != d->data_len)
		return dd_err_set(err, DD_EINVAL, "%s: raw record of %zu bytes does not match its shape %d×%d×%d",
				  name ? name : "record", d->data_len, d->channels, d->height, d->width);
	if (d->channels == h->prep.c && d->height == h->prep.h && d->width == h->prep.w) {
		/* already the dataset's BGR planes: no detour through an image */
		size_t n = plane * d->channels;
		for (size_t i = 0; i < n; i++)
			h->img[i] = (float)d->data[i];
		slot_transform(h, slot);
		return DD_OK;
	}
	/* another shape: back to interleaved RGB, then the way an upload goes */
	struct image im = { d->width, d->height, d->channels, malloc(d->data_len) };
	if (!im.px)
		return dd_err_set(err, DD_ENOMEM, "out of memory");
	image_from_planes(&im, d->data);
	int rc = infer_batch_set_image(h, slot, &im, err);
	image_free(&im);
	return rc;
}

int infer_batch_run(struct infer *h, int n, struct dd_err *err)
{
	if (n < 1 || n > h->batch)
		return dd_err_set(err, DD_EINVAL, "%d images for a batch of %d", n, h->batch);
	/* slots past n hold the previous batch's images: harmless (each image's
	 * probabilities depend on that image alone), but zero them so that a run
	 * never reads what another run left */
	size_t per = (size_t)h->prep.c * h->ih * h->iw;
	if (n < h->batch)
		memset(slot_input(h, n), 0, (size_t)(h->batch - n) * per * sizeof(float));
	return graph_forward(h->gr, 0, NULL, err);
}

const float *infer_batch_probabilities(const struct infer *h, int slot)
{
	return h->probs + (size_t)slot * h->prep.classes;
}

int infer_top(const struct infer *h, const float *probs, int top, struct infer_pred *pred)
{
	int n = h->prep.classes, k = top < n ? top : n;
	if (k < 1)
		k = 1;
	/* insertion into a sorted list of k: one pass over the classes */
	int have = 0;
	for (int j = 0; j < n; j++) {
		float p = probs[j];
		if (have == k && !(p > pred[k - 1].probability))
			continue;
		int at = have < k ? have++ : k - 1;
		while (at > 0 && p > pred[at - 1].probability) {
			pred[at] = pred[at - 1];
			at--;
		}
		pred[at] = (struct infer_pred){ j, h->labels[j], p };
	}
	return k;
}
