/* backend.c — choosing a backend by name (backend.h), and loading the CUDA plugin.
 *
 * The CUDA backend is a shared object (build/libdeepdesk-cuda.so) that this file
 * dlopens the first time "cuda" is asked for, so that the program itself never
 * links CUDA and starts on machines without it.  The plugin is looked for where
 * DEEPDESK_CUDA_PLUGIN points, else beside the executable, else one folder up (the
 * unit tests live in build/tests/).  It is refused when its exported
 * deepdesk_backend_api_version differs from BACKEND_API_VERSION: a plugin from
 * another build would read the vtable wrongly.  A loaded plugin stays loaded until
 * the process ends (its CUDA runtime does not like being unloaded).
 *
 * GPU discovery for the server (backend_gpus) is NVML's, which answers without
 * starting CUDA in the server; the plugin answers only where it is loaded already. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "backend_impl.h"

static const char *const names[] = { "cpu", "ref", NULL };

const char *const *backend_names(void) { return names; }

/* ---- the plugin ---- */

static pthread_mutex_t plugin_lock = PTHREAD_MUTEX_INITIALIZER;
static void *plugin;                   /* dlopen handle, once loaded */
static char plugin_error[400];         /* why it did not load, once tried */
static int plugin_tried;

/* dlopen the plugin at path; 0, or -1 with plugin_error filled. */
static int plugin_open(const char *path)
{
	void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
	if (!h) {
		const char *why = dlerror();
		snprintf(plugin_error, sizeof plugin_error, "the CUDA plugin %s does not load: %s", path,
			 why ? why : "unknown reason");
		return -1;
	}
	const int *ver = dlsym(h, BACKEND_CUDA_VERSION);
	if (!ver || !dlsym(h, BACKEND_CUDA_CREATE) || !dlsym(h, BACKEND_CUDA_DEVICES)) {
		snprintf(plugin_error, sizeof plugin_error, "%s is not a deepdesk CUDA plugin (no %s)", path,
			 BACKEND_CUDA_VERSION);
		dlclose(h);
		return -1;
	}
	if (*ver != BACKEND_API_VERSION) {
		snprintf(plugin_error, sizeof plugin_error,
			 "the CUDA plugin %s has backend API version %d, this program %d: rebuild it with `make` "
			 "from the same source",
			 path, *ver, BACKEND_API_VERSION);
		dlclose(h);
		return -1;
	}
	plugin = h;
	return 0;
}

/* The plugin's handle, loading it the first time; NULL with plugin_error. */
static void *plugin_get(void)
{
	pthread_mutex_lock(&plugin_lock);
	if (!plugin_tried) {
		plugin_tried = 1;
		const char *env = getenv("DEEPDESK_CUDA_PLUGIN");
		if (env && *env) {
			plugin_open(env);
		} else {
			char exe[PATH_MAX], path[PATH_MAX + 64];
			ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
			snprintf(plugin_error, sizeof plugin_error,
				 "this build has no CUDA backend (libdeepdesk-cuda.so is not beside the program: "
				 "it is built only where nvcc and cuDNN are found)");
			if (n > 0) {
				exe[n] = 0;
				char *slash = strrchr(exe, '/');
				if (slash)
					*slash = 0;
				snprintf(path, sizeof path, "%s/libdeepdesk-cuda.so", exe);
				if (access(path, F_OK) != 0) {
					slash = strrchr(exe, '/');
					if (slash)
						*slash = 0;
					snprintf(path, sizeof path, "%s/libdeepdesk-cuda.so", exe);
				}
				if (access(path, F_OK) == 0)
					plugin_open(path);
			}
		}
	}
	void *h = plugin;
	pthread_mutex_unlock(&plugin_lock);
	return h;
}

int backend_create_cuda(int device, int deterministic, struct backend **out, struct dd_err *err)
{
	*out = NULL;
	void *h = plugin_get();
	if (!h)
		return dd_err_set(err, DD_EINVAL, "cuda: %s", plugin_error);
	backend_cuda_create_fn create;
	*(void **)&create = dlsym(h, BACKEND_CUDA_CREATE);
	const struct backend_host host = { .layer_init = ref_layer_init,
					   .layer_fini = ref_layer_fini,
					   .forward = ref_layer_forward,
					   .backward = ref_layer_backward,
					   .device = device,
					   .deterministic = deterministic };
	int rc = create(&host, out, err);
	if (rc) {
		*out = NULL;
		dd_err_prefix(err, "cuda");
		return rc;
	}
	return DD_OK;
}

