/* test_auth.c — the pure parts of accounts: password hashing, token format and
 * digest, names and passwords accepted, the login rate limiter, which listen
 * addresses are loopback; and the store side: users, sessions' owners of jobs,
 * API tokens revoked, the permission rules' default. */
#define _GNU_SOURCE
#include <stdlib.h>
#include <string.h>

#include "../../app/accounts/auth.h"
#include "../../app/http/perm.h"
#include "../../app/http/server.h"
#include "../../store/store.h"
#include "../../common/fsutil.h"
#include "fixture.h"
#include "rawsql.h"

static char dir[64];

static void test_hash_round_trip(void)
{
	char h1[AUTH_HASH_LEN], h2[AUTH_HASH_LEN];
	CHECK_EQ_INT(auth_password_hash("correct horse", h1, NULL), DD_OK);
	CHECK_EQ_INT(auth_password_hash("correct horse", h2, NULL), DD_OK);
	CHECK(strncmp(h1, "$argon2id$", 10) == 0);
	CHECK(strcmp(h1, h2) != 0); /* salted */
	CHECK(auth_password_verify(h1, "correct horse"));
	CHECK(auth_password_verify(h2, "correct horse"));
	CHECK(!auth_password_verify(h1, "correct horse "));
	CHECK(!auth_password_verify(h1, ""));
	CHECK(!auth_password_verify("not a hash", "correct horse"));
	CHECK(!strstr(h1, "correct"));
}

