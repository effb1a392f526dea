/* kind_train.c — the "model" job kind: a worker that trains a network on a finished
 * dataset job with networks/train (the code `deepdesk train` runs), in its job folder.
 *
 * params = {
 *   "dataset": DATASET_JOB_ID,
 *   "network": {"standard": "lenet"|"alexnet"|"googlenet"|"resnet_small"}
 *            | {"prototxt": TEXT} | {"previous": MODEL_JOB_ID},
 *   "solver": {"type": "sgd"|"nesterov"|"adagrad"|"rmsprop"|"adadelta"|"adam",
 *              "base_lr", "momentum", "momentum2", "delta", "rms_decay",
 *              "weight_decay", "iter_size",
 *              "lr_policy": {"policy": "fixed"|"step"|"multistep"|"exp"|"inv"|"poly"|"sigmoid",
 *                            "step_pct"?, "multistep_pct"?, "gamma"?, "power"?}},
 *   "epochs", "batch_size"?, "crop_size"?, "mirror"?: true|false,
 *   "mean": "none"|"image"|"pixel", "seed",
 *   "val_interval", "snapshot_interval", "backend": "cpu"|"ref"|"cuda",
 *   "gpus"?: N | [ID, …] | "any" (cuda only: N from 1 to 16, or up to 16 distinct
 *            ids; "any", the default, is one free GPU.  The scheduler gives the job
 *            free GPUs and writes their ids in job.json's resources.gpus and the
 *            first as params.backend "cuda:FIRST"; more than one trains data
 *            parallel, one copy per GPU, batch_size images on each),
 *   "precision"?: "fp32"|"fp16"|"bf16" (the half ones cuda only),
 *   "finetune"?: {"model": MODEL_JOB_ID, "snapshot"?: EPOCH},
 *   "resume"?: {"snapshot"?: EPOCH},   (EPOCH: a snapshot's epoch, fractional for one
 *                                       inside an epoch, or its label "1.4167")
 *   "group"?: "…"
 * }
 * validate() refuses unknown fields and fills in every default (DIGITS' own: 30
 * epochs, SGD at 0.01 with momentum 0.9 and weight decay 0.0005, the step policy
 * at 33% with gamma 0.1, mean image, a snapshot and a validation every epoch), so
 * the params a job keeps are the settings it ran with.  batch_size and crop_size
 * absent mean "the network's data layer's" (mirror too: absent, the data
 * layer's transform_param decides); the API fills them in once it has
 * checked the network against the dataset.  With a caller it also checks what
 * needs other jobs (check_related: the dataset is done and the caller's to use,
 * the previous or fine-tuned model exists, is theirs to use and has what is
 * asked), for every route alike; the worker reads those jobs' folders beside its
 * own. */
#define _GNU_SOURCE
#include "kind_train.h"

#include <dirent.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../common/fsutil.h"
#include "../common/json.h"
#include "../datasets/dsinfo.h"
#include "../networks/memory.h"
#include "../networks/modeldir.h"
#include "../networks/net.h"
#include "../networks/train.h"
#include "job.h"
#include "jobdir.h"
#include "kind_check.h"
#include "kind_preset.h"
#include "kind_train_memory.h"
#include "worker.h"

#define MAX_PROTOTXT (4u << 20)
#define MAX_ID 9007199254740991.0

/* ---- the network against the dataset ---- */

int model_check_network(const char *text, const char *ds_dir, int batch, int crop,
			struct net_input *train, struct net_input *val, const char **bad_stage, struct dd_err *err)
{
	struct net_input in = { .n = batch, .crop = crop };
	int rc = train_dataset_input(ds_dir, &in, err);
	if (rc)
		return rc;
	struct net *def = NULL;
	struct net_graph *tg = NULL, *vg = NULL, *dg = NULL;
	/* deploy too: a model must be usable for inference once trained */
	const char *stage = NULL;
	if ((rc = net_parse(text, strlen(text), &def, err)) ||
	    (stage = "train", rc = net_instantiate(def, NET_STAGE_TRAIN, &in, &tg, err)) ||
	    (stage = "val", rc = net_instantiate(def, NET_STAGE_VAL, &in, &vg, err)) ||
	    (stage = "deploy", rc = net_instantiate(def, NET_STAGE_DEPLOY, &in, &dg, err))) {
		if (bad_stage)
			*bad_stage = stage;
		goto out;
	}
	if (train)
		*train = tg->in;
	if (val)
		*val = vg->in;
out:
	net_graph_free(tg);
	net_graph_free(vg);
	net_graph_free(dg);
	net_free(def);
	return rc;
}

/* ---- validation ---- */


static int only_fields(const cJSON *obj, const char *const *allowed, const char *where, struct dd_err *err)
{
	const char *name = json_unknown_field(obj, allowed);
	return name ? dd_err_set(err, DD_EINVAL, "%s%.64s: unknown field", where, name) : DD_OK;
}

enum { NUM_REAL = 0, NUM_INT = 1, NUM_ABOVE = 2 /* lo itself is not allowed */ };

/* obj.key: absent -> dflt is written (when fill); else a finite number in range. */
static int num(cJSON *obj, const char *where, const char *key, double lo, double hi, int flags,
	       int fill, double dflt, struct dd_err *err)
{
	cJSON *v = json_get(obj, key);
	if (!v) {
		if (fill)
			cJSON_AddNumberToObject(obj, key, dflt);
		return DD_OK;
	}
	double x = cJSON_IsNumber(v) ? v->valuedouble : NAN;
	int ok = isfinite(x) && x <= hi && ((flags & NUM_ABOVE) ? x > lo : x >= lo) &&
		 (!(flags & NUM_INT) || x == floor(x));
	if (!ok)
		return dd_err_set(err, DD_EINVAL, "%s%s: must be %s %s %g and at most %g", where, key,
				  (flags & NUM_INT) ? "an integer" : "a number",
				  (flags & NUM_ABOVE) ? "above" : "from", lo, hi);
	return DD_OK;
}

static int is_id(const cJSON *v)
{
	return cJSON_IsNumber(v) && v->valuedouble >= 1 && v->valuedouble <= MAX_ID &&
	       v->valuedouble == floor(v->valuedouble);
}

/* obj.key: a string from names[]; absent -> names[0] is written. */
static int choice(cJSON *obj, const char *where, const char *key, const char *const *names,
		  struct dd_err *err)
{
	cJSON *v = json_get(obj, key);
	if (!v) {
		cJSON_AddStringToObject(obj, key, names[0]);
		return DD_OK;
	}
	for (int i = 0; cJSON_IsString(v) && names[i]; i++)
		if (strcmp(v->valuestring, names[i]) == 0)
			return DD_OK;
	char list[256] = "";
	for (int i = 0; names[i]; i++)
		snprintf(list + strlen(list), sizeof list - strlen(list), "%s%s", i ? ", " : "", names[i]);
	return dd_err_set(err, DD_EINVAL, "%s%s: must be one of %s", where, key, list);
}