int backend_create_cuda_group(int n, const int *devices, int deterministic, struct backend **out,
			      struct dd_err *err)
{
	for (int i = 0; i < n; i++)
		out[i] = NULL;
	void *h = plugin_get();
	if (!h)
		return dd_err_set(err, DD_EINVAL, "cuda: %s", plugin_error);
	backend_cuda_create_group_fn create;
	*(void **)&create = dlsym(h, BACKEND_CUDA_CREATE_GROUP);
	if (!create)
		return dd_err_set(err, DD_EINVAL, "cuda: this plugin has no multi-GPU groups");
	const struct backend_host host = { .layer_init = ref_layer_init,
					   .layer_fini = ref_layer_fini,
					   .forward = ref_layer_forward,
					   .backward = ref_layer_backward,
					   .device = devices[0],
					   .deterministic = deterministic };
	int rc = create(&host, n, devices, out, err);
	if (rc) {
		for (int i = 0; i < n; i++)
			out[i] = NULL;
		dd_err_prefix(err, "cuda");
	}
	return rc;
}

/* ---- NVML, by dlopen: a handful of entry points, declared as its header does ---- */

struct nvml_memory {
	unsigned long long total, free, used;
};
struct nvml_utilization {
	unsigned int gpu, memory;
};

static int gpus_nvml(struct backend_gpu *out, int max)
{
	void *h = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
	if (!h)
		return -1;
	int (*init)(void), (*shutdown)(void), (*count)(unsigned *), (*handle)(unsigned, void **),
		(*name)(void *, char *, unsigned), (*memory)(void *, struct nvml_memory *),
		(*util)(void *, struct nvml_utilization *);
	*(void **)&init = dlsym(h, "nvmlInit_v2");
	*(void **)&shutdown = dlsym(h, "nvmlShutdown");
	*(void **)&count = dlsym(h, "nvmlDeviceGetCount_v2");
	*(void **)&handle = dlsym(h, "nvmlDeviceGetHandleByIndex_v2");
	*(void **)&name = dlsym(h, "nvmlDeviceGetName");
	*(void **)&memory = dlsym(h, "nvmlDeviceGetMemoryInfo");
	*(void **)&util = dlsym(h, "nvmlDeviceGetUtilizationRates");
	int n = -1;
	unsigned nd = 0;
	if (!init || !shutdown || !count || !handle || !name || !memory || init() != 0)
		goto done;
	if (count(&nd) != 0) {
		shutdown();
		goto done;
	}
	n = 0;
	for (unsigned i = 0; i < nd && n < max; i++) {
		void *dev;
		if (handle(i, &dev) != 0)
			continue;
		struct backend_gpu *g = &out[n++];
		memset(g, 0, sizeof *g);
		g->id = (int)i;
		if (name(dev, g->name, sizeof g->name) != 0)
			snprintf(g->name, sizeof g->name, "GPU %u", i);
		struct nvml_memory m;
		g->memory_used = -1;
		if (memory(dev, &m) == 0) {
			g->memory_total = (long long)m.total;
			g->memory_used = (long long)m.used;
		}
		struct nvml_utilization u;
		g->utilization = util && util(dev, &u) == 0 ? (int)u.gpu : -1;
	}
	shutdown();
done:
	dlclose(h);
	return n;
}

int backend_gpus(struct backend_gpu *out, int max)
{
	if (max <= 0)
		return 0;
	int n = gpus_nvml(out, max);
	if (n >= 0)
		return n;
	/* No NVML means no NVIDIA driver, so no GPU; but a process that has loaded the
	 * plugin already may ask it (loading it here would put the CUDA libraries in
	 * every server on machines without a GPU, for nothing) */
	pthread_mutex_lock(&plugin_lock);
	void *h = plugin;
	pthread_mutex_unlock(&plugin_lock);
	if (!h)
		return 0;
	backend_cuda_devices_fn devices;
	*(void **)&devices = dlsym(h, BACKEND_CUDA_DEVICES);
	n = devices(out, max, NULL);
	return n > 0 ? n : 0;
}

/* ---- by name ---- */

