/* backend.c — choosing a backend by name (backend.h). */
#include <string.h>

#include "backend_impl.h"

static const char *const names[] = { "cpu", "ref", NULL };

const char *const *backend_names(void) { return names; }

int backend_create(const char *name, struct backend **out, struct dd_err *err)
{
	*out = NULL;
	if (!name || !strcmp(name, "auto") || !strcmp(name, "cpu"))
		return backend_cpu_create(out, err);
	if (!strcmp(name, "ref"))
		return backend_ref_create(out, err);
	return dd_err_set(err, DD_EINVAL, "unknown backend '%s' (cpu or ref)", name);
}

void backend_free(struct backend *be)
{
	if (be)
		be->ops->destroy(be);
}

const char *backend_name(const struct backend *be) { return be ? be->ops->name : "ref"; }