static const char *const solver_types[] = { "sgd", "nesterov", "adagrad", "rmsprop", "adadelta", "adam", NULL };
static const char *const means[] = { "image", "none", "pixel", NULL };
static const char *const backends[] = { "cpu", "ref", "cuda", NULL };

/* The learning-rate policies, the fields each uses, and DIGITS' defaults for them. */
static const struct policy {
	const char *name;
	double step_pct, gamma, power; /* NAN: not used */
	int multistep;
} policies[] = {
	{ "step", 33, 0.1, NAN, 0 },   { "fixed", NAN, NAN, NAN, 0 },  { "multistep", NAN, 0.5, NAN, 1 },
	{ "exp", NAN, 0.95, NAN, 0 },  { "inv", NAN, 0.1, 0.5, 0 },    { "poly", NAN, NAN, 3, 0 },
	{ "sigmoid", 50, 0.1, NAN, 0 }, { NULL, 0, 0, 0, 0 },
};

static int check_policy(cJSON *solver, struct dd_err *err)
{
	static const char *const fields[] = { "policy", "step_pct", "multistep_pct", "gamma", "power", NULL };
	cJSON *lp = json_get(solver, "lr_policy");
	if (!lp)
		lp = cJSON_AddObjectToObject(solver, "lr_policy");
	else if (cJSON_IsString(lp)) { /* "step" is short for {"policy":"step"} */
		cJSON *o = cJSON_CreateObject();
		cJSON_AddStringToObject(o, "policy", lp->valuestring);
		cJSON_ReplaceItemInObjectCaseSensitive(solver, "lr_policy", o);
		lp = o;
	}
	if (!cJSON_IsObject(lp))
		return dd_err_set(err, DD_EINVAL, "solver.lr_policy: must be an object {\"policy\": …}");
	int rc;
	if ((rc = only_fields(lp, fields, "solver.lr_policy.", err)))
		return rc;
	static const char *const names[] = { "step", "fixed", "multistep", "exp", "inv", "poly", "sigmoid", NULL };
	if ((rc = choice(lp, "solver.lr_policy.", "policy", names, err)))
		return rc;
	const char *name = json_get(lp, "policy")->valuestring;
	const struct policy *p = policies;
	while (strcmp(p->name, name) != 0)
		p++;
	static const char *const used_by[] = { "step_pct", "gamma", "power" };
	const double dflt[] = { p->step_pct, p->gamma, p->power };
	for (int i = 0; i < 3; i++) {
		if (isnan(dflt[i]) && json_get(lp, used_by[i]))
			return dd_err_set(err, DD_EINVAL, "solver.lr_policy.%s: the %s policy does not use it",
					  used_by[i], name);
	}
	if (!p->multistep && json_get(lp, "multistep_pct"))
		return dd_err_set(err, DD_EINVAL, "solver.lr_policy.multistep_pct: the %s policy does not use it", name);
	if (!isnan(p->step_pct) &&
	    (rc = num(lp, "solver.lr_policy.", "step_pct", 0, 100, NUM_ABOVE, 1, p->step_pct, err)))
		return rc;
	if (!isnan(p->gamma) && (rc = num(lp, "solver.lr_policy.", "gamma", 0, 1000, NUM_ABOVE, 1, p->gamma, err)))
		return rc;
	if (!isnan(p->power) && (rc = num(lp, "solver.lr_policy.", "power", 0, 1000, NUM_ABOVE, 1, p->power, err)))
		return rc;
	if (p->multistep) {
		cJSON *ms = json_get(lp, "multistep_pct");
		if (!ms) {
			ms = cJSON_AddArrayToObject(lp, "multistep_pct");
			cJSON_AddItemToArray(ms, cJSON_CreateNumber(50));
			cJSON_AddItemToArray(ms, cJSON_CreateNumber(85));
		}
		int n = cJSON_GetArraySize(ms);
		if (!cJSON_IsArray(ms) || n < 1 || n > SOLVER_MAX_STEPS)
			return dd_err_set(err, DD_EINVAL,
					  "solver.lr_policy.multistep_pct: must be an array of 1 to %d percentages",
					  SOLVER_MAX_STEPS);
		double prev = 0;
		for (int i = 0; i < n; i++) {
			cJSON *v = cJSON_GetArrayItem(ms, i);
			if (!cJSON_IsNumber(v) || !isfinite(v->valuedouble) || v->valuedouble <= prev ||
			    v->valuedouble > 100)
				return dd_err_set(err, DD_EINVAL,
						  "solver.lr_policy.multistep_pct[%d]: must be a percentage above the one before it and at most 100",
						  i);
			prev = v->valuedouble;
		}
	}
	return DD_OK;
}

static int check_solver(cJSON *params, struct dd_err *err)
{
	static const char *const fields[] = { "type",	   "base_lr",	   "momentum",  "momentum2", "delta",
					      "rms_decay", "weight_decay", "iter_size", "lr_policy", NULL };
	cJSON *s = json_get(params, "solver");
	if (!s)
		s = cJSON_AddObjectToObject(params, "solver");
	if (!cJSON_IsObject(s))
		return dd_err_set(err, DD_EINVAL, "solver: must be an object");
	int rc;
	if ((rc = only_fields(s, fields, "solver.", err)) || (rc = choice(s, "solver.", "type", solver_types, err)) ||
	    (rc = num(s, "solver.", "base_lr", 0, 1000, NUM_ABOVE, 1, 0.01, err)) ||
	    (rc = num(s, "solver.", "momentum", 0, 0.999999, NUM_REAL, 1, 0.9, err)) ||
	    (rc = num(s, "solver.", "momentum2", 0, 0.999999, NUM_REAL, 1, 0.999, err)) ||
	    (rc = num(s, "solver.", "delta", 0, 1, NUM_ABOVE, 1, 1e-8, err)) ||
	    (rc = num(s, "solver.", "rms_decay", 0, 0.999999, NUM_REAL, 1, 0.99, err)) ||
	    (rc = num(s, "solver.", "weight_decay", 0, 1, NUM_REAL, 1, 0.0005, err)) ||
	    (rc = num(s, "solver.", "iter_size", 1, 1024, NUM_INT, 1, 1, err)))
		return rc;
	return check_policy(s, err);
}