static int base64url(const char *s)
{
	for (; *s; s++)
		if (!((*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z') || (*s >= '0' && *s <= '9') || *s == '-' ||
		      *s == '_'))
			return 0;
	return 1;
}

static void test_token_format_and_digest(void)
{
	char a[AUTH_TOKEN_LEN + 1], b[AUTH_TOKEN_LEN + 1], d1[65], d2[65];
	auth_token_new(a);
	auth_token_new(b);
	CHECK_EQ_INT((int)strlen(a), 43); /* 256 bits in base64url */
	CHECK(base64url(a));
	CHECK(strcmp(a, b) != 0);
	auth_token_digest(a, d1);
	auth_token_digest(a, d2);
	CHECK_STR(d1, d2);
	CHECK_EQ_INT((int)strlen(d1), 64);
	/* SHA-256 of "abc", the FIPS 180-2 example */
	auth_token_digest("abc", d1);
	CHECK_STR(d1, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
}

static void test_names_and_passwords(void)
{
	struct dd_err err = { 0 };
	CHECK_EQ_INT(auth_name_check("alice", NULL), DD_OK);
	CHECK_EQ_INT(auth_name_check("a.b_c-9", NULL), DD_OK);
	CHECK_EQ_INT(auth_name_check("", NULL), DD_EINVAL);
	CHECK_EQ_INT(auth_name_check("-x", NULL), DD_EINVAL);
	CHECK_EQ_INT(auth_name_check("a b", &err), DD_EINVAL);
	CHECK_CONTAINS(err.msg, "name:");
	CHECK_EQ_INT(auth_name_check("<script>", NULL), DD_EINVAL);
	CHECK_EQ_INT(auth_name_check("Local", &err), DD_EINVAL);
	CHECK_CONTAINS(err.msg, "local");
	CHECK_EQ_INT(auth_name_check("abcdefghijabcdefghijabcdefghijabc", NULL), DD_EINVAL); /* 33 */
	CHECK_EQ_INT(auth_password_check("1234567", &err), DD_EINVAL);
	CHECK_CONTAINS(err.msg, "at least 8");
	CHECK_EQ_INT(auth_password_check("12345678", NULL), DD_OK);
}

static void test_rate_limiter(void)
{
	struct ratelimit *rl = ratelimit_create(5, 1000, 8000, 60000);
	CHECK(rl != NULL);
	int64_t t = 1000000;
	for (int i = 0; i < 5; i++) {
		CHECK_EQ_INT((int)ratelimit_wait(rl, "n:bob", t), 0);
		ratelimit_fail(rl, "n:bob", t);
	}
	/* the 5 free failures are spent: 1 s, then 2, 4, 8, 8 (the cap) */
	CHECK_EQ_INT((int)ratelimit_wait(rl, "n:bob", t), 1000);
	CHECK_EQ_INT((int)ratelimit_wait(rl, "n:bob", t + 400), 600);
	CHECK_EQ_INT((int)ratelimit_wait(rl, "n:bob", t + 1000), 0);
	CHECK_EQ_INT((int)ratelimit_wait(rl, "n:alice", t), 0); /* keys are apart */
	ratelimit_fail(rl, "n:bob", t + 1000);
	CHECK_EQ_INT((int)ratelimit_wait(rl, "n:bob", t + 1000), 2000);
	ratelimit_fail(rl, "n:bob", t + 3000);
	CHECK_EQ_INT((int)ratelimit_wait(rl, "n:bob", t + 3000), 4000);
	ratelimit_fail(rl, "n:bob", t + 7000);
	ratelimit_fail(rl, "n:bob", t + 7000);
	ratelimit_fail(rl, "n:bob", t + 7000);
	CHECK_EQ_INT((int)ratelimit_wait(rl, "n:bob", t + 7000), 8000);
	/* a success forgets the failures */
	ratelimit_reset(rl, "n:bob");
	CHECK_EQ_INT((int)ratelimit_wait(rl, "n:bob", t + 7000), 0);
	/* and so does a long quiet time */
	for (int i = 0; i < 6; i++)
		ratelimit_fail(rl, "a:10.0.0.1", t);
	CHECK((int)ratelimit_wait(rl, "a:10.0.0.1", t) > 0);
	CHECK_EQ_INT((int)ratelimit_wait(rl, "a:10.0.0.1", t + 60001), 0);
	/* a full table makes room: many keys, none lost to a crash */
	for (int i = 0; i < 3000; i++) {
		char key[32];
		snprintf(key, sizeof key, "a:%d", i);
		ratelimit_fail(rl, key, t + i);
	}
	for (int i = 0; i < 6; i++)
		ratelimit_fail(rl, "n:carol", t + 5000);
	CHECK((int)ratelimit_wait(rl, "n:carol", t + 5000) > 0);
	ratelimit_destroy(rl);
	ratelimit_destroy(NULL);
}

static void test_loopback(void)
{
	CHECK(server_listen_is_loopback("127.0.0.1:5010"));
	CHECK(server_listen_is_loopback("127.0.0.1:0"));
	CHECK(server_listen_is_loopback("localhost:5010"));
	CHECK(server_listen_is_loopback("[::1]:5010"));
	CHECK(server_listen_is_loopback("127.0.0.1:5010,[::1]:5010"));
	CHECK(!server_listen_is_loopback("5010"));
	CHECK(!server_listen_is_loopback("0.0.0.0:5010"));
	CHECK(!server_listen_is_loopback("[::]:5010"));
	CHECK(!server_listen_is_loopback("192.168.1.4:5010"));
	CHECK(!server_listen_is_loopback("127.0.0.1:5010,0.0.0.0:5011"));
	CHECK(!server_listen_is_loopback(""));
}

static void test_users_and_owners(void)
{
	struct dd_err err = { 0 };
	CHECK_EQ_INT(store_init(dir, &err), DD_OK);
	int64_t a, b;
	CHECK_EQ_INT(auth_user_add("ann", ROLE_LEARNER, "password-a", &a, &err), DD_OK);
	CHECK_EQ_INT(auth_user_add("ben", ROLE_LEARNER, "password-b", &b, &err), DD_OK);
	CHECK_EQ_INT(auth_user_add("ANN", ROLE_ADMIN, "password-c", NULL, &err), DD_EEXIST); /* names ignore case */
	CHECK_CONTAINS(err.msg, "already exists");
	struct auth_user u;
	char hash[AUTH_HASH_LEN];
	int disabled = -1;
	CHECK_EQ_INT(auth_user_find("Ann", &u, hash, &disabled, NULL), DD_OK);
	CHECK(u.id == a && u.role == ROLE_LEARNER && disabled == 0);
	CHECK(auth_password_verify(hash, "password-a"));
	CHECK_EQ_INT(auth_user_find("nobody", &u, NULL, NULL, NULL), DD_ENOENT);

	/* a job is owned by the account of its owner's name; "local" is nobody's */
	int64_t j1, j2, j3, owner = -1;
	CHECK_EQ_INT(store_job_insert("test", "a's", "ann", NULL, NULL, NULL, 0, &j1, NULL), DD_OK);
	CHECK_EQ_INT(store_job_insert("test", "b's", "ben", NULL, NULL, NULL, 0, &j2, NULL), DD_OK);
	CHECK_EQ_INT(store_job_insert("test", "local", "local", NULL, NULL, NULL, 0, &j3, NULL), DD_OK);
	CHECK_EQ_INT(store_job_owner(j1, &owner, NULL), DD_OK);
	CHECK(owner == a);
	CHECK_EQ_INT(store_job_owner(j3, &owner, NULL), DD_OK);
	CHECK(owner == 0);
	CHECK_EQ_INT(store_job_owner(99999, &owner, NULL), DD_ENOENT);
	cJSON *list = NULL;
	int total = 0;
	CHECK_EQ_INT(store_job_list_for(b, NULL, NULL, 50, 0, &list, &total, NULL), DD_OK);
	CHECK_EQ_INT(total, 1);
	CHECK_EQ_INT(cJSON_GetArraySize(list), 1);
	CHECK_STR(cJSON_GetObjectItem(cJSON_GetArrayItem(list, 0), "name")->valuestring, "b's");
	cJSON_Delete(list);
	CHECK_EQ_INT(store_job_list_for(-1, NULL, NULL, 50, 0, &list, &total, NULL), DD_OK);
	CHECK_EQ_INT(total, 3);
	cJSON_Delete(list);

	/* who sees what */
	struct auth_state as = { .accounts = 1, .authenticated = 1, .user = { .id = a, .role = ROLE_LEARNER } };
	CHECK(perm_sees_owner(&as, a));
	CHECK(!perm_sees_owner(&as, b));
	CHECK(!perm_sees_owner(&as, 0));
	CHECK(!perm_sees_owner(&as, -1));
	/* an instructor sees the members of their classes (and nobody's jobs only
	 * as an admin): a, made instructor, with b in a class of theirs */
	as.user.role = ROLE_INSTRUCTOR;
	CHECK(!perm_sees_owner(&as, b) && !perm_sees_owner(&as, 0));
	int64_t cls;
	CHECK_EQ_INT(store_class_create("c", a, &cls, NULL), DD_OK);
	CHECK_EQ_INT(store_class_member_add(cls, b, NULL), DD_OK);
	CHECK(perm_sees_owner(&as, b) && perm_sees_owner(&as, a) && !perm_sees_owner(&as, 0));
	as.user.role = ROLE_ADMIN;
	CHECK(perm_sees_owner(&as, b) && perm_sees_owner(&as, 0));
	as.authenticated = 0;
	CHECK(!perm_sees_owner(&as, b));
	as.accounts = 0;
	CHECK(perm_sees_owner(&as, b));

	/* removing a user keeps their jobs, owned by nobody */
	CHECK_EQ_INT(auth_user_remove(b, &err), DD_OK);
	CHECK_EQ_INT(store_job_owner(j2, &owner, NULL), DD_OK);
	CHECK(owner == 0);
	CHECK_EQ_INT(auth_user_remove(b, NULL), DD_ENOENT);
}

static void test_tokens_revoked(void)
{
	struct auth_user u;
	CHECK_EQ_INT(auth_user_find("ann", &u, NULL, NULL, NULL), DD_OK);
	char secret[AUTH_TOKEN_LEN + 8];
	int64_t id;
	CHECK_EQ_INT(auth_apitoken_create(u.id, "script", secret, &id, NULL), DD_OK);
	CHECK(strncmp(secret, "ddt_", 4) == 0);
	CHECK_EQ_INT((int)strlen(secret), 4 + 43);
	/* only the digest is stored */
	char sql[160];
	snprintf(sql, sizeof sql, "SELECT count(*) FROM api_tokens WHERE token_hash='%s'", secret);
	CHECK_EQ_INT(rawsql_value(dir, sql, NULL, 0), 0);
	snprintf(sql, sizeof sql, "SELECT count(*) FROM api_tokens WHERE id=%lld", (long long)id);
	CHECK_EQ_INT(rawsql_value(dir, sql, NULL, 0), 1); /* the query itself works */
	CHECK_EQ_INT(auth_apitoken_revoke(u.id + 1000, id, NULL), DD_ENOENT); /* not another's */
	CHECK_EQ_INT(auth_apitoken_revoke(u.id, id, NULL), DD_OK);
	cJSON *o = NULL;
	CHECK_EQ_INT(auth_apitoken_list(u.id, &o, NULL), DD_OK);
	cJSON *t = cJSON_GetArrayItem(cJSON_GetObjectItem(o, "tokens"), 0);
	CHECK(cJSON_IsTrue(cJSON_GetObjectItem(t, "revoked")));
	char *text = cJSON_PrintUnformatted(o);
	CHECK(text && !strstr(text, "ddt_")); /* the list never shows a secret */
	free(text);
	cJSON_Delete(o);
}

static void test_route_default_is_admin(void)
{
	CHECK_EQ_INT(perm_route_action("GET", "/api/v1/something-new"), PERM_ADMIN);
	CHECK_EQ_INT(perm_route_action("POST", "/api/v1/jobs/{id}/whatever"), PERM_ADMIN);
	CHECK_EQ_INT(perm_route_action("POST", "/api/v1/login"), PERM_PUBLIC);
	CHECK_EQ_INT(perm_route_action("DELETE", "/api/v1/jobs/{id}"), PERM_JOB_WRITE);
	CHECK_EQ_INT(perm_route_action("GET", "/api/v1/jobs/{id}"), PERM_JOB_READ);
	/* every route the server has was decided about, except DIGITS' classify_one */
	int unknown = 0;
	for (const struct route_info *r = server_routes(); r->pattern; r++)
		if (perm_route_action(r->method, r->pattern) == PERM_ADMIN && strcmp(r->pattern, "/api/v1/audit") != 0 &&
		    strncmp(r->pattern, "/api/v1/users", 13) != 0) { /* admins' by decision */
			printf("  undecided: %s %s\n", r->method, r->pattern);
			unknown++;
		}
	CHECK_EQ_INT(unknown, 0);
}

static void tests(void)
{
	RUN(test_hash_round_trip);
	RUN(test_token_format_and_digest);
	RUN(test_names_and_passwords);
	RUN(test_rate_limiter);
	RUN(test_loopback);
	RUN(test_users_and_owners);
	RUN(test_tokens_revoked);
	RUN(test_route_default_is_admin);
}

int main(void)
{
	return fixture_main(dir, sizeof dir, FIXTURE_DIR, tests);
}
