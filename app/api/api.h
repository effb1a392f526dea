/* api.h — the REST handlers.  Each takes the routed request and returns the
 * status it sent.  The route table that maps paths to them is in server.c. */
#ifndef DD_API_H
#define DD_API_H

#include "../http/http.h"

struct server_info; /* server.h */

int api_info(struct req *r);
int api_openapi(struct req *r);
int api_jobs_list(struct req *r);
int api_jobs_create(struct req *r);
int api_job_get(struct req *r);
int api_job_patch(struct req *r);
int api_job_delete(struct req *r);
int api_job_abort(struct req *r);
int api_job_clone(struct req *r);
int api_job_events(struct req *r);
int api_ws_plain(struct req *r);
int api_uploads_create(struct req *r);
int api_datasets_create(struct req *r);
int api_datasets_list(struct req *r);
int api_dataset_get(struct req *r);
int api_dataset_images(struct req *r);
int api_dataset_image(struct req *r);
int api_dataset_file(struct req *r);
int api_datasets_preview(struct req *r);
int api_models_create(struct req *r);
int api_models_list(struct req *r);
int api_model_get(struct req *r);
int api_model_resume(struct req *r);
int api_model_snapshot(struct req *r);
int api_model_snapshot_delete(struct req *r);
int api_model_snapshots_prune(struct req *r);
int api_job_resources(struct req *r);
int api_networks_list(struct req *r);
int api_networks_check(struct req *r);
int api_networks_visualize(struct req *r);
/* `deepdesk draw-network` (hidden; api_networks_visualize starts it): a graph as
 * JSON on stdin, its SVG on stdout; exit 0, or 1 with a sentence on stdout. */
int api_networks_draw_main(int argc, char **argv);
int api_lr_preview(struct req *r);
int api_model_classify(struct req *r);
int api_model_bundle(struct req *r);
int api_models_import(struct req *r);
/* accounts (api_auth.c) */
int api_login(struct req *r);
int api_logout(struct req *r);
int api_me(struct req *r);
int api_me_password(struct req *r);
int api_me_tokens_list(struct req *r);
int api_me_tokens_create(struct req *r);
int api_me_token_revoke(struct req *r);
int api_audit_list(struct req *r);
/* classes, rosters, shared datasets, lab presets, the dashboard (api_classes.c) */
int api_classes_list(struct req *r);
int api_classes_create(struct req *r);
int api_class_get(struct req *r);
int api_class_delete(struct req *r);
int api_class_member_add(struct req *r);
int api_class_member_remove(struct req *r);
int api_class_roster(struct req *r);
int api_class_dataset_add(struct req *r);
int api_class_dataset_remove(struct req *r);
int api_class_presets_list(struct req *r);
int api_class_preset_create(struct req *r);
int api_class_preset_delete(struct req *r);
int api_class_dashboard(struct req *r);
int api_presets_list(struct req *r);
/* A POST /api/v1/models body naming "preset": refuse the fields the preset
 * locks or hides (400 naming the field), then replace *body (freed) with the
 * preset's settings under the body's other fields.  0, or the error sent. */
int api_preset_apply(struct req *r, cJSON **body);
int api_evals_create(struct req *r);
int api_eval_get(struct req *r);
int api_eval_confusion(struct req *r);
int api_eval_misclassified(struct req *r);
int api_eval_top(struct req *r);
int api_eval_results_csv(struct req *r);
int api_eval_results_json(struct req *r);
int api_eval_image(struct req *r);
/* api_users.c: the admin's users, and the queue's order */
int api_users_list(struct req *r);
/* Add "quota" and "usage" (today's) to an object holding a user's "id". */
void api_users_add_quota_usage(cJSON *u);
int api_users_create(struct req *r);
int api_user_patch(struct req *r);
int api_user_delete(struct req *r);
int api_job_priority(struct req *r);
/* DIGITS' own routes, kept for the scripts written against them (outside /api/v1) */
int api_digits_classify_one(struct req *r);
int api_digits_classify_many(struct req *r);
int api_digits_index(struct req *r);
int api_digits_dataset(struct req *r);
int api_digits_model(struct req *r);

/* Helpers the handlers share.  Each returns 0, or the status of the error it sent. */
struct job_row;
/* Job id's row, which must be of kind and one r may use (kind_use_job, the rule
 * the kinds' validate uses); the error names field ("dataset",
 * "network.previous"): 400 for no such job or another kind (api_jobs.c). */
int api_job_of_kind(struct req *r, int64_t id, const char *kind, const char *field, struct job_row *row);
/* One page of the jobs of kind r's user sees (?limit from 1 to 1000, 100 when
 * absent; ?offset), newest first, into *jobs (caller frees with cJSON_Delete())
 * and how many there are in all into *total (api_jobs.c). */
int api_jobs_page(struct req *r, const char *kind, cJSON **jobs, int *total);
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