static int check_network(cJSON *params, struct dd_err *err)
{
	static const char *const fields[] = { "standard", "prototxt", "previous", NULL };
	cJSON *n = json_get(params, "network");
	int rc;
	if (cJSON_IsObject(n) && (rc = only_fields(n, fields, "network.", err)))
		return rc;
	if (!cJSON_IsObject(n) || cJSON_GetArraySize(n) != 1)
		return dd_err_set(err, DD_EINVAL,
				  "network: required, one of {\"standard\": NAME}, {\"prototxt\": TEXT} or {\"previous\": MODEL_JOB_ID}");
	cJSON *v;
	if ((v = json_get(n, "standard"))) {
		if (!cJSON_IsString(v) || !net_standard_find(v->valuestring)) {
			char list[256] = "";
			for (const struct net_standard *s = net_standards; s->name; s++)
				snprintf(list + strlen(list), sizeof list - strlen(list), "%s%s",
					 s == net_standards ? "" : ", ", s->name);
			return dd_err_set(err, DD_EINVAL, "network.standard: must be one of %s", list);
		}
		return DD_OK;
	}
	if ((v = json_get(n, "prototxt"))) {
		if (!cJSON_IsString(v) || !*v->valuestring || strlen(v->valuestring) > MAX_PROTOTXT)
			return dd_err_set(err, DD_EINVAL, "network.prototxt: must be the text of a network (at most %u bytes)",
					  MAX_PROTOTXT);
		struct net *def = NULL;
		rc = net_parse(v->valuestring, strlen(v->valuestring), &def, err);
		net_free(def);
		if (rc) {
			dd_err_prefix(err, "network.prototxt");
			return DD_EINVAL;
		}
		return DD_OK;
	}
	if (!is_id(json_get(n, "previous")))
		return dd_err_set(err, DD_EINVAL, "network.previous: must be a model job id");
	return DD_OK;
}

/* obj.snapshot, when present: a snapshot's epoch, a number (fractional for one
 * inside an epoch) or its label ("1.4167"), which is turned into the number. */
static int snapshot_field(cJSON *obj, const char *where, struct dd_err *err)
{
	cJSON *v = json_get(obj, "snapshot");
	double ep;
	if (cJSON_IsString(v) && modeldir_label_ok(v->valuestring, &ep) && ep <= 10000) {
		cJSON_ReplaceItemInObjectCaseSensitive(obj, "snapshot", cJSON_CreateNumber(ep));
		return DD_OK;
	}
	if (cJSON_IsString(v))
		return dd_err_set(err, DD_EINVAL, "%ssnapshot: \"%.32s\" is not a snapshot's epoch (a number like 3 or 1.4167)",
				  where, v->valuestring);
	return num(obj, where, "snapshot", 0, 10000, NUM_REAL, 0, 0, err);
}

/* "gpus" (issue 7): with backend "cuda" only; a count 1..TRAIN_MAX_REPLICAS, a
 * list of that many distinct GPU ids (whole numbers from 0), or "any" (the
 * default, one GPU).  More than one trains data parallel, one copy per GPU.
 * Whether this server has them is the scheduler's question (sched_submit). */
static int check_gpus(cJSON *params, struct dd_err *err)
{
	const cJSON *g = json_get(params, "gpus"), *it;
	const char *be = cJSON_GetStringValue(json_get(params, "backend"));
	if (!g)
		return DD_OK;
	if (!be || strcmp(be, "cuda") != 0)
		return dd_err_set(err, DD_EINVAL, "gpus: only with \"backend\": \"cuda\"");
	if (cJSON_IsString(g) && !strcmp(g->valuestring, "any"))
		return DD_OK;
	if (cJSON_IsNumber(g)) {
		if (g->valuedouble != floor(g->valuedouble) || g->valuedouble < 1 || g->valuedouble > TRAIN_MAX_REPLICAS)
			return dd_err_set(err, DD_EINVAL, "gpus: %g is not a count of GPUs from 1 to %d", g->valuedouble,
					  TRAIN_MAX_REPLICAS);
		return DD_OK;
	}
	if (!cJSON_IsArray(g))
		return dd_err_set(err, DD_EINVAL,
				  "gpus: must be a count from 1 to %d, a list of GPU ids, or \"any\"", TRAIN_MAX_REPLICAS);
	int n = cJSON_GetArraySize(g), i = 0, ids[TRAIN_MAX_REPLICAS];
	if (n < 1 || n > TRAIN_MAX_REPLICAS)
		return dd_err_set(err, DD_EINVAL, "gpus: a list of 1 to %d GPU ids, not %d", TRAIN_MAX_REPLICAS, n);
	cJSON_ArrayForEach(it, g)
	{
		if (!cJSON_IsNumber(it) || it->valuedouble != floor(it->valuedouble) || it->valuedouble < 0 ||
		    it->valuedouble > 1000000)
			return dd_err_set(err, DD_EINVAL, "gpus[%d]: a GPU id is a whole number from 0", i);
		ids[i] = (int)it->valuedouble;
		for (int j = 0; j < i; j++)
			if (ids[j] == ids[i])
				return dd_err_set(err, DD_EINVAL, "gpus: GPU %d is listed twice", ids[i]);
		i++;
	}
	return DD_OK;
}

/* "precision" (issue 7): "fp32" (the default), "fp16" or "bf16"; the two half
 * precisions with "backend": "cuda" only. */
static int check_precision(cJSON *params, struct dd_err *err)
{
	static const char *const precisions[] = { "fp32", "fp16", "bf16", NULL };
	int rc = json_get(params, "precision") ? choice(params, "", "precision", precisions, err) : DD_OK;
	const char *p = cJSON_GetStringValue(json_get(params, "precision"));
	const char *be = cJSON_GetStringValue(json_get(params, "backend"));
	if (!rc && p && strcmp(p, "fp32") != 0 && (!be || strcmp(be, "cuda") != 0))
		return dd_err_set(err, DD_EINVAL, "precision: \"%s\" only with \"backend\": \"cuda\"", p);
	return rc;
}

/* Whether model folder dir has a snapshot at epoch (< 0: any). */
static int has_snapshot(const char *dir, double epoch)
{
	struct modeldir_snapshot *snaps = NULL;
	int n = 0;
	if (modeldir_snapshots(dir, &snaps, &n, NULL) != DD_OK)
		return 0;
	int found = modeldir_snapshot_find(snaps, n, epoch) >= 0;
	free(snaps);
	return found;
}

static int param_int(const cJSON *o, const char *k, int dflt);

/* What needs other jobs, with the caller: the dataset is a finished dataset who
 * may use, a previous model (its network) and a fine-tuned one (its snapshot) are
 * models who may use and have what is asked of them, and the network fits the
 * dataset.  Each job named goes into uses (the dataset first). */
