/* test_classes.c — the classes part of the store (store/store.c): members, the
 * roster's one transaction (all or nothing), shared datasets, the job lists
 * widened to what a viewer may see, presets by class and viewer, a class's runs,
 * and what deleting a class or an account takes with it. */
#define _GNU_SOURCE
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "../../app/accounts/auth.h"
#include "../../store/store.h"
#include "../../common/fsutil.h"
#include "fixture.h"

static char dir[64];
static int64_t ivy, olga, ann, ben, cat, cx, cy, ds, am, bm, cm;

static int ids_of(int64_t viewer, const char *kind, int64_t *out, int cap)
{
	cJSON *list = NULL, *j;
	int total = 0, n = 0;
	if (store_job_list_for(viewer, kind, NULL, 100, 0, &list, &total, NULL) != DD_OK)
		return -1;
	cJSON_ArrayForEach(j, list) if (n < cap) out[n++] = (int64_t)cJSON_GetNumberValue(cJSON_GetObjectItem(j, "id"));
	cJSON_Delete(list);
	return total == n ? n : -1;
}

static int has(const int64_t *ids, int n, int64_t id)
{
	for (int i = 0; i < n; i++)
		if (ids[i] == id)
			return 1;
	return 0;
}

static void test_setup(void)
{
	struct dd_err err = { 0 };
	CHECK_EQ_INT(store_init(dir, &err), DD_OK);
	CHECK_EQ_INT(auth_user_add("ivy", ROLE_INSTRUCTOR, "password-i", &ivy, &err), DD_OK);
	CHECK_EQ_INT(auth_user_add("olga", ROLE_INSTRUCTOR, "password-o", &olga, &err), DD_OK);
	CHECK_EQ_INT(auth_user_add("ann", ROLE_LEARNER, "password-a", &ann, &err), DD_OK);
	CHECK_EQ_INT(auth_user_add("ben", ROLE_LEARNER, "password-b", &ben, &err), DD_OK);
	CHECK_EQ_INT(auth_user_add("cat", ROLE_LEARNER, "password-c", &cat, &err), DD_OK);
	CHECK_EQ_INT(store_job_insert("dataset", "ivy's data", "ivy", NULL, NULL, NULL, 0, &ds, NULL), DD_OK);
	CHECK_EQ_INT(store_job_insert("model", "ann's", "ann", NULL, NULL, &ds, 1, &am, NULL), DD_OK);
	CHECK_EQ_INT(store_job_insert("model", "ben's", "ben", NULL, NULL, NULL, 0, &bm, NULL), DD_OK);
	CHECK_EQ_INT(store_job_insert("model", "cat's", "cat", NULL, NULL, NULL, 0, &cm, NULL), DD_OK);
	CHECK_EQ_INT(store_class_create("X", ivy, &cx, &err), DD_OK);
	CHECK_EQ_INT(store_class_create("Y", olga, &cy, &err), DD_OK);
	int64_t who;
	CHECK_EQ_INT(store_class_instructor(cx, &who, &err), DD_OK);
	CHECK(who == ivy);
	CHECK_EQ_INT(store_class_instructor(9999, &who, &err), DD_ENOENT);
	CHECK_STR(err.msg, "class 9999 does not exist");
}

static void test_roster_all_or_nothing(void)
{
	struct dd_err err = { 0 };
	/* a new name taken meanwhile (ben exists) undoes the whole roster */
	struct store_roster_entry bad[] = {
		{ .line = 1, .name = "ann", .user_id = ann },
		{ .line = 2, .name = "dan", .role = "learner", .pwhash = "x" },
		{ .line = 3, .name = "BEN", .role = "learner", .pwhash = "x" },
	};
	CHECK_EQ_INT(store_class_roster(cx, bad, 3, &err), DD_ECONFLICT);
	CHECK_STR(err.msg, "line 3: BEN: an account of that name was made meanwhile");
	struct auth_user u;
	CHECK_EQ_INT(auth_user_find("dan", &u, NULL, NULL, NULL), DD_ENOENT);
	CHECK(!store_class_is_member(cx, ann));
	struct store_roster_entry good[] = {
		{ .line = 1, .name = "ann", .user_id = ann },
		{ .line = 2, .name = "ben", .user_id = ben },
		{ .line = 3, .name = "dan", .role = "instructor", .pwhash = "x" },
	};
	CHECK_EQ_INT(store_class_roster(cx, good, 3, &err), DD_OK);
	CHECK(good[2].user_id > 0);
	CHECK_EQ_INT(auth_user_find("dan", &u, NULL, NULL, NULL), DD_OK);
	CHECK_EQ_INT(u.role, ROLE_INSTRUCTOR);
	CHECK(store_class_is_member(cx, ann) && store_class_is_member(cx, ben) && store_class_is_member(cx, u.id));
	CHECK_EQ_INT(store_class_member_add(cx, ann, &err), DD_OK); /* again: nothing changes */
	CHECK_EQ_INT(store_class_member_add(cy, cat, &err), DD_OK);
	CHECK_EQ_INT(store_class_member_remove(cx, u.id, &err), DD_OK);
	CHECK_EQ_INT(store_class_member_remove(cx, u.id, &err), DD_ENOENT);
	cJSON *c = NULL;
	CHECK_EQ_INT(store_class_json(cx, &c, &err), DD_OK);
	CHECK_EQ_INT(cJSON_GetArraySize(cJSON_GetObjectItem(c, "members")), 2);
	CHECK_EQ_INT((int)cJSON_GetNumberValue(cJSON_GetObjectItem(c, "member_count")), 2);
	cJSON_Delete(c);
}

