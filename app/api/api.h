/* api.h — the REST handlers and the route table.  Each handler takes the routed
 * request and returns the status it sent.
 *
 * API_ROUTES is the one table of the server's routes: a row is
 * ROUTE(method, pattern, handler, body, permission), where body is what a
 * state-changing request may send (BODY_JSON, or BODY_FILES for multipart forms
 * and raw bytes too; server.c) and permission who may call it (enum perm_action,
 * perm.h, which says what each means).  server.c makes its dispatch table from
 * it, `deepdesk routes` prints its /api/v1 rows, tests/api/openapi.test.mjs holds
 * openapi.json to it; this header declares the handlers from it.  A row has all
 * five or does not compile, so no route exists without a decided permission.
 * Within a path the first matching row wins ("/api/v1/datasets/preview" before
 * "/api/v1/datasets/{id}"). */
#ifndef DD_API_H
#define DD_API_H

#include "../http/http.h"

struct server_info; /* server.h */

#define API_ROUTES(ROUTE) \
	/* the server */ \
	ROUTE("GET", "/api/v1/info", api_info, BODY_JSON, PERM_USER) \
	ROUTE("GET", "/api/v1/openapi.json", api_openapi, BODY_JSON, PERM_PUBLIC) \
	/* jobs (api_jobs.c) */ \
	ROUTE("GET", "/api/v1/jobs", api_jobs_list, BODY_JSON, PERM_USER) \
	ROUTE("POST", "/api/v1/jobs", api_jobs_create, BODY_JSON, PERM_USER) /* its uses: sched_validate, as the caller */ \
	ROUTE("GET", "/api/v1/jobs/{id}", api_job_get, BODY_JSON, PERM_JOB_READ) \
	ROUTE("PATCH", "/api/v1/jobs/{id}", api_job_patch, BODY_JSON, PERM_JOB_WRITE) \
	ROUTE("DELETE", "/api/v1/jobs/{id}", api_job_delete, BODY_JSON, PERM_JOB_WRITE) \
	ROUTE("POST", "/api/v1/jobs/{id}/abort", api_job_abort, BODY_JSON, PERM_JOB_WRITE) \
	ROUTE("POST", "/api/v1/jobs/{id}/clone", api_job_clone, BODY_JSON, PERM_JOB_WRITE) /* the clone is the owner's */ \
	ROUTE("GET", "/api/v1/jobs/{id}/events", api_job_events, BODY_JSON, PERM_JOB_READ) \
	ROUTE("GET", "/api/v1/jobs/{id}/resources", api_job_resources, BODY_JSON, PERM_JOB_READ) \
	ROUTE("GET", "/api/v1/ws", api_ws_plain, BODY_JSON, PERM_USER) \
	/* uploads and datasets (api_datasets.c) */ \
	ROUTE("POST", "/api/v1/uploads", api_uploads_create, BODY_FILES, PERM_USER) \
	ROUTE("GET", "/api/v1/datasets", api_datasets_list, BODY_JSON, PERM_USER) \
	ROUTE("POST", "/api/v1/datasets", api_datasets_create, BODY_FILES, PERM_USER) \
	ROUTE("GET", "/api/v1/datasets/preview", api_datasets_preview, BODY_JSON, PERM_USER) /* below --data-root only */ \
	ROUTE("GET", "/api/v1/datasets/{id}", api_dataset_get, BODY_JSON, PERM_JOB_READ) \
	ROUTE("GET", "/api/v1/datasets/{id}/images", api_dataset_images, BODY_JSON, PERM_JOB_READ) \
	ROUTE("GET", "/api/v1/datasets/{id}/images/{name}/{n}", api_dataset_image, BODY_JSON, PERM_JOB_READ) \
	ROUTE("GET", "/api/v1/datasets/{id}/files/{name}", api_dataset_file, BODY_JSON, PERM_JOB_READ) \
	/* models (api_models.c) */ \
	ROUTE("GET", "/api/v1/models", api_models_list, BODY_JSON, PERM_USER) \
	ROUTE("POST", "/api/v1/models", api_models_create, BODY_JSON, PERM_USER) \
	ROUTE("GET", "/api/v1/models/{id}", api_model_get, BODY_JSON, PERM_JOB_READ) \
	ROUTE("POST", "/api/v1/models/{id}/resume", api_model_resume, BODY_JSON, PERM_JOB_WRITE) \
	ROUTE("GET", "/api/v1/models/{id}/snapshots/{name}", api_model_snapshot, BODY_JSON, PERM_JOB_READ) \
	ROUTE("DELETE", "/api/v1/models/{id}/snapshots/{name}", api_model_snapshot_delete, BODY_JSON, PERM_JOB_WRITE) \
	ROUTE("POST", "/api/v1/models/{id}/snapshots/prune", api_model_snapshots_prune, BODY_JSON, PERM_JOB_WRITE) \
	/* networks and the LR preview (api_networks.c) */ \
	ROUTE("GET", "/api/v1/networks", api_networks_list, BODY_JSON, PERM_USER) \
	ROUTE("POST", "/api/v1/networks/check", api_networks_check, BODY_JSON, PERM_USER) \
	ROUTE("POST", "/api/v1/networks/visualize", api_networks_visualize, BODY_JSON, PERM_USER) \
	ROUTE("POST", "/api/v1/lr-preview", api_lr_preview, BODY_JSON, PERM_USER) \
	/* classify, bundles and their import (api_infer.c, api_import.c) */ \
	ROUTE("POST", "/api/v1/models/{id}/classify", api_model_classify, BODY_FILES, PERM_JOB_READ) \
	ROUTE("GET", "/api/v1/models/{id}/bundle", api_model_bundle, BODY_JSON, PERM_JOB_READ) \
	ROUTE("POST", "/api/v1/models/import", api_models_import, BODY_FILES, PERM_USER) \
	/* accounts (api_auth.c) */ \
	ROUTE("POST", "/api/v1/login", api_login, BODY_JSON, PERM_PUBLIC) \
	ROUTE("POST", "/api/v1/logout", api_logout, BODY_JSON, PERM_USER) \
	ROUTE("GET", "/api/v1/me", api_me, BODY_JSON, PERM_USER) \
	ROUTE("POST", "/api/v1/me/password", api_me_password, BODY_JSON, PERM_USER) \
	ROUTE("GET", "/api/v1/me/tokens", api_me_tokens_list, BODY_JSON, PERM_USER) \
	ROUTE("POST", "/api/v1/me/tokens", api_me_tokens_create, BODY_JSON, PERM_USER) \
	ROUTE("DELETE", "/api/v1/me/tokens/{id}", api_me_token_revoke, BODY_JSON, PERM_USER) /* {id}: one's own token */ \
	/* classes, rosters, shared datasets, lab presets, the dashboard (api_classes.c) */ \
	ROUTE("GET", "/api/v1/classes", api_classes_list, BODY_JSON, PERM_USER) \
	ROUTE("POST", "/api/v1/classes", api_classes_create, BODY_JSON, PERM_INSTRUCTOR) \
	ROUTE("GET", "/api/v1/classes/{id}", api_class_get, BODY_JSON, PERM_CLASS_READ) \
	ROUTE("DELETE", "/api/v1/classes/{id}", api_class_delete, BODY_JSON, PERM_CLASS_WRITE) \
	ROUTE("POST", "/api/v1/classes/{id}/members", api_class_member_add, BODY_JSON, PERM_CLASS_WRITE) \
	ROUTE("DELETE", "/api/v1/classes/{id}/members/{n}", api_class_member_remove, BODY_JSON, PERM_CLASS_WRITE) \
	ROUTE("POST", "/api/v1/classes/{id}/roster", api_class_roster, BODY_JSON, PERM_CLASS_WRITE) \
	ROUTE("POST", "/api/v1/classes/{id}/datasets", api_class_dataset_add, BODY_JSON, PERM_CLASS_WRITE) \
	ROUTE("DELETE", "/api/v1/classes/{id}/datasets/{n}", api_class_dataset_remove, BODY_JSON, PERM_CLASS_WRITE) \
	ROUTE("GET", "/api/v1/classes/{id}/presets", api_class_presets_list, BODY_JSON, PERM_CLASS_READ) \
	ROUTE("POST", "/api/v1/classes/{id}/presets", api_class_preset_create, BODY_JSON, PERM_CLASS_WRITE) \
	ROUTE("DELETE", "/api/v1/classes/{id}/presets/{n}", api_class_preset_delete, BODY_JSON, PERM_CLASS_WRITE) \
	ROUTE("GET", "/api/v1/classes/{id}/dashboard", api_class_dashboard, BODY_JSON, PERM_CLASS_WRITE) \
	ROUTE("GET", "/api/v1/presets", api_presets_list, BODY_JSON, PERM_USER) \
	/* the audit log (api_auth.c) */ \
	ROUTE("GET", "/api/v1/audit", api_audit_list, BODY_JSON, PERM_ADMIN) \
	/* evaluations (api_evals.c) */ \
	ROUTE("POST", "/api/v1/evaluations", api_evals_create, BODY_JSON, PERM_USER) \
	ROUTE("GET", "/api/v1/evaluations/{id}", api_eval_get, BODY_JSON, PERM_JOB_READ) \
	ROUTE("GET", "/api/v1/evaluations/{id}/confusion", api_eval_confusion, BODY_JSON, PERM_JOB_READ) \
	ROUTE("GET", "/api/v1/evaluations/{id}/misclassified", api_eval_misclassified, BODY_JSON, PERM_JOB_READ) \
	ROUTE("GET", "/api/v1/evaluations/{id}/top", api_eval_top, BODY_JSON, PERM_JOB_READ) \
	ROUTE("GET", "/api/v1/evaluations/{id}/results.csv", api_eval_results_csv, BODY_JSON, PERM_JOB_READ) \
	ROUTE("GET", "/api/v1/evaluations/{id}/results.json", api_eval_results_json, BODY_JSON, PERM_JOB_READ) \
	ROUTE("GET", "/api/v1/evaluations/{id}/images/{n}", api_eval_image, BODY_JSON, PERM_JOB_READ) \
	/* the admin's users, and the queue's order (api_users.c) */ \
	ROUTE("GET", "/api/v1/users", api_users_list, BODY_JSON, PERM_ADMIN) \
	ROUTE("POST", "/api/v1/users", api_users_create, BODY_JSON, PERM_ADMIN) \
	ROUTE("PATCH", "/api/v1/users/{id}", api_user_patch, BODY_JSON, PERM_ADMIN) \
	ROUTE("DELETE", "/api/v1/users/{id}", api_user_delete, BODY_JSON, PERM_ADMIN) \
	ROUTE("POST", "/api/v1/jobs/{id}/priority", api_job_priority, BODY_JSON, PERM_JOB_WRITE) /* not a learner: its handler */ \
	/* DIGITS' own routes, kept for the scripts written against them (outside /api/v1, not in \
	 * openapi.json; docs/api.md).  The classify forms check their job_id with \
	 * perm_job_visible; index.json lists what perm_list_owner allows (api_digits.c) */ \
	ROUTE("POST", "/models/images/classification/classify_one.json", api_digits_classify_one, BODY_FILES, PERM_USER) \
	ROUTE("POST", "/models/images/classification/classify_many.json", api_digits_classify_many, BODY_FILES, PERM_USER) \
	ROUTE("GET", "/index.json", api_digits_index, BODY_JSON, PERM_USER) \
	ROUTE("GET", "/datasets/{id}.json", api_digits_dataset, BODY_JSON, PERM_JOB_READ) \
	ROUTE("GET", "/models/{id}.json", api_digits_model, BODY_JSON, PERM_JOB_READ)