static int check_related(cJSON *params, const struct job_caller *who, struct job_uses *uses, struct dd_err *err)
{
	char ds_dir[PATH_MAX], dir[PATH_MAX], path[PATH_MAX + 32];
	char *prev_text = NULL;
	int rc = kind_use_dataset(who, uses, (int64_t)json_get(params, "dataset")->valuedouble, "dataset",
				  "a model needs a finished dataset", ds_dir, sizeof ds_dir, err);
	if (rc)
		return rc;
	const cJSON *net = json_get(params, "network");
	const char *text = NULL;
	if (cJSON_IsString(json_get(net, "standard")))
		text = net_standard_text(json_get(net, "standard")->valuestring);
	else if (cJSON_IsString(json_get(net, "prototxt")))
		text = json_get(net, "prototxt")->valuestring;
	else {
		int64_t prev = (int64_t)json_get(net, "previous")->valuedouble;
		if ((rc = kind_use_job(who, uses, prev, "model", "network.previous", NULL, dir, sizeof dir, err)))
			return rc;
		modeldir_path(dir, MODELDIR_NETWORK, path, sizeof path);
		if (fs_read_file(path, MAX_PROTOTXT, &prev_text, NULL, NULL) != DD_OK)
			return dd_err_set(err, DD_ECONFLICT, "network.previous: model %lld has not written its network yet",
					  (long long)prev);
		text = prev_text;
	}
	const cJSON *ft = json_get(params, "finetune");
	if (ft) {
		int64_t m = (int64_t)json_get(ft, "model")->valuedouble;
		const cJSON *fs = json_get(ft, "snapshot"); /* a number: snapshot_field turned a label into one */
		double ep = cJSON_IsNumber(fs) ? fs->valuedouble : -1;
		if ((rc = kind_use_job(who, uses, m, "model", "finetune.model", NULL, dir, sizeof dir, err)))
			goto out;
		if (!has_snapshot(dir, ep)) {
			rc = ep >= 0 ? dd_err_set(err, DD_ECONFLICT, "finetune.snapshot: model %lld has no snapshot at epoch %g",
						  (long long)m, ep) :
				       dd_err_set(err, DD_ECONFLICT, "finetune.model: model %lld has no snapshot yet", (long long)m);
			goto out;
		}
	}
	struct dd_err e = { 0 };
	rc = model_check_network(text, ds_dir, param_int(params, "batch_size", 0), param_int(params, "crop_size", 0),
				 NULL, NULL, NULL, &e);
	if (rc == DD_EINVAL || rc == DD_ENOENT)
		rc = dd_err_set(err, DD_EINVAL, "network: %s", e.msg);
	else if (rc && err)
		*err = e;
out:
	free(prev_text);
	return rc;
}

/* kind_train.h; the fields of the params at the top of this file */
const char *const train_model_fields[] = { "dataset",	   "network",  "solver",	     "epochs",
					   "batch_size",   "crop_size", "mean",	     "seed",
					   "val_interval", "snapshot_interval", "backend", "finetune",
					   "resume",	   "group",    "mirror",	     "gpus", "precision",
					   "preset", NULL }; /* preset: api_preset_apply's mark (kind_preset.h) */

static int validate(cJSON *params, const struct job_caller *who, struct job_uses *uses, struct dd_err *err)
{
	const char *const *top = train_model_fields;
	int rc;
	if ((rc = only_fields(params, top, "", err)) || (rc = kind_preset_check(params, err))) /* kind_preset.h */
		return rc;
	if (!is_id(json_get(params, "dataset")))
		return dd_err_set(err, DD_EINVAL, "dataset: required, the id of a finished dataset job");
	if ((rc = check_network(params, err)) || (rc = check_solver(params, err)) ||
	    (rc = num(params, "", "epochs", 1, 10000, NUM_INT, 1, 30, err)) ||
	    (rc = num(params, "", "batch_size", 1, 4096, NUM_INT, 0, 0, err)) ||
	    (rc = num(params, "", "crop_size", 1, 4096, NUM_INT, 0, 0, err)) ||
	    (rc = choice(params, "", "mean", means, err)) ||
	    (rc = num(params, "", "seed", 0, MAX_ID, NUM_INT, 1, 0, err)) ||
	    (rc = num(params, "", "val_interval", 0, 10000, NUM_ABOVE, 1, 1, err)) ||
	    (rc = num(params, "", "snapshot_interval", 0, 10000, NUM_ABOVE, 1, 1, err)) ||
	    (rc = choice(params, "", "backend", backends, err)) || (rc = check_gpus(params, err)) ||
	    (rc = check_precision(params, err)))
		return rc;
	cJSON *ft = json_get(params, "finetune");
	if (ft) {
		static const char *const f[] = { "model", "snapshot", NULL };
		if (!cJSON_IsObject(ft))
			return dd_err_set(err, DD_EINVAL, "finetune: must be {\"model\": MODEL_JOB_ID, \"snapshot\"?: EPOCH}");
		if ((rc = only_fields(ft, f, "finetune.", err)))
			return rc;
		if (!is_id(json_get(ft, "model")))
			return dd_err_set(err, DD_EINVAL, "finetune.model: required, a model job id");
		if ((rc = snapshot_field(ft, "finetune.", err)))
			return rc;
	}
	cJSON *re = json_get(params, "resume");
	if (re) {
		static const char *const f[] = { "snapshot", NULL };
		if (!cJSON_IsObject(re))
			return dd_err_set(err, DD_EINVAL, "resume: must be {\"snapshot\"?: EPOCH}");
		if ((rc = only_fields(re, f, "resume.", err)) || (rc = snapshot_field(re, "resume.", err)))
			return rc;
	}
	cJSON *mi = json_get(params, "mirror");
	if (mi && !cJSON_IsBool(mi))
		return dd_err_set(err, DD_EINVAL, "mirror: must be true or false (absent: the network's data layer decides)");
	cJSON *g = json_get(params, "group");
	if (g && (!cJSON_IsString(g) || strlen(g->valuestring) > 200))
		return dd_err_set(err, DD_EINVAL, "group: must be a string of at most 200 characters");
	if (who && (rc = check_related(params, who, uses, err)))
		return rc;
	return train_memory_check(params, who, err); /* the per-job memory limit (kind_train_memory.c) */
}

/* ---- the folder and the events (the worker's and `deepdesk train`'s) ---- */

static void add_num(cJSON *o, const char *k, double v)
{
	if (isfinite(v))
		cJSON_AddNumberToObject(o, k, v);
}


cJSON *model_metric_event(const struct train_metric *m, double eta_s)
{
	cJSON *ev = events_new("metric");
	if (!ev)
		return NULL;
	cJSON_AddStringToObject(ev, "kind", m->kind);
	cJSON_AddNumberToObject(ev, "iteration", (double)m->iteration);
	add_num(ev, "epoch", m->epoch);
	add_num(ev, "lr", m->lr);
	add_num(ev, "loss", m->loss);
	add_num(ev, "accuracy", m->accuracy);
	add_num(ev, "accuracy_top5", m->accuracy_top5);
	if (strcmp(m->kind, "train") == 0)
		add_num(ev, "images_per_s", m->images_per_s);
	if (eta_s >= 0)
		cJSON_AddNumberToObject(ev, "eta_s", eta_s);
	return ev;
}

double model_report_metric(struct worker *w, int64_t t0, double epoch0, double epochs,
			   const struct train_metric *m)
{
	double el = (double)(fs_mono_ms() - t0) / 1000.0, done = m->epoch - epoch0;
	double eta = done > 0 ? el / done * fmax(0, epochs - m->epoch) : -1;
	worker_event(w, model_metric_event(m, eta));
	worker_progress(w, fmin(1, fmax(0, m->epoch / epochs)), eta);
	return eta;
}