static void test_who_sees_what(void)
{
	int64_t ids[16];
	CHECK(store_class_instructs(ivy, ann) && store_class_instructs(ivy, ben) && !store_class_instructs(ivy, cat));
	CHECK(store_class_instructs(olga, cat) && !store_class_instructs(olga, ann));
	CHECK(!store_class_instructs(ann, ben));
	/* before sharing: a learner sees their own; an instructor their members' and their own */
	int n = ids_of(ann, NULL, ids, 16);
	CHECK(n == 1 && has(ids, n, am));
	n = ids_of(ivy, NULL, ids, 16);
	CHECK(n == 3 && has(ids, n, ds) && has(ids, n, am) && has(ids, n, bm));
	n = ids_of(olga, NULL, ids, 16);
	CHECK(n == 1 && has(ids, n, cm));
	CHECK_EQ_INT(ids_of(-1, NULL, ids, 16), 4);
	/* shared with X: its members list it, the others do not */
	CHECK(!store_class_dataset_shared(ds, ann));
	CHECK_EQ_INT(store_class_dataset_add(cx, ds, NULL), DD_OK);
	CHECK(store_class_dataset_shared(ds, ann) && store_class_dataset_shared(ds, ben) && !store_class_dataset_shared(ds, cat));
	n = ids_of(ann, "dataset", ids, 16);
	CHECK(n == 1 && has(ids, n, ds));
	CHECK_EQ_INT(ids_of(cat, "dataset", ids, 16), 0);
	CHECK_EQ_INT(ids_of(olga, "dataset", ids, 16), 0);
	/* an instructor made a learner sees no class of theirs any more */
	CHECK_EQ_INT(auth_user_set_role(ivy, ROLE_LEARNER, NULL), DD_OK);
	n = ids_of(ivy, NULL, ids, 16);
	CHECK(n == 1 && has(ids, n, ds));
	CHECK_EQ_INT(auth_user_set_role(ivy, ROLE_INSTRUCTOR, NULL), DD_OK);
}

static void test_presets_and_runs(void)
{
	struct dd_err err = { 0 };
	int64_t px, py;
	CHECK_EQ_INT(store_preset_add(cx, "lab", "{\"epochs\":2}", "[\"epochs\"]", "[]", &px, &err), DD_OK);
	CHECK_EQ_INT(store_preset_add(cy, "other", "{}", "[]", "[]", &py, &err), DD_OK);
	cJSON *l = NULL;
	CHECK_EQ_INT(store_preset_list(ann, 0, &l, &err), DD_OK);
	CHECK_EQ_INT(cJSON_GetArraySize(l), 1);
	cJSON *p = cJSON_GetArrayItem(l, 0);
	CHECK_STR(cJSON_GetStringValue(cJSON_GetObjectItem(p, "class_name")), "X");
	CHECK_EQ_INT((int)cJSON_GetNumberValue(cJSON_GetObjectItem(cJSON_GetObjectItem(p, "settings"), "epochs")), 2);
	CHECK(cJSON_IsArray(cJSON_GetObjectItem(p, "locked")));
	cJSON_Delete(l);
	CHECK_EQ_INT(store_preset_list(olga, 0, &l, &err), DD_OK);
	CHECK_EQ_INT(cJSON_GetArraySize(l), 1);
	cJSON_Delete(l);
	CHECK_EQ_INT(store_preset_list(-1, cx, &l, &err), DD_OK);
	CHECK_EQ_INT(cJSON_GetArraySize(l), 1);
	cJSON_Delete(l);
	CHECK_EQ_INT(store_preset_delete(cy, px, &err), DD_ENOENT); /* not that class's */
	CHECK_EQ_INT(store_class_runs(cx, &l, &err), DD_OK);
	CHECK_EQ_INT(cJSON_GetArraySize(l), 2); /* ann's and ben's models, not the dataset */
	CHECK_STR(cJSON_GetStringValue(cJSON_GetObjectItem(cJSON_GetObjectItem(cJSON_GetArrayItem(l, 0), "user"), "name")), "ann");
	cJSON_Delete(l);
}

static void test_deleting(void)
{
	struct dd_err err = { 0 };
	cJSON *l = NULL;
	/* an account that goes leaves its classes */
	CHECK_EQ_INT(auth_user_remove(ben, &err), DD_OK);
	CHECK(!store_class_is_member(cx, ben));
	/* a class that goes takes its shares and presets, never a job */
	CHECK_EQ_INT(store_class_delete(cx, &err), DD_OK);
	CHECK_EQ_INT(store_class_delete(cx, &err), DD_ENOENT);
	CHECK(!store_class_dataset_shared(ds, ann));
	CHECK(!store_class_instructs(ivy, ann));
	CHECK_EQ_INT(store_preset_list(-1, 0, &l, &err), DD_OK);
	CHECK_EQ_INT(cJSON_GetArraySize(l), 1);
	cJSON_Delete(l);
	int64_t owner;
	CHECK_EQ_INT(store_job_owner(am, &owner, NULL), DD_OK);
	CHECK_EQ_INT(store_job_owner(ds, &owner, NULL), DD_OK);
}

static void tests(void)
{
	RUN(test_setup);
	RUN(test_roster_all_or_nothing);
	RUN(test_who_sees_what);
	RUN(test_presets_and_runs);
	RUN(test_deleting);
}

int main(void)
{
	return fixture_main(dir, sizeof dir, FIXTURE_DIR, tests);
}
