/* ws.c — see ws.h.
 *
 * Each client has its own outgoing queue and its own sender thread, so a client
 * that stops reading slows nobody else: ws_publish only appends a shared,
 * reference-counted message to the queues of the clients that want it.  A queue
 * that grows past QUEUE_MAX_BYTES means the client cannot keep up; it is told
 * {"type":"overflow"} and closed, and catches up from /events?after= when it
 * reconnects.  The close handler stops the sender and waits for it before the
 * client is freed.
 *
 * With accounts on, a connection is refused unless it comes with a session
 * cookie or an API token, and each client only ever gets what perm.c lets its
 * user see, whatever the topic: a learner's "all" is all of their own jobs.
 *
 * Each connection holds one of CivetWeb's threads for its life, so on_connect
 * counts before it accepts: the open clients and those accepted but not yet
 * ready (`pending`, between on_connect and on_ready), in all, of the same
 * user (accounts on) and of the same address, against `limits`.  A pending
 * place that never becomes ready (the handshake failed) lapses after
 * PENDING_MS. */
#define _GNU_SOURCE
#include "ws.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../common/fsutil.h"
#include "../../common/json.h"
#include "../../common/log.h"
#include "../accounts/auth.h"
#include "http.h"
#include "job_view.h"
#include "perm.h"
#include "../../store/store.h"

#define MAX_SUBS 64
#define QUEUE_MAX_BYTES (16u << 20)
/* A sender only writes frames (mg_websocket_write, OpenSSL's SSL_write under
 * HTTPS) and logs a line: 256 KiB, not glibc's 8 MiB default, for each of up to
 * --threads clients. */
#define SENDER_STACK (256u << 10)
#define WS_FRAME_MAX (64u << 10) /* a client's frame: {"subscribe": …} is a few bytes */

struct msg {
	atomic_int refs;
	size_t len;
	char text[];
};

#define SESSION_RECHECK_MS 2000

struct qitem {
	struct msg *m;
	struct qitem *next;
};

struct ws_client {
	struct mg_connection *c;
	struct auth_state who; /* the user, as at connection time */
	int64_t user;          /* who.user.id with accounts on, else 0: for the limits */
	int all, jobs; /* topics "all" and "jobs" */
	int64_t subs[MAX_SUBS];
	int nsubs;
	/* the outgoing queue, under `lock` */
	struct qitem *head, *tail;
	size_t queued_bytes;
	int closing, overflowed;
	int signed_out;          /* its session ended: told so and closed */
	int64_t checked_ms;      /* when the session was last asked about */
	size_t frag_bytes;       /* a fragmented message's bytes so far (on_data's thread only) */
	pthread_cond_t wake;
	pthread_t sender;
	int sender_started;
	struct ws_client *next;
};

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static struct ws_client *clients;
static struct ws_limits limits = { .total = 100, .per_user = 8, .per_addr = 16 };

/* Upgrades accepted by on_connect and not yet ready, under `lock`.  c is NULL in
 * a free place; a place older than PENDING_MS is free too. */
#define PENDING_MAX 64
#define PENDING_MS 10000
static struct pending {
	const struct mg_connection *c;
	int64_t user;
	char addr[48];
	int64_t at_ms;
} pending[PENDING_MAX];

/* Whether any WebSocket is open now (a client that comes a moment later gets the
 * job's state from its own subscribe). */
static int any_client(void)
{
	pthread_mutex_lock(&lock);
	int any = clients != NULL;
	pthread_mutex_unlock(&lock);
	return any;
}

/* Every frame we send is made here, and a TEXT frame must be UTF-8 (RFC 6455;
 * browsers close the socket on one that is not): cJSON copies a string's bytes
 * as they are, and a name from an archive or an old row may not be UTF-8, so any
 * such bytes become U+FFFD here. */