cJSON *model_result_event(const struct train_result *res)
{
	cJSON *ev = events_new("result");
	if (!ev)
		return NULL;
	cJSON_AddNumberToObject(ev, "iterations", (double)res->iterations);
	add_num(ev, "epochs", res->epochs);
	add_num(ev, "train_loss", res->train_loss);
	add_num(ev, "val_loss", res->val_loss);
	add_num(ev, "val_accuracy", res->val_accuracy);
	add_num(ev, "val_accuracy_top5", res->val_accuracy_top5);
	const char *base = strrchr(res->snapshot, '/');
	cJSON_AddStringToObject(ev, "snapshot", base ? base + 1 : res->snapshot);
	cJSON_AddBoolToObject(ev, "stopped", res->stopped);
	return ev;
}

cJSON *model_settings_from_opts(const struct train_opts *o)
{
	cJSON *st = cJSON_CreateObject(), *s = cJSON_AddObjectToObject(st, "solver");
	cJSON *lp = cJSON_AddObjectToObject(s, "lr_policy");
	if (!lp) {
		cJSON_Delete(st);
		return NULL;
	}
	cJSON_AddStringToObject(s, "type", solver_type_name(o->solver));
	cJSON_AddNumberToObject(s, "base_lr", o->base_lr > 0 ? o->base_lr : 0.01);
	cJSON_AddNumberToObject(s, "momentum", o->momentum >= 0 ? o->momentum : 0.9);
	cJSON_AddNumberToObject(s, "momentum2", o->momentum2 > 0 ? o->momentum2 : 0.999);
	cJSON_AddNumberToObject(s, "delta", o->delta > 0 ? o->delta : 1e-8);
	cJSON_AddNumberToObject(s, "rms_decay", o->rms_decay > 0 ? o->rms_decay : 0.99);
	cJSON_AddNumberToObject(s, "weight_decay", o->weight_decay);
	cJSON_AddNumberToObject(s, "iter_size", o->iter_size > 0 ? o->iter_size : 1);
	/* the policy's own fields, as validate() keeps them */
	const char *pol = lr_policy_name(o->policy);
	const struct policy *p = policies;
	while (p->name && strcmp(p->name, pol) != 0)
		p++;
	cJSON_AddStringToObject(lp, "policy", pol);
	if (p->name && !isnan(p->step_pct))
		cJSON_AddNumberToObject(lp, "step_pct", o->step_pct > 0 ? o->step_pct : p->step_pct);
	if (p->name && p->multistep) {
		cJSON *ms = cJSON_AddArrayToObject(lp, "multistep_pct");
		for (int i = 0; i < o->nmultistep; i++)
			cJSON_AddItemToArray(ms, cJSON_CreateNumber(o->multistep_pct[i]));
	}
	if (p->name && !isnan(p->gamma))
		cJSON_AddNumberToObject(lp, "gamma", o->gamma > 0 ? o->gamma : p->gamma);
	if (p->name && !isnan(p->power))
		cJSON_AddNumberToObject(lp, "power", o->power > 0 ? o->power : p->power);
	cJSON_AddNumberToObject(st, "epochs", o->epochs > 0 ? o->epochs : 30);
	if (o->batch > 0)
		cJSON_AddNumberToObject(st, "batch_size", o->batch);
	if (o->crop > 0)
		cJSON_AddNumberToObject(st, "crop_size", o->crop);
	if (o->mirror)
		cJSON_AddBoolToObject(st, "mirror", o->mirror > 0);
	cJSON_AddStringToObject(st, "mean", o->mean == FEED_MEAN_NONE ? "none" : o->mean == FEED_MEAN_PIXEL ? "pixel" : "image");
	cJSON_AddNumberToObject(st, "seed", (double)o->seed);
	cJSON_AddNumberToObject(st, "val_interval", o->val_interval > 0 ? o->val_interval : 1);
	cJSON_AddNumberToObject(st, "snapshot_interval", o->snapshot_interval > 0 ? o->snapshot_interval : 1);
	cJSON_AddStringToObject(st, "backend", o->backend ? o->backend : "cpu");
	if (o->replicas > 1)
		cJSON_AddItemToObject(st, "gpus", cJSON_CreateIntArray(o->gpus, o->replicas));
	return st;
}

static int copy_file(const char *from, const char *to, struct dd_err *err)
{
	char *data = NULL;
	size_t len = 0;
	int rc = fs_read_file(from, 64u << 20, &data, &len, err);
	if (rc == DD_OK)
		rc = fs_write_file_atomic(to, data, len, err);
	free(data);
	return rc;
}

/* DIR/preprocess.json: {"resize_mode", "width", "height", "channels"} of the
 * dataset, what networks/infer.c needs to prepare an uploaded image as the
 * dataset's were. */
static int write_preprocess(const char *dir, const char *ds_dir, struct dd_err *err)
{
	char path[PATH_MAX + 32];
	cJSON *j = NULL;
	int rc = dsinfo_read(ds_dir, &j, err);
	if (rc)
		return rc;
	cJSON *out = cJSON_CreateObject();
	const cJSON *opt = dsinfo_options(j);
	static const char *const keys[] = { "resize_mode", "width", "height", "channels", NULL };
	for (int i = 0; keys[i]; i++) {
		const cJSON *v = cJSON_GetObjectItemCaseSensitive(opt, keys[i]);
		if (v)
			cJSON_AddItemToObject(out, keys[i], cJSON_Duplicate(v, 1));
	}
	cJSON_Delete(j);
	char *text = cJSON_Print(out);
	cJSON_Delete(out);
	modeldir_path(dir, MODELDIR_PREPROCESS, path, sizeof path);
	rc = text ? fs_write_file_atomic(path, text, strlen(text), err) : dd_err_set(err, DD_ENOMEM, "out of memory");
	free(text);
	return rc;
}