/* Every handler of the table: int NAME(struct req *r). */
#define API_DECLARE_HANDLER(method, pattern, fn, body, perm) int fn(struct req *r);
API_ROUTES(API_DECLARE_HANDLER)
#undef API_DECLARE_HANDLER

/* `deepdesk draw-network` (hidden; api_networks_visualize starts it): a graph as
 * JSON on stdin, its SVG on stdout; exit 0, or 1 with a sentence on stdout. */
int api_networks_draw_main(int argc, char **argv);
/* A POST /api/v1/models body naming "preset": refuse the fields the preset
 * locks or hides (400 naming the field), then replace *body (freed) with the
 * preset's settings under the body's other fields.  0, or the error sent. */
int api_preset_apply(struct req *r, cJSON **body);
/* Add "quota" and "usage" (today's) to an object holding a user's "id" (api_users.c). */
void api_users_add_quota_usage(cJSON *u);

/* Helpers the handlers share.  Each returns 0, or the status of the error it sent. */
struct job_row;
/* Job id's row, which must be of kind and one r may use (kind_use_job, the rule
 * the kinds' validate uses); the error names field ("dataset",
 * "network.previous"): 400 for no such job or another kind (api_jobs.c). */
int api_job_of_kind(struct req *r, int64_t id, const char *kind, const char *field, struct job_row *row);
/* Job r->id's row, for a route under its kind's path: 404 when it is of another
 * kind ("job 7 is not an evaluation"), or the store's error (api_jobs.c). */