static struct msg *msg_new(const char *text)
{
	size_t len = strlen(text);
	char *fixed = NULL;
	if (json_utf8_check(text, len, NULL) != len) {
		if (!(fixed = json_utf8_fix(text, len, &len)))
			return NULL;
		text = fixed;
	}
	struct msg *m = malloc(sizeof *m + len + 1);
	if (m) {
		atomic_init(&m->refs, 1);
		m->len = len;
		memcpy(m->text, text, len + 1);
	}
	free(fixed);
	return m;
}

static void msg_unref(struct msg *m)
{
	if (m && atomic_fetch_sub(&m->refs, 1) == 1)
		free(m);
}

/* Append m to cl's queue (lock held).  Returns 0, or -1 when the client is too far
 * behind (it is then marked to be closed). */
static int enqueue(struct ws_client *cl, struct msg *m)
{
	if (cl->closing || cl->overflowed || cl->signed_out)
		return -1;
	if (cl->queued_bytes + m->len > QUEUE_MAX_BYTES) {
		cl->overflowed = 1;
		pthread_cond_signal(&cl->wake);
		return -1;
	}
	struct qitem *q = malloc(sizeof *q);
	if (!q)
		return -1;
	atomic_fetch_add(&m->refs, 1);
	q->m = m;
	q->next = NULL;
	if (cl->tail)
		cl->tail->next = q;
	else
		cl->head = q;
	cl->tail = q;
	cl->queued_bytes += m->len;
	pthread_cond_signal(&cl->wake);
	return 0;
}

static void *sender_main(void *arg)
{
	struct ws_client *cl = arg;
	pthread_mutex_lock(&lock);
	for (;;) {
		while (!cl->head && !cl->closing && !cl->overflowed && !cl->signed_out)
			pthread_cond_wait(&cl->wake, &lock);
		if (cl->closing)
			break;
		if (cl->signed_out) {
			pthread_mutex_unlock(&lock);
			static const char out[] =
				"{\"type\":\"signed_out\",\"message\":\"your session has ended (logout, a password change, expiry, a revoked API token or a disabled account); log in again\"}";
			mg_websocket_write(cl->c, MG_WEBSOCKET_OPCODE_TEXT, out, sizeof out - 1);
			mg_websocket_write(cl->c, MG_WEBSOCKET_OPCODE_CONNECTION_CLOSE, "", 0);
			pthread_mutex_lock(&lock);
			while (!cl->closing)
				pthread_cond_wait(&cl->wake, &lock);
			break;
		}
		if (cl->overflowed) {
			pthread_mutex_unlock(&lock);
			static const char over[] =
				"{\"type\":\"overflow\",\"message\":\"this connection fell too far behind; reconnect and fetch missed events from /api/v1/jobs/ID/events\"}";
			mg_websocket_write(cl->c, MG_WEBSOCKET_OPCODE_TEXT, over, sizeof over - 1);
			mg_websocket_write(cl->c, MG_WEBSOCKET_OPCODE_CONNECTION_CLOSE, "", 0);
			pthread_mutex_lock(&lock);
			while (!cl->closing)
				pthread_cond_wait(&cl->wake, &lock);
			break;
		}
		struct qitem *q = cl->head;
		cl->head = q->next;
		if (!cl->head)
			cl->tail = NULL;
		cl->queued_bytes -= q->m->len;
		pthread_mutex_unlock(&lock);
		if (mg_websocket_write(cl->c, MG_WEBSOCKET_OPCODE_TEXT, q->m->text, q->m->len) < 0)
			log_debug("websocket write failed; the client is going away");
		msg_unref(q->m);
		free(q);
		pthread_mutex_lock(&lock);
	}
	pthread_mutex_unlock(&lock);
	return NULL;
}

