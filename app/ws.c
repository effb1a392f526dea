/* ws.c — see ws.h. */
#define _GNU_SOURCE
#include "ws.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "../common/log.h"

#define MAX_SUBS 64

struct ws_client {
	struct mg_connection *c;
	int all, jobs;    /* topics "all" and "jobs" */
	int64_t subs[MAX_SUBS];
	int nsubs;
	int busy, closing;
	struct ws_client *next;
};

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t idle = PTHREAD_COND_INITIALIZER;
static struct ws_client *clients;
static int nclients;

int ws_client_count(void)
{
	pthread_mutex_lock(&lock);
	int n = nclients;
	pthread_mutex_unlock(&lock);
	return n;
}

static void send_json(struct mg_connection *c, cJSON *msg)
{
	char *text = cJSON_PrintUnformatted(msg);
	cJSON_Delete(msg);
	if (text) {
		mg_websocket_write(c, MG_WEBSOCKET_OPCODE_TEXT, text, strlen(text));
		free(text);
	}
}

static void reply(struct mg_connection *c, const char *type, cJSON *topic)
{
	cJSON *msg = cJSON_CreateObject();
	cJSON_AddStringToObject(msg, "type", type);
	if (topic)
		cJSON_AddItemToObject(msg, "topic", topic);
	send_json(c, msg);
}

static int on_connect(const struct mg_connection *c, void *data)
{
	(void)c;
	(void)data;
	return 0; /* accept */
}

static void on_ready(struct mg_connection *c, void *data)
{
	(void)data;
	struct ws_client *cl = calloc(1, sizeof *cl);
	if (!cl)
		return;
	cl->c = c;
	mg_set_user_connection_data(c, cl);
	pthread_mutex_lock(&lock);
	cl->next = clients;
	clients = cl;
	nclients++;
	pthread_mutex_unlock(&lock);
}

static int on_data(struct mg_connection *c, int bits, char *data, size_t len, void *ud)
{
	(void)ud;
	struct ws_client *cl = mg_get_user_connection_data(c);
	int opcode = bits & 0xf;
	if (opcode == MG_WEBSOCKET_OPCODE_CONNECTION_CLOSE)
		return 0;
	if (opcode != MG_WEBSOCKET_OPCODE_TEXT || !cl)
		return 1; /* pings are answered by CivetWeb; binary is ignored */
	cJSON *msg = cJSON_ParseWithLength(data, len);
	cJSON *sub = cJSON_GetObjectItemCaseSensitive(msg, "subscribe");
	cJSON *unsub = cJSON_GetObjectItemCaseSensitive(msg, "unsubscribe");
	cJSON *topic = sub ? sub : unsub;
	int on = sub != NULL;
	const char *err = NULL;
	if (!cJSON_IsObject(msg) || !topic)
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
	if (err) {
		cJSON *e = cJSON_CreateObject();
		cJSON_AddStringToObject(e, "type", "error");
		cJSON_AddStringToObject(e, "message", err);
		send_json(c, e);
	} else {
		reply(c, on ? "subscribed" : "unsubscribed", cJSON_Duplicate(topic, 1));
	}
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
	while (cl->busy > 0)
		pthread_cond_wait(&idle, &lock);
	for (struct ws_client **p = &clients; *p; p = &(*p)->next)
		if (*p == cl) {
			*p = cl->next;
			nclients--;
			break;
		}
	pthread_mutex_unlock(&lock);
	free(cl);
}

void ws_register(struct mg_context *ctx)
{
	mg_set_websocket_handler(ctx, "/api/v1/ws$", on_connect, on_ready, on_data, on_close, NULL);
}

static int wants(const struct ws_client *cl, int64_t id, int is_event)
{
	if (cl->closing)
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
	cJSON *msg = cJSON_CreateObject();
	if (!msg)
		return;
	if (is_event) {
		cJSON_AddStringToObject(msg, "type", "events");
		cJSON_AddNumberToObject(msg, "job", (double)job_id);
		cJSON_AddItemReferenceToObject(msg, "events", payload);
	} else if (strcmp(what, "deleted") == 0) {
		cJSON_AddStringToObject(msg, "type", "deleted");
		cJSON_AddNumberToObject(msg, "id", (double)job_id);
	} else {
		cJSON_AddStringToObject(msg, "type", "job");
		cJSON_AddItemReferenceToObject(msg, "job", payload);
	}
	char *text = cJSON_PrintUnformatted(msg);
	cJSON_Delete(msg); /* references do not free the payload */
	if (!text)
		return;
	size_t len = strlen(text);

	struct ws_client *stack[64], **targets = stack;
	int n = 0, cap = 64;
	pthread_mutex_lock(&lock);
	if (nclients > cap) {
		targets = malloc((size_t)nclients * sizeof *targets);
		cap = nclients;
		if (!targets) {
			targets = stack;
			cap = 64;
		}
	}
	for (struct ws_client *cl = clients; cl && n < cap; cl = cl->next)
		if (wants(cl, job_id, is_event)) {
			cl->busy++;
			targets[n++] = cl;
		}
	pthread_mutex_unlock(&lock);

	for (int i = 0; i < n; i++)
		if (mg_websocket_write(targets[i]->c, MG_WEBSOCKET_OPCODE_TEXT, text, len) < 0)
			log_debug("websocket write failed; the client is going away");

	pthread_mutex_lock(&lock);
	for (int i = 0; i < n; i++)
		targets[i]->busy--;
	pthread_cond_broadcast(&idle);
	pthread_mutex_unlock(&lock);
	if (targets != stack)
		free(targets);
	free(text);
}
