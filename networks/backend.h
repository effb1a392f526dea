/* backend.h — what runs a graph's layers: the reference kernels, oneDNN, (later) cuDNN.
 *
 * A graph (graph.h) owns the order of the layers, their shapes and one arena each
 * for parameters, gradients, activations and activation gradients.  A backend owns
 * the memory those arenas live in and each layer's private state (oneDNN primitives,
 * a pooling argmax, a dropout mask, ...).  The graph asks, before anything runs,
 * whether the backend supports every layer, and then calls it one layer at a time.
 *
 *   ref   plain C loops (networks/ref.h): every layer; the oracle of every test.
 *   cpu   oneDNN (networks/cpu/): convolution, inner product, pooling, LRN, batch
 *         norm, ReLU/Sigmoid/TanH, softmax; the other layers run the ref kernels.
 *
 * The vtable itself is in backend_impl.h, for the backends and the graph only.
 *
 * Ownership: backend_create gives a backend the caller frees with backend_free(),
 * after every graph that uses it (a graph BORROWS its backend). */
#ifndef DD_BACKEND_H
#define DD_BACKEND_H

#include "../common/err.h"

struct backend;

/* "ref", "cpu" ("auto": the fastest one present: cpu).  DD_OK and *out, or
 * DD_EINVAL naming the unknown backend, DD_EINTERNAL when it cannot start. */
int backend_create(const char *name, struct backend **out, struct dd_err *err);
/* Accepts NULL. */
void backend_free(struct backend *be);
/* Its name ("ref", "cpu"); borrowed, static. */
const char *backend_name(const struct backend *be);
/* The names backend_create knows, NULL-terminated; static. */
const char *const *backend_names(void);

#endif