/* Queue a message for one client (its own replies). */
static void send_json(struct ws_client *cl, cJSON *j)
{
	char *text = cJSON_PrintUnformatted(j);
	cJSON_Delete(j);
	struct msg *m = text ? msg_new(text) : NULL;
	free(text);
	if (!m)
		return;
	pthread_mutex_lock(&lock);
	enqueue(cl, m);
	pthread_mutex_unlock(&lock);
	msg_unref(m);
}

/* Refuse an upgrade with an HTTP answer that says why (status 401, 429 or 503). */
static void refuse(struct mg_connection *c, int status, const char *why)
{
	cJSON *body = cJSON_CreateObject(), *e = cJSON_AddObjectToObject(body, "error");
	cJSON_AddStringToObject(e, "code", status == 401 ? "unauthenticated" : status == 429 ? "rate_limited" : "unavailable");
	cJSON_AddStringToObject(e, "message", why);
	char *text = cJSON_PrintUnformatted(body);
	cJSON_Delete(body);
	size_t n = text ? strlen(text) : 0;
	http_send_head(c, &(struct http_head){ .status = status, .type = "application/json", .len = (long long)n,
					       .extra = status == 401 ? "Connection: close\r\n" :
									"Retry-After: 5\r\nConnection: close\r\n" });
	if (n)
		mg_write(c, text, n);
	free(text);
}

/* Which limit another WebSocket of user (0: accounts off) from addr would pass:
 * NULL when none, else the sentence that says which (into why).  lock held. */
static const char *over_limit(int64_t user, const char *addr, int64_t now, char *why, size_t len, int *status)
{
	int all = 0, of_user = 0, of_addr = 0;
	for (const struct ws_client *cl = clients; cl; cl = cl->next) {
		all++;
		of_user += user && cl->user == user;
		of_addr += strcmp(cl->who.address, addr) == 0;
	}
	for (int i = 0; i < PENDING_MAX; i++) {
		const struct pending *p = &pending[i];
		if (!p->c || now - p->at_ms > PENDING_MS)
			continue;
		all++;
		of_user += user && p->user == user;
		of_addr += strcmp(p->addr, addr) == 0;
	}
	*status = 429;
	if (limits.per_user > 0 && user && of_user >= limits.per_user)
		snprintf(why, len, "you have %d live-update connections (WebSockets) open already, the most one user may "
			 "have; close a tab or two", of_user);
	else if (limits.per_addr > 0 && of_addr >= limits.per_addr)
		snprintf(why, len, "%s has %d WebSockets open already, the most one address may have "
			 "(serve --ws-per-addr)", addr, of_addr);
	else if (all >= limits.total) {
		*status = 503;
		snprintf(why, len, "the server has %d WebSockets open already, all it keeps threads for; try again "
			 "later", all);
	} else
		return NULL;
	return why;
}

static int on_connect(const struct mg_connection *c, void *data)
{
	(void)data;
	struct auth_state who;
	auth_identify(c, &who);
	if (who.accounts && !who.authenticated) {
		refuse((struct mg_connection *)c, 401, "log in first: live updates need a session or an API token");
		return 1;
	}
	int64_t user = who.accounts ? who.user.id : 0, now = fs_mono_ms();
	char why[256];
	int status = 0, free_at = -1;
	pthread_mutex_lock(&lock);
	const char *over = over_limit(user, who.address, now, why, sizeof why, &status);
	for (int i = 0; !over && i < PENDING_MAX && free_at < 0; i++)
		if (!pending[i].c || now - pending[i].at_ms > PENDING_MS)
			free_at = i;
	if (!over && free_at < 0) {
		status = 503;
		over = "too many WebSockets are opening at once; try again in a few seconds";
	}
	if (!over) {
		struct pending *p = &pending[free_at];
		p->c = c;
		p->user = user;
		snprintf(p->addr, sizeof p->addr, "%s", who.address);
		p->at_ms = now;
	}
	pthread_mutex_unlock(&lock);
	if (!over)
		return 0;
	log_warn("websocket from %s%s%s refused: %s", who.address, user ? " for " : "", user ? who.user.name : "",
		 over);
	refuse((struct mg_connection *)c, status, over);
	return 1; /* nonzero refuses */
}