int api_job_row(struct req *r, const char *kind, struct job_row *row);
/* A kind's own list (GET /api/v1/datasets, /api/v1/models): one page of the jobs
 * of kind r's user sees (?limit from 1 to 1000, 100 when absent; ?offset), newest
 * first, each given to add for its kind's fields, answered as
 * {key: [the page], "total": how many there are in all} (api_jobs.c). */
int api_jobs_page(struct req *r, const char *kind, const char *key, void (*add)(struct req *r, cJSON *job));
/* Job r->id as the API shows it, params included, into *job (caller frees with
 * cJSON_Delete(); api_jobs.c). */
int api_job_json(struct req *r, cJSON **job);
/* Job id as the image-classification dataset something is made from: a finished
 * dataset job with dataset.json and train_db (409 while it is not finished, saying
 * "; <purpose>"); its folder into dir (api_datasets.c). */
int api_finished_dataset(struct req *r, int64_t id, const char *field, const char *purpose, char *dir,
			 size_t dirlen);

/* The stored archive of upload id (POST /api/v1/uploads) into path; 1 when there
 * is one that r's user may use (their own, or any for an admin; api_datasets.c). */
int api_upload_find(const struct req *r, const char *id, char *path, size_t len);
/* Remove the upload at path and the owner kept beside it (a used or refused one). */
void api_upload_drop(const char *path);

#endif
