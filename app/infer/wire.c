/* wire.c — the inference service's frames (wire.h): sending one with a single
 * sendmsg loop, receiving one with every length capped before it is allocated. */
#define _GNU_SOURCE
#include "wire.h"

#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include "../../common/json.h"

int infer_wire_send(int fd, const char *head, const void *data, size_t len)
{
	size_t hl = strlen(head);
	uint8_t pre[8];
	uint32_t a = (uint32_t)hl, b = (uint32_t)len;
	for (int i = 0; i < 4; i++) {
		pre[i] = (uint8_t)(a >> (8 * i));
		pre[4 + i] = (uint8_t)(b >> (8 * i));
	}
	struct iovec iov[3] = { { pre, 8 }, { (void *)head, hl }, { (void *)data, len } };
	int n = 3, i = 0;
	while (i < n) {
		struct msghdr m = { .msg_iov = iov + i, .msg_iovlen = (size_t)(n - i) };
		ssize_t w = sendmsg(fd, &m, MSG_NOSIGNAL);
		if (w < 0) {
			if (errno == EINTR)
				continue;
			return errno == EAGAIN || errno == EWOULDBLOCK ? WIRE_TIMEOUT : WIRE_EOF;
		}
		while (i < n && (size_t)w >= iov[i].iov_len) {
			w -= (ssize_t)iov[i].iov_len;
			i++;
		}
		if (i < n) {
			iov[i].iov_base = (char *)iov[i].iov_base + w;
			iov[i].iov_len -= (size_t)w;
		}
	}
	return WIRE_OK;
}

int infer_wire_read(int fd, void *buf, size_t n)
{
	size_t got = 0;
	while (got < n) {
		ssize_t r = read(fd, (char *)buf + got, n - got);
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
			return WIRE_TIMEOUT;
		if (r <= 0)
			return WIRE_EOF;
		got += (size_t)r;
	}
	return WIRE_OK;
}

int infer_wire_recv(int fd, size_t head_max, size_t data_max, cJSON **head, char **data, size_t *len)
{
	*head = NULL;
	*data = NULL;
	*len = 0;
	uint8_t pre[8];
	int rc = infer_wire_read(fd, pre, 8);
	if (rc)
		return rc;
	uint32_t hl = 0, dl = 0;
	for (int i = 0; i < 4; i++) {
		hl |= (uint32_t)pre[i] << (8 * i);
		dl |= (uint32_t)pre[4 + i] << (8 * i);
	}
	if (hl == 0 || hl > head_max || dl > data_max)
		return WIRE_BAD;
	char *h = malloc(hl + 1);
	if (!h)
		return WIRE_BAD;
	if ((rc = infer_wire_read(fd, h, hl))) {
		free(h);
		return rc;
	}
	h[hl] = 0;
	json_parse(h, hl, "head", head, NULL);
	free(h);
	if (!cJSON_IsObject(*head)) {
		cJSON_Delete(*head);
		*head = NULL;
		return WIRE_BAD;
	}
	if (dl) {
		*data = malloc(dl);
		rc = *data ? infer_wire_read(fd, *data, dl) : WIRE_BAD;
		if (rc) {
			free(*data);
			*data = NULL;
			cJSON_Delete(*head);
			*head = NULL;
			return rc;
		}
		*len = dl;
	}
	return WIRE_OK;
}