static void on_ready(struct mg_connection *c, void *data)
{
	(void)data;
	struct ws_client *cl = calloc(1, sizeof *cl);
	if (!cl)
		return;
	cl->c = c;
	auth_identify(c, &cl->who);
	cl->user = cl->who.accounts ? cl->who.user.id : 0;
	pthread_cond_init(&cl->wake, NULL);
	pthread_attr_t at;
	pthread_attr_init(&at);
	pthread_attr_setstacksize(&at, SENDER_STACK);
	int started = pthread_create(&cl->sender, &at, sender_main, cl) == 0;
	pthread_attr_destroy(&at);
	pthread_mutex_lock(&lock);
	for (int i = 0; i < PENDING_MAX; i++)
		if (pending[i].c == c)
			pending[i].c = NULL; /* its place is the client's now */
	if (!started) {
		pthread_mutex_unlock(&lock);
		pthread_cond_destroy(&cl->wake);
		free(cl);
		return;
	}
	cl->sender_started = 1;
	mg_set_user_connection_data(c, cl);
	cl->next = clients;
	clients = cl;
	pthread_mutex_unlock(&lock);
}

/* Is this data frame, or the message it continues, over WS_FRAME_MAX?  Then the
 * client is sent a Close frame with status 1009 ("message too big", RFC 6455
 * 7.4.1) naming the limit, and 1: on_data ends the connection.  CivetWeb 1.15
 * hands each frame over as it came (no reassembly), so a fragmented message is
 * counted here, from its first frame (no FIN bit) to its last. */
static int frame_too_big(struct mg_connection *c, struct ws_client *cl, int bits, size_t len)
{
	int opcode = bits & 0xf, fin = bits & 0x80;
	if (opcode != MG_WEBSOCKET_OPCODE_TEXT && opcode != MG_WEBSOCKET_OPCODE_BINARY &&
	    opcode != MG_WEBSOCKET_OPCODE_CONTINUATION)
		return 0;
	size_t total = len;
	if (cl) {
		total = opcode == MG_WEBSOCKET_OPCODE_CONTINUATION ? cl->frag_bytes + len : len;
		cl->frag_bytes = fin ? 0 : total;
	}
	if (total <= WS_FRAME_MAX)
		return 0;
	char close[125]; /* a control frame's payload: 2 bytes of status, then the reason */
	int n = snprintf(close + 2, sizeof close - 2, "message of %zu bytes is over the %u-byte limit", total,
			 WS_FRAME_MAX);
	close[0] = (char)(1009 >> 8);
	close[1] = (char)(1009 & 0xff);
	mg_websocket_write(c, MG_WEBSOCKET_OPCODE_CONNECTION_CLOSE, close,
			   2 + (size_t)(n < (int)sizeof close - 2 ? n : (int)sizeof close - 3));
	log_warn("closed a WebSocket (1009): a message of %zu bytes, over the %u-byte limit", total, WS_FRAME_MAX);
	return 1;
}