int model_write_folder(const char *dir, const char *text, const char *netname, const char *ds_dir,
		       int batch, int crop, cJSON *settings, struct dd_err *err)
{
	char path[PATH_MAX + 32], from[PATH_MAX + 32];
	char *st = NULL;
	int rc;
	if ((rc = fs_mkdir_p(dir, err)))
		goto out;
	modeldir_path(dir, MODELDIR_NETWORK, path, sizeof path);
	if ((rc = fs_write_file_atomic(path, text, strlen(text), err)))
		goto out;
	dsinfo_path(ds_dir, DSINFO_LABELS, from, sizeof from);
	modeldir_path(dir, MODELDIR_LABELS, path, sizeof path);
	if (access(from, R_OK) == 0 && (rc = copy_file(from, path, err)))
		goto out;
	/* the mean and how the images were resized: the model keeps its own copy, so
	 * that classifying does not depend on the dataset staying around */
	static const char *const from_ds[] = { DSINFO_MEAN, DSINFO_MEAN_PNG, NULL };
	static const char *const keep[] = { MODELDIR_MEAN, MODELDIR_MEAN_PNG, NULL };
	for (int i = 0; keep[i]; i++) {
		dsinfo_path(ds_dir, from_ds[i], from, sizeof from);
		modeldir_path(dir, keep[i], path, sizeof path);
		if (access(from, R_OK) == 0 && (rc = copy_file(from, path, err)))
			goto out;
	}
	if ((rc = write_preprocess(dir, ds_dir, err)))
		goto out;
	if (!settings) {
		rc = dd_err_set(err, DD_ENOMEM, "out of memory");
		goto out;
	}
	cJSON_DeleteItemFromObjectCaseSensitive(settings, "network_name");
	cJSON_AddStringToObject(settings, "network_name", netname);
	struct net_input tin, vin;
	if ((rc = model_check_network(text, ds_dir, batch, crop, &tin, &vin, NULL, err))) {
		dd_err_prefix(err, "network");
		goto out;
	}
	/* what "the network's" batch and crop came to */
	static const char *const resolved[] = { "batch_size", "val_batch_size", "crop_size", "input", "classes", NULL };
	for (int i = 0; resolved[i]; i++)
		cJSON_DeleteItemFromObjectCaseSensitive(settings, resolved[i]);
	cJSON_AddNumberToObject(settings, "batch_size", tin.n);
	cJSON_AddNumberToObject(settings, "val_batch_size", vin.n);
	if (tin.crop > 0)
		cJSON_AddNumberToObject(settings, "crop_size", tin.crop);
	else
		cJSON_AddNullToObject(settings, "crop_size");
	cJSON *shape = cJSON_AddArrayToObject(settings, "input");
	cJSON_AddItemToArray(shape, cJSON_CreateNumber(tin.c));
	cJSON_AddItemToArray(shape, cJSON_CreateNumber(tin.h));
	cJSON_AddItemToArray(shape, cJSON_CreateNumber(tin.w));
	cJSON_AddNumberToObject(settings, "classes", tin.classes);
	st = cJSON_Print(settings);
	modeldir_path(dir, MODELDIR_SETTINGS, path, sizeof path);
	rc = st ? fs_write_file_atomic(path, st, strlen(st), err) : dd_err_set(err, DD_ENOMEM, "out of memory");
out:
	free(st);
	cJSON_Delete(settings);
	return rc;
}

/* ---- the worker ---- */

struct run_ctx {
	struct worker *w; /* first: worker_hook_log and worker_hook_stop read it */
	int64_t t0;
	double epoch0, epochs; /* where this run started, and the total */
};

static void on_metric(void *vctx, const struct train_metric *m)
{
	struct run_ctx *c = vctx;
	model_report_metric(c->w, c->t0, c->epoch0, c->epochs, m);
}

static int param_int(const cJSON *o, const char *k, int dflt)
{
	const cJSON *v = json_get(o, k);
	return cJSON_IsNumber(v) ? (int)v->valuedouble : dflt;
}

static double param_num(const cJSON *o, const char *k, double dflt)
{
	const cJSON *v = json_get(o, k);
	return cJSON_IsNumber(v) ? v->valuedouble : dflt;
}

/* The snapshot of model folder dir at epoch (< 0: the latest) into path (its
 * .safetensors) and *picked; with need_state, one with its .solverstate. */
static int pick_snapshot(const char *dir, double epoch, int need_state, const char *what, char *path,
			 size_t len, struct modeldir_snapshot *picked, struct dd_err *err)
{
	struct modeldir_snapshot *snaps = NULL;
	int n = 0, rc = modeldir_snapshots(dir, &snaps, &n, err);
	if (rc)
		return rc;
	int i = modeldir_snapshot_find(snaps, n, epoch);
	if (i >= 0)
		*picked = snaps[i];
	free(snaps);
	if (i < 0)
		return epoch >= 0 ? dd_err_set(err, DD_ENOENT, "%s: there is no snapshot at epoch %g", what, epoch) :
				    dd_err_set(err, DD_ENOENT, "%s: there is no snapshot yet", what);
	if (need_state) {
		modeldir_snapshot_path(dir, picked->label, MODELDIR_SNAP_STATE, path, len);
		if (access(path, R_OK) != 0)
			return dd_err_set(err, DD_ENOENT, "%s: the snapshot at epoch %s has no .solverstate to resume from",
					  what, picked->label);
	}
	modeldir_snapshot_path(dir, picked->label, MODELDIR_SNAP_WEIGHTS, path, len);
	return DD_OK;
}

/* The GPUs the scheduler gave a cuda job (job.json resources.gpus): more than one
 * makes o a data-parallel run, one replica per GPU in that order (the backend
 * stays "cuda:FIRST").  On a cluster the job has resources.gpu_count instead:
 * the N GPUs Slurm gave it, which its CUDA numbers 0 to N−1.  A CPU job, or one
 * GPU, leaves o alone. */
static int replicas_from_job(const cJSON *job, const char *backend, struct train_opts *o, struct dd_err *err)
{
	const cJSON *ids = json_get(json_get(job, "resources"), "gpus"), *it;
	const cJSON *count = json_get(json_get(job, "resources"), "gpu_count");
	int n = cJSON_GetArraySize(ids);
	if (!backend || strncmp(backend, "cuda", 4) != 0)
		return DD_OK;
	if (n == 0 && cJSON_IsNumber(count) && count->valuedouble >= 2) {
		if (count->valuedouble > TRAIN_MAX_REPLICAS)
			return dd_err_set(err, DD_EINVAL, "resources.gpu_count: %g GPUs, at most %d train one job",
					  count->valuedouble, TRAIN_MAX_REPLICAS);
		o->replicas = (int)count->valuedouble;
		for (int i = 0; i < o->replicas; i++)
			o->gpus[i] = i;
		return DD_OK;
	}
	if (n < 2)
		return DD_OK;
	if (n > TRAIN_MAX_REPLICAS)
		return dd_err_set(err, DD_EINVAL, "resources.gpus: %d GPUs, at most %d train one job", n,
				  TRAIN_MAX_REPLICAS);
	o->replicas = 0;
	cJSON_ArrayForEach(it, ids)
	{
		if (!cJSON_IsNumber(it) || it->valuedouble != floor(it->valuedouble) || it->valuedouble < 0 ||
		    it->valuedouble > 63)
			return dd_err_set(err, DD_EINVAL, "resources.gpus[%d]: not a GPU id (a whole number from 0 to 63)",
					  o->replicas);
		o->gpus[o->replicas++] = (int)it->valuedouble;
	}
	return DD_OK;
}