int backend_create(const char *name, struct backend **out, struct dd_err *err)
{
	*out = NULL;
	if (!name || !strcmp(name, "auto") || !strcmp(name, "cpu"))
		return backend_cpu_create(out, err);
	if (!strcmp(name, "ref"))
		return backend_ref_create(out, err);
	if (!strncmp(name, "cuda", 4) && (name[4] == 0 || name[4] == ':')) {
		int device = 0;
		if (name[4] == ':') {
			char *end;
			long d = strtol(name + 5, &end, 10);
			if (end == name + 5 || *end || d < 0 || d > 63)
				return dd_err_set(err, DD_EINVAL, "backend '%s': a device is cuda:N, N from 0", name);
			device = (int)d;
		}
		const char *det = getenv("DEEPDESK_CUDA_DETERMINISTIC");
		return backend_create_cuda(device, det && !strcmp(det, "1"), out, err);
	}
	return dd_err_set(err, DD_EINVAL, "unknown backend '%s' (cpu, ref or cuda)", name);
}

int backend_create_group(const char *name, int n, const int *devices, struct backend **out, struct dd_err *err)
{
	for (int i = 0; i < n; i++)
		out[i] = NULL;
	if (n < 1 || n > 64)
		return dd_err_set(err, DD_EINVAL, "a group of %d copies (1 to 64)", n);
	if (name && !strncmp(name, "cuda", 4) && (name[4] == 0 || name[4] == ':')) {
		const char *det = getenv("DEEPDESK_CUDA_DETERMINISTIC");
		return backend_create_cuda_group(n, devices, det && !strcmp(det, "1"), out, err);
	}
	for (int i = 0; i < n; i++) {
		int rc = backend_create(name, &out[i], err);
		if (rc) {
			for (int k = 0; k < i; k++)
				backend_free(out[k]);
			for (int k = 0; k < n; k++)
				out[k] = NULL;
			return rc;
		}
	}
	return DD_OK;
}

void backend_free(struct backend *be)
{
	if (be)
		be->ops->destroy(be);
}

const char *backend_name(const struct backend *be) { return be ? be->ops->name : "ref"; }

/* ---- precision ---- */

static const char *const precisions[] = { "fp32", "fp16", "bf16" };

int backend_precision_parse(const char *s, int *out, struct dd_err *err)
{
	*out = BACKEND_FP32;
	if (!s || !*s)
		return DD_OK;
	for (int i = 0; i < 3; i++)
		if (!strcmp(s, precisions[i])) {
			*out = i;
			return DD_OK;
		}
	return dd_err_set(err, DD_EINVAL, "precision '%s': fp32, fp16 or bf16", s);
}

const char *backend_precision_name(int precision)
{
	return precision >= 0 && precision < 3 ? precisions[precision] : "?";
}

int backend_set_precision(struct backend *be, int precision, struct dd_err *err)
{
	if (precision < 0 || precision > 2)
		return dd_err_set(err, DD_EINVAL, "precision %d: fp32, fp16 or bf16", precision);
	if (be->ops->set_precision)
		return be->ops->set_precision(be, precision, err);
	if (precision == BACKEND_FP32)
		return DD_OK;
	return dd_err_set(err, DD_EINVAL, "precision %s needs the cuda backend (this one is %s)",
			  precisions[precision], be->ops->name);
}

int backend_unscale(struct backend *be, float *g, int64_t n, int *skipped, float *scale, struct dd_err *err)
{
	*skipped = 0;
	if (scale)
		*scale = 1;
	if (!be->ops->unscale)
		return DD_OK;
	float s = 1;
	int rc = be->ops->unscale(be, g, n, skipped, &s, err);
	if (scale)
		*scale = s;
	return rc;
}

/* ---- uploads ---- */

int backend_has_upload(const struct backend *be) { return be && be->ops->upload != NULL; }

int backend_upload_batch(struct backend *be, const struct backend_upload *u, struct dd_err *err)
{
	if (!backend_has_upload(be))
		return dd_err_set(err, DD_EINVAL, "the %s backend transforms no uploads", backend_name(be));
	return be->ops->upload(be, u, err);
}

void backend_bind(struct backend *be)
{
	if (be && be->ops->bind)
		be->ops->bind(be);
}

void backend_wait(struct backend *be)
{
	if (be)
		backend_sync(be);
}

int backend_has_allreduce(const struct backend *be) { return be && be->ops->allreduce != NULL; }

int backend_allreduce(struct backend *be, float *buf, int64_t n, struct dd_err *err)
{
	if (!be->ops->allreduce)
		return dd_err_set(err, DD_EINVAL, "the %s backend is not one of a group of GPUs", backend_name(be));
	return be->ops->allreduce(be, buf, n, err);
}