static int on_data(struct mg_connection *c, int bits, char *data, size_t len, void *ud)
{
	(void)ud;
	struct ws_client *cl = mg_get_user_connection_data(c);
	int opcode = bits & 0xf;
	if (opcode == MG_WEBSOCKET_OPCODE_CONNECTION_CLOSE)
		return 0;
	if (frame_too_big(c, cl, bits, len))
		return 0;
	if (opcode != MG_WEBSOCKET_OPCODE_TEXT || !cl)
		return 1; /* pings are answered by CivetWeb; binary is ignored */
	cJSON *msg = NULL;
	struct dd_err perr = { 0 };
	int bad = json_parse(data, len, "frame", &msg, &perr) != DD_OK;
	cJSON *sub = cJSON_GetObjectItemCaseSensitive(msg, "subscribe");
	cJSON *unsub = cJSON_GetObjectItemCaseSensitive(msg, "unsubscribe");
	cJSON *topic = sub ? sub : unsub;
	int on = sub != NULL;
	const char *err = NULL;
	if (bad)
		err = perr.msg;
	else if (!cJSON_IsObject(msg) || !topic)
		err = "expected {\"subscribe\":…} or {\"unsubscribe\":…}";
	else if (cJSON_IsString(topic) && strcmp(topic->valuestring, "all") == 0) {
		pthread_mutex_lock(&lock);
		cl->all = on;
		pthread_mutex_unlock(&lock);
	} else if (cJSON_IsString(topic) && strcmp(topic->valuestring, "jobs") == 0) {
		pthread_mutex_lock(&lock);
		cl->jobs = on;
		pthread_mutex_unlock(&lock);
	} else if (cJSON_IsNumber(topic) && topic->valuedouble >= 1 &&
		   topic->valuedouble == (double)(int64_t)topic->valuedouble) {
		int64_t id = (int64_t)topic->valuedouble;
		pthread_mutex_lock(&lock);
		int at = -1;
		for (int i = 0; i < cl->nsubs; i++)
			if (cl->subs[i] == id)
				at = i;
		if (on && at < 0 && cl->nsubs < MAX_SUBS)
			cl->subs[cl->nsubs++] = id;
		else if (on && at < 0)
			err = "too many subscriptions on one connection (64)";
		else if (!on && at >= 0)
			cl->subs[at] = cl->subs[--cl->nsubs];
		pthread_mutex_unlock(&lock);
	} else {
		err = "topic must be \"all\", \"jobs\" or a job id";
	}
	cJSON *reply = cJSON_CreateObject();
	if (err) {
		cJSON_AddStringToObject(reply, "type", "error");
		cJSON_AddStringToObject(reply, "message", err);
	} else {
		cJSON_AddStringToObject(reply, "type", on ? "subscribed" : "unsubscribed");
		cJSON_AddItemToObject(reply, "topic", cJSON_Duplicate(topic, 1));
	}
	send_json(cl, reply);
	cJSON_Delete(msg);
	return 1;
}

static void on_close(const struct mg_connection *cc, void *data)
{
	(void)data;
	struct ws_client *cl = mg_get_user_connection_data(cc);
	if (!cl)
		return;
	pthread_mutex_lock(&lock);
	cl->closing = 1;
	pthread_cond_signal(&cl->wake);
	for (struct ws_client **p = &clients; *p; p = &(*p)->next)
		if (*p == cl) {
			*p = cl->next;
			break;
		}
	pthread_mutex_unlock(&lock);
	if (cl->sender_started)
		pthread_join(cl->sender, NULL);
	for (struct qitem *q = cl->head, *n; q; q = n) {
		n = q->next;
		msg_unref(q->m);
		free(q);
	}
	pthread_cond_destroy(&cl->wake);
	free(cl);
}

void ws_register(struct mg_context *ctx, const struct ws_limits *lim)
{
	limits = *lim;
	if (limits.total < 1)
		limits.total = 100;
	mg_set_websocket_handler(ctx, "/api/v1/ws$", on_connect, on_ready, on_data, on_close, NULL);
}

/* The owner of each job recently published, so that a "deleted" (the row is
 * gone by then) still reaches the owner; -1 when not known. */
#define OWNER_CACHE 4096
static pthread_mutex_t owner_lock = PTHREAD_MUTEX_INITIALIZER;
static struct {
	int64_t job, owner;
} owner_cache[OWNER_CACHE];