static int run(struct worker *w, struct dd_err *err)
{
	const cJSON *p = w->params;
	char ds[PATH_MAX], path[PATH_MAX + 64];
	char *prev_text = NULL;
	int rc;
	long long ds_id = (long long)param_num(p, "dataset", 0);
	if (jobdir_sibling(w->dir, ds_id, ds, sizeof ds))
		return dd_err_set(err, DD_EINTERNAL, "the job folder %s has no parent folder", w->dir);
	if (!dsinfo_ready(ds))
		return dd_err_set(err, DD_EINVAL,
				  "dataset: job %lld is not a finished image classification dataset (no dataset.json or train_db)",
				  ds_id);

	/* the network */
	const cJSON *net = json_get(p, "network");
	const char *text = NULL;
	char netname[64];
	if (cJSON_IsString(json_get(net, "standard"))) {
		snprintf(netname, sizeof netname, "%s", json_get(net, "standard")->valuestring);
		text = net_standard_text(netname);
	} else if (cJSON_IsString(json_get(net, "prototxt"))) {
		snprintf(netname, sizeof netname, "custom");
		text = json_get(net, "prototxt")->valuestring;
	} else {
		long long prev = (long long)param_num(net, "previous", 0);
		snprintf(netname, sizeof netname, "model %lld's network", prev);
		char pdir[PATH_MAX];
		jobdir_sibling(w->dir, prev, pdir, sizeof pdir);
		modeldir_path(pdir, MODELDIR_NETWORK, path, sizeof path);
		if ((rc = fs_read_file(path, MAX_PROTOTXT, &prev_text, NULL, err))) {
			dd_err_prefix(err, "network.previous: model %lld", prev);
			return rc;
		}
		text = prev_text;
	}
	if (!text) {
		free(prev_text);
		return dd_err_set(err, DD_EINVAL, "network: nothing to train");
	}

	/* the options */
	struct train_opts o;
	struct train_result res;
	train_opts_default(&o);
	o.dataset_dir = ds;
	o.network_text = text;
	o.network_name = netname;
	o.out_dir = w->dir;
	o.result = &res;
	o.backend = cJSON_GetStringValue(json_get(p, "backend"));
	o.precision = cJSON_GetStringValue(json_get(p, "precision"));
	if ((rc = replicas_from_job(w->job, o.backend, &o, err)))
		goto out;
	if (o.replicas > 1) {
		char list[TRAIN_MAX_REPLICAS * 4 + 1] = "";
		for (int i = 0; i < o.replicas; i++)
			snprintf(list + strlen(list), sizeof list - strlen(list), "%s%d", i ? "," : "", o.gpus[i]);
		worker_log(w, "info", "data parallel on %d GPUs (%s): batch_size images on each, %d copies of the network",
			   o.replicas, list, o.replicas);
	}
	/* as many threads as the CPU slots the job holds: two trainings never share a
	 * core (oneDNN's OpenMP threads collapse when oversubscribed) */
	const cJSON *slots = json_get(json_get(w->job, "resources"), "cpu_slots");
	o.threads = cJSON_IsNumber(slots) && slots->valuedouble >= 1 ? (int)slots->valuedouble : 0;
	o.epochs = param_int(p, "epochs", 30);
	o.batch = param_int(p, "batch_size", 0);
	o.crop = param_int(p, "crop_size", 0);
	const cJSON *mi = json_get(p, "mirror");
	o.mirror = cJSON_IsBool(mi) ? (cJSON_IsTrue(mi) ? 1 : -1) : 0;
	const cJSON *s = json_get(p, "solver");
	const char *type = cJSON_GetStringValue(json_get(s, "type"));
	if (type && (rc = solver_type_parse(type, &o.solver, err))) /* validate() has checked it */
		return rc;
	o.base_lr = param_num(s, "base_lr", 0.01);
	o.momentum = param_num(s, "momentum", 0.9);
	o.momentum2 = param_num(s, "momentum2", 0.999);
	o.delta = param_num(s, "delta", 1e-8);
	o.rms_decay = param_num(s, "rms_decay", 0.99);
	o.weight_decay = param_num(s, "weight_decay", 0.0005);
	o.iter_size = param_int(s, "iter_size", 1);
	const cJSON *lp = json_get(s, "lr_policy");
	const char *pol = cJSON_GetStringValue(json_get(lp, "policy"));
	if ((rc = lr_policy_parse(pol ? pol : "step", &o.policy, err))) {
		dd_err_prefix(err, "solver.lr_policy.policy");
		goto out;
	}
	o.step_pct = param_num(lp, "step_pct", 0);
	o.gamma = param_num(lp, "gamma", 0);
	o.power = param_num(lp, "power", 0);
	const cJSON *ms = json_get(lp, "multistep_pct"), *m;
	cJSON_ArrayForEach(m, ms)
	{
		if (o.nmultistep < SOLVER_MAX_STEPS)
			o.multistep_pct[o.nmultistep++] = m->valuedouble;
	}
	const char *mean = cJSON_GetStringValue(json_get(p, "mean"));
	o.mean = mean && strcmp(mean, "none") == 0 ? FEED_MEAN_NONE :
		 mean && strcmp(mean, "pixel") == 0 ? FEED_MEAN_PIXEL : FEED_MEAN_IMAGE;
	o.seed = (uint64_t)param_num(p, "seed", 0);
	o.val_interval = param_num(p, "val_interval", 1);
	o.snapshot_interval = param_num(p, "snapshot_interval", 1);

	struct run_ctx c = { w, fs_mono_ms(), 0, o.epochs };
	char resume[PATH_MAX + 64], finetune[PATH_MAX + 64];
	const cJSON *re = json_get(p, "resume");
	if (re) {
		struct modeldir_snapshot ep;
		if ((rc = pick_snapshot(w->dir, param_num(re, "snapshot", -1), 1, "resume", resume, sizeof resume, &ep,
					err)))
			goto out;
		o.resume = resume;
		c.epoch0 = ep.epoch;
		worker_log(w, "info", "resuming from the snapshot at epoch %s, to %d epochs in all", ep.label, o.epochs);
	}
	const cJSON *ft = json_get(p, "finetune");
	if (ft) {
		char mdir[PATH_MAX];
		long long mid = (long long)param_num(ft, "model", 0);
		jobdir_sibling(w->dir, mid, mdir, sizeof mdir);
		struct modeldir_snapshot ep;
		char what[64];
		snprintf(what, sizeof what, "finetune: model %lld", mid);
		if ((rc = pick_snapshot(mdir, param_num(ft, "snapshot", -1), 0, what, finetune, sizeof finetune, &ep,
					err)))
			goto out;
		o.finetune = finetune;
		worker_log(w, "info", "fine-tuning from model %lld's snapshot at epoch %s", mid, ep.label);
	}

	/* network.prototxt, labels.txt, settings.json: the params as run, with what
	 * the worker resolved */
	if ((rc = model_write_folder(w->dir, text, netname, ds, o.batch, o.crop, cJSON_Duplicate(p, 1), err)))
		goto out;

	/* under a memory limit with a margin over the estimate (kind_train_memory.h) */
	struct net_memory mem;
	char mem_msg[256];
	if (train_memory_estimate(text, ds, o.batch, o.crop, type, o.backend, o.replicas, &mem, NULL, 0, NULL, NULL) ==
	    DD_OK) {
		train_memory_enter(w->dir, &mem, mem_msg, sizeof mem_msg);
		worker_log(w, "info", "%s", mem_msg);
	}

	struct train_hooks h = { &c, on_metric, worker_hook_log, worker_hook_stop };
	if ((rc = train_run(&o, &h, err))) {
		if (rc == DD_ENOMEM || strcasestr(err->msg, "out of memory")) /* oneDNN's too */
			train_memory_oom_message(w->dir, err);
		goto out;
	}

	worker_event(w, model_result_event(&res));
	const char *base = strrchr(res.snapshot, '/');
	worker_log(w, "info", "%s after %lld iterations (%.2f epochs); weights in %s",
		   res.stopped ? "stopped" : "trained", (long long)res.iterations, res.epochs,
		   base ? base + 1 : res.snapshot);
out:
	free(prev_text);
	return rc;
}

