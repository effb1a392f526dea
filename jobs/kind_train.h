/* kind_train.h — what others need of the "model" job kind (kind_train.c): the files
 * and events a training writes, shared by the worker and `deepdesk train`
 * (app/cli/cli_train.c) so both write one folder.
 *
 * A model job's folder is networks/modeldir.h's: its file names, its snapshots,
 * listing and finding them live there, below the training that writes them. */
#ifndef DD_KIND_TRAIN_H
#define DD_KIND_TRAIN_H

#include <stddef.h>
#include <stdint.h>

#include <cjson/cJSON.h>

#include "../common/err.h"

struct net_input;
struct train_metric;
struct train_opts;
struct train_result;

/* ---- the network against the dataset ---- */

/* Check a network against the dataset in ds_dir: parse text and instantiate its
 * train, val and deploy stages for the dataset's image shape and classes, with batch and
 * crop (0: the network's data layers').  DD_OK and, when non-NULL, *train and *val
 * as resolved (batch, crop, image shape, classes); else err says what is wrong,
 * naming the layer and its LINE:COL, and *bad_stage (may be NULL) the stage that
 * failed ("train", "val", "deploy"; NULL when the text does not parse). */
int model_check_network(const char *text, const char *ds_dir, int batch, int crop,
			struct net_input *train, struct net_input *val, const char **bad_stage,
			struct dd_err *err);

/* ---- the folder and the events a training writes ---- */

/* Write into dir what a training keeps beside its snapshots: network.prototxt
 * (text), labels.txt, mean.binaryproto and mean.png (ds_dir's, those it has),
 * preprocess.json and settings.json: settings (taken
 * over: freed here, also on error) with "network_name" and what the network came to
 * on the dataset (batch_size, val_batch_size, crop_size, input [C,H,W], classes).
 * A network that does not fit the dataset is DD_EINVAL prefixed "network". */
int model_write_folder(const char *dir, const char *text, const char *netname, const char *ds_dir,
		       int batch, int crop, cJSON *settings, struct dd_err *err);

/* The settings a job's params give for what train_opts o holds (solver, lr_policy,
 * epochs, batch_size, crop_size, mirror when set, mean, seed, val_interval, snapshot_interval,
 * backend), in the params' shape, for a training not started from params (`deepdesk
 * train`).  Caller frees with cJSON_Delete(); NULL when out of memory. */
cJSON *model_settings_from_opts(const struct train_opts *o);

/* The "metric" event of m (eta_s < 0: none): {"type":"metric","kind","iteration",
 * "epoch","lr","loss","accuracy"?,"accuracy_top5"?,"images_per_s"?,"eta_s"?}.
 * Caller frees with cJSON_Delete(). */
cJSON *model_metric_event(const struct train_metric *m, double eta_s);

/* The "result" event of a finished or stopped training.  Caller frees with
 * cJSON_Delete(). */
cJSON *model_result_event(const struct train_result *res);

struct worker;

/* Report metric m into a job folder through w (jobs/worker.h): its "metric" event
 * and a "progress" event, with the ETA from the time since t0 (fs_mono_ms()),
 * when training stood at epoch0, to epochs in all.  Returns that ETA in seconds,
 * -1 before any progress.  The worker and `deepdesk train` both report so. */
double model_report_metric(struct worker *w, int64_t t0, double epoch0, double epochs,
			   const struct train_metric *m);

/* ---- the params ---- */

/* The top-level params a model job takes, NULL-terminated: its validate refuses
 * any other, and every door that makes one asks this list, so they cannot drift:
 * POST /api/v1/models (these and the job's "name"; "resume" has its own route),
 * a lab preset (all but the learner's "group" and "gpus", and "resume"), and a
 * clone (validated as a new job, less "resume"). */
extern const char *const train_model_fields[];

#endif