static int64_t owner_of(int64_t job, int deleted)
{
	size_t slot = (size_t)job % OWNER_CACHE;
	int64_t owner = -1;
	if (!deleted && store_job_owner(job, &owner, NULL) == DD_OK) {
		pthread_mutex_lock(&owner_lock);
		owner_cache[slot].job = job;
		owner_cache[slot].owner = owner;
		pthread_mutex_unlock(&owner_lock);
		return owner;
	}
	pthread_mutex_lock(&owner_lock);
	if (owner_cache[slot].job == job)
		owner = owner_cache[slot].owner;
	pthread_mutex_unlock(&owner_lock);
	return owner;
}

static int wants(const struct ws_client *cl, int64_t id, int64_t owner, int is_event)
{
	if (!perm_sees_owner(&cl->who, owner))
		return 0;
	if (cl->all)
		return 1;
	if (cl->jobs && !is_event)
		return 1;
	for (int i = 0; i < cl->nsubs; i++)
		if (cl->subs[i] == id)
			return 1;
	return 0;
}

void ws_publish(void *unused, int64_t job_id, const char *what, cJSON *payload)
{
	(void)unused;
	int is_event = strcmp(what, "events") == 0;
	int64_t owner = auth_config()->accounts ? owner_of(job_id, strcmp(what, "deleted") == 0) : 0;
	cJSON *j = cJSON_CreateObject();
	if (!j)
		return;
	if (is_event) {
		cJSON_AddStringToObject(j, "type", "events");
		cJSON_AddNumberToObject(j, "job", (double)job_id);
		cJSON_AddItemReferenceToObject(j, "events", payload);
	} else if (strcmp(what, "deleted") == 0) {
		cJSON_AddStringToObject(j, "type", "deleted");
		cJSON_AddNumberToObject(j, "id", (double)job_id);
	} else {
		cJSON_AddStringToObject(j, "type", "job");
		cJSON_AddItemReferenceToObject(j, "job", payload);
	}
	/* a lab preset's hidden values go only to who may see them (job_view.h): the
	 * others get a copy without them */
	cJSON *mark = owner > 0 && any_client() ? job_view_mark(job_id) : NULL, *bare = NULL;
	if (cJSON_GetArraySize(cJSON_GetObjectItemCaseSensitive(mark, "hidden")) && (bare = cJSON_Duplicate(j, 1)))
		job_view_strip(bare, mark);
	char *text = cJSON_PrintUnformatted(j), *bare_text = bare ? cJSON_PrintUnformatted(bare) : NULL;
	cJSON_Delete(j); /* references do not free the payload */
	cJSON_Delete(bare);
	struct msg *m = text ? msg_new(text) : NULL, *mb = bare_text ? msg_new(bare_text) : NULL;
	free(text);
	free(bare_text);
	if (!m || (bare && !mb)) {
		msg_unref(m);
		msg_unref(mb);
		cJSON_Delete(mark);
		return;
	}
	int64_t now = fs_mono_ms();
	pthread_mutex_lock(&lock);
	for (struct ws_client *cl = clients; cl; cl = cl->next) {
		/* a connection outlives the request that opened it: its session is asked
		 * about again every few seconds, so a logout, a password change or a
		 * disabled account stops it, and a changed role applies */
		if ((cl->who.session_id || cl->who.token_id) && !cl->signed_out &&
		    now - cl->checked_ms >= SESSION_RECHECK_MS) {
			cl->checked_ms = now;
			if (auth_session_refresh(&cl->who) != 0) {
				cl->signed_out = 1;
				pthread_cond_signal(&cl->wake);
			}
		}
		if (cl->signed_out)
			continue;
		if (wants(cl, job_id, owner, is_event) && enqueue(cl, mb && !job_view_sees(&cl->who, mark) ? mb : m) != 0 &&
		    cl->overflowed == 1) {
			cl->overflowed = 2; /* logged once */
			log_warn("a websocket client fell %u MiB behind and is being closed", QUEUE_MAX_BYTES >> 20);
		}
	}
	pthread_mutex_unlock(&lock);
	msg_unref(m);
	msg_unref(mb);
	cJSON_Delete(mark);
}