/* A clone trains from scratch: it does not resume the original's snapshot. */
static int clone_params(cJSON *params, int64_t orig_id, const char *orig_dir, struct dd_err *err)
{
	(void)orig_id;
	(void)orig_dir;
	(void)err;
	cJSON_DeleteItemFromObjectCaseSensitive(params, "resume");
	return DD_OK;
}

/* The GPUs a training asks for (job.h, job_kind.resources): "backend": "cuda"
 * and "gpus" (a count, a list of ids or "any"; none: one), need->gpus of them,
 * either any (nids 0) or those ids.  need->gpus 0 for a training on the CPU;
 * DD_EINVAL naming the field when this server cannot give them (ngpu: how many
 * it has).  A training that runs on a cluster (cluster 1) gets the cluster's
 * GPUs, which Slurm picks: it asks for a count or "any", whatever this server
 * has. */
static int resources(const cJSON *params, int ngpu, int cluster, struct job_need *need, struct dd_err *err)
{
	int *want = &need->gpus, *ids = need->ids, *nids = &need->nids;
	*want = *nids = 0;
	const char *backend = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(params, "backend"));
	if (!backend || strncmp(backend, "cuda", 4) != 0)
		return DD_OK;
	if (cluster) {
		const cJSON *g = cJSON_GetObjectItemCaseSensitive(params, "gpus");
		*want = 1;
		if (!g || (cJSON_IsString(g) && !strcmp(g->valuestring, "any")))
			return DD_OK;
		if (cJSON_IsNumber(g) && g->valuedouble == (int)g->valuedouble && g->valueint >= 1 &&
		    g->valueint <= JOB_MAX_GPUS) {
			*want = g->valueint;
			return DD_OK;
		}
		*want = 0;
		return dd_err_set(err, DD_EINVAL,
				  "gpus: a job on the cluster asks for a count of GPUs (1 to %d) or \"any\"; Slurm "
				  "chooses which",
				  JOB_MAX_GPUS);
	}
	if (ngpu <= 0)
		return dd_err_set(err, DD_EINVAL,
				  "backend: no GPU on this server, so \"cuda\" cannot run here (use \"cpu\")");
	const cJSON *g = cJSON_GetObjectItemCaseSensitive(params, "gpus");
	if (!g || (cJSON_IsString(g) && !strcmp(g->valuestring, "any"))) {
		*want = 1;
		return DD_OK;
	}
	if (cJSON_IsNumber(g)) {
		if (g->valuedouble != (int)g->valuedouble || g->valueint < 1)
			return dd_err_set(err, DD_EINVAL, "gpus: %g is not a count of GPUs (1 or more)", g->valuedouble);
		if (g->valueint > ngpu)
			return dd_err_set(err, DD_EINVAL, "gpus: asks for %d GPUs, this server has %d", g->valueint, ngpu);
		*want = g->valueint;
		return DD_OK;
	}
	if (cJSON_IsArray(g) && cJSON_GetArraySize(g) >= 1 && cJSON_GetArraySize(g) <= JOB_MAX_GPUS) {
		const cJSON *it;
		cJSON_ArrayForEach(it, g)
		{
			int id = cJSON_IsNumber(it) ? it->valueint : -1;
			if (!cJSON_IsNumber(it) || it->valuedouble != id)
				return dd_err_set(err, DD_EINVAL, "gpus: a list holds GPU ids, whole numbers from 0");
			if (id < 0 || id >= ngpu)
				return dd_err_set(err, DD_EINVAL, "gpus: GPU %d is not on this server (it has %d: 0 to %d)", id,
						  ngpu, ngpu - 1);
			for (int j = 0; j < *nids; j++)
				if (ids[j] == id)
					return dd_err_set(err, DD_EINVAL, "gpus: GPU %d is listed twice", id);
			ids[(*nids)++] = id;
		}
		*want = *nids;
		return DD_OK;
	}
	return dd_err_set(err, DD_EINVAL, "gpus: must be a count, a list of GPU ids or \"any\"");
}

/* Started again on its own folder (job.h, struct job_restart): a training that
 * finds its own earlier run there, stopped before its end, goes on from its
 * latest snapshot instead of starting over, so its curves continue: its params
 * get "resume": {} (the latest snapshot), as a resume through the API does.  A
 * resume asked for through the API names its snapshot: that is kept, unless the
 * cluster restarted that very run. */
static void restart(struct worker *w, const struct job_restart *how)
{
	const char *state = how->last_state;
	if (cJSON_GetObjectItemCaseSensitive(w->params, "resume") && !how->by_cluster)
		return;
	if (!how->unfinished && !(how->by_cluster && state[0] && strcmp(state, "done") && strcmp(state, "error")))
		return;
	struct modeldir_snapshot *snaps = NULL;
	int n = 0, with_state = 0;
	if (modeldir_snapshots(w->dir, &snaps, &n, NULL) == DD_OK && n > 0) {
		char path[PATH_MAX + 64];
		int i = modeldir_snapshot_find(snaps, n, -1);
		if (i >= 0) {
			modeldir_snapshot_path(w->dir, snaps[i].label, MODELDIR_SNAP_STATE, path, sizeof path);
			with_state = access(path, R_OK) == 0;
		}
	}
	free(snaps);
	if (!with_state) {
		worker_log(w, "info", "started again%s, with no snapshot yet: training from the start", how->by);
		return;
	}
	cJSON_DeleteItemFromObjectCaseSensitive(w->params, "resume");
	cJSON_AddItemToObject(w->params, "resume", cJSON_CreateObject());
	worker_log(w, "info", "started again%s: resuming from the latest snapshot", how->by);
}

const struct job_kind model_job_kind = {
	.name = "model",
	.title = "Image classification model",
	.validate = validate,
	.run = run,
	.default_cpu_slots = -1, /* every slot: a CPU training uses every core */
	.resources = resources,
	.clone_params = clone_params,
	.restart = restart,
};
