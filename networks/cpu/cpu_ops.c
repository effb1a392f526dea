/* cpu_ops.c — convolution and inner product through oneDNN 2.6's C API.
 *
 * Every tensor is described in its plain layout (nchw, oihw / goihw, x; nc, oi), so
 * oneDNN reads and writes the caller's buffers in place and no reorders are needed;
 * oneDNN picks the best implementation it has for those layouts (for convolution
 * usually its im2col + sgemm path, which is far from its blocked-layout best).
 *
 * oneDNN overwrites the outputs of its backward primitives, while our backward adds
 * into the gradients (ref.h), so each requested gradient is computed into a
 * temporary buffer and then added.  A gradient pointer that is NULL is neither
 * computed nor touched.
 *
 * The engine and stream are process-wide, created on first use by engine_init()
 * under pthread_once and never destroyed.  Primitives are created for each call and
 * destroyed before it returns (TODO: cache them keyed by the descriptor). */
#include "cpu_ops.h"

#include <pthread.h>
#include <stdlib.h>

#include <oneapi/dnnl/dnnl.h>

#include "../../common/err.h"

/* ---- the engine and the stream ---------------------------------------------------- */

static pthread_once_t engine_once = PTHREAD_ONCE_INIT;
static dnnl_engine_t engine;      /* CPU engine 0, or NULL when creating it failed */
static dnnl_stream_t stream;      /* on engine */
static int engine_status = DD_EINTERNAL; /* DD_OK once both exist */

static void engine_init(void)
{
	if (dnnl_engine_create(&engine, dnnl_cpu, 0) != dnnl_success) {
		engine = NULL;
		return;
	}
	if (dnnl_stream_create(&stream, engine, dnnl_stream_default_flags) != dnnl_success) {
		dnnl_engine_destroy(engine);
		engine = NULL;
		return;
	}
	engine_status = DD_OK;
}

static int engine_get(void)
{
	pthread_once(&engine_once, engine_init);
	return engine_status;
}

/* oneDNN's status as ours: a descriptor it rejects is the caller's error. */
static int status_of(dnnl_status_t s)
{
	switch (s) {
	case dnnl_success:
		return DD_OK;
	case dnnl_invalid_arguments:
		return DD_EINVAL;
	case dnnl_out_of_memory:
		return DD_ENOMEM;
	default:
		return DD_EINTERNAL;
	}
}

/* ---- running one primitive ------------------------------------------------------- */

#define MAX_ARGS 5

/* The arguments of one execution: a buffer of the caller's (or a temporary) for
 * each DNNL_ARG_*, described by md. */
struct exec_args {
	int n;
	struct {
		int arg;
		const dnnl_memory_desc_t *md;
		const void *ptr;
	} a[MAX_ARGS];
};

static void args_add(struct exec_args *x, int arg, const dnnl_memory_desc_t *md, const void *ptr)
{
	x->a[x->n].arg = arg;
	x->a[x->n].md = md;
	x->a[x->n].ptr = ptr;
	x->n++;
}

/* Create the primitive descriptor for op (with hint, the forward's, for a backward
 * op), create the primitive and memory objects over the given buffers, execute and
 * wait.  Everything created is destroyed before it returns.  *pd_out, when not NULL,
 * receives the primitive descriptor instead of it being destroyed (the forward's, to
 * be a hint; the caller destroys it with dnnl_primitive_desc_destroy). */
static int run_op(const_dnnl_op_desc_t op, const_dnnl_primitive_desc_t hint,
		  const struct exec_args *x, int execute, dnnl_primitive_desc_t *pd_out)
{
	dnnl_primitive_desc_t pd = NULL;
	dnnl_primitive_t prim = NULL;
	dnnl_memory_t mem[MAX_ARGS] = { 0 };
	dnnl_exec_arg_t args[MAX_ARGS];
	dnnl_status_t s;

	s = dnnl_primitive_desc_create(&pd, op, NULL, engine, hint);
	if (s != dnnl_success) {
		pd = NULL;
		goto done;
	}
	if (execute) {
		s = dnnl_primitive_create(&prim, pd);
		if (s != dnnl_success) {
			prim = NULL;
			goto done;
		}
		for (int i = 0; i < x->n; i++) {
			/* oneDNN's memory handle is not const, but inputs are only read */
			s = dnnl_memory_create(&mem[i], x->a[i].md, engine, (void *)x->a[i].ptr);
			if (s != dnnl_success) {
				mem[i] = NULL;
				goto done;
			}
			args[i] = (dnnl_exec_arg_t){ x->a[i].arg, mem[i] };
		}
		s = dnnl_primitive_execute(prim, stream, x->n, args);
		if (s == dnnl_success)
			s = dnnl_stream_wait(stream);
	}
done:
	for (int i = MAX_ARGS - 1; i >= 0; i--)
		if (mem[i])
			dnnl_memory_destroy(mem[i]);
	if (prim)
		dnnl_primitive_destroy(prim);
	if (pd_out && s == dnnl_success)
		*pd_out = pd;
	else if (pd)
		dnnl_primitive_desc_destroy(pd);
	return status_of(s);
}

/* ---- forward and backward for any layer with (src, weights, bias) -> dst ---------- */

/* The memory descriptors of a layer and the number of floats in each. */
struct layer_mds {
	dnnl_memory_desc_t src, wei, bias, dst;
	size_t n_src, n_wei, n_bias, n_dst;
	size_t batch, inner; /* dst as (batch, n_bias, inner), for db by summing */
};

static void add_into(float *dst, const float *src, size_t count)
{
	for (size_t i = 0; i < count; i++)
		dst[i] += src[i];
}

/* db[c] += Σ_{n, p} dout[n, c, p] — when the weight gradient is not wanted, this is
 * cheaper than running the weights-gradient primitive for the bias alone. */
static void bias_grad(float *db, const float *dout, const struct layer_mds *m)
{
	for (size_t c = 0; c < m->n_bias; c++) {
		double acc = 0.0;
		for (size_t n = 0; n < m->batch; n++) {
			const float *g = dout + (n * m->n_bias + c) * m->inner; /* (inner) */
			for (size_t p = 0; p < m->inner; p++)
				acc += g[p];
		}
		db[c] += (float)acc;
	}
}

static int layer_forward(const_dnnl_op_desc_t fwd, const struct layer_mds *m, float *out,
			 const float *in, const float *w, const float *b)
{
	struct exec_args x = { 0 };
	args_add(&x, DNNL_ARG_SRC, &m->src, in);
	args_add(&x, DNNL_ARG_WEIGHTS, &m->wei, w);
	if (b)
		args_add(&x, DNNL_ARG_BIAS, &m->bias, b);
	args_add(&x, DNNL_ARG_DST, &m->dst, out);
	return run_op(fwd, NULL, &x, 1, NULL);
}

/* fwd: the forward's op descriptor (a hint for the backward ones); bwd_data; bwd_w
 * with a bias gradient iff db != NULL && dw != NULL. */
static int layer_backward(const_dnnl_op_desc_t fwd, const_dnnl_op_desc_t bwd_data,
			  const_dnnl_op_desc_t bwd_w, const struct layer_mds *m, float *din,
			  float *dw, float *db, const float *dout, const float *in, const float *w)
{
	dnnl_primitive_desc_t hint = NULL;
	float *tmp_din = NULL, *tmp_dw = NULL, *tmp_db = NULL;
	int rc;

	if (!din && !dw) {
		if (db)
			bias_grad(db, dout, m);
		return DD_OK;
	}
	rc = run_op(fwd, NULL, NULL, 0, &hint);
	if (rc != DD_OK)
		goto done;
	rc = DD_ENOMEM;
	if (din && !(tmp_din = malloc(m->n_src * sizeof *tmp_din)))
		goto done;
	if (dw && !(tmp_dw = malloc(m->n_wei * sizeof *tmp_dw)))
		goto done;
	if (dw && db && !(tmp_db = malloc(m->n_bias * sizeof *tmp_db)))
		goto done;

	/* run both primitives before adding anything: a failure leaves the gradients
	 * untouched */
	if (din) {
		struct exec_args x = { 0 };
		args_add(&x, DNNL_ARG_DIFF_DST, &m->dst, dout);
		args_add(&x, DNNL_ARG_WEIGHTS, &m->wei, w);
		args_add(&x, DNNL_ARG_DIFF_SRC, &m->src, tmp_din);
		rc = run_op(bwd_data, hint, &x, 1, NULL);
		if (rc != DD_OK)
			goto done;
	}
	if (dw) {
		struct exec_args x = { 0 };
		args_add(&x, DNNL_ARG_SRC, &m->src, in);
		args_add(&x, DNNL_ARG_DIFF_DST, &m->dst, dout);
		args_add(&x, DNNL_ARG_DIFF_WEIGHTS, &m->wei, tmp_dw);
		if (db)
			args_add(&x, DNNL_ARG_DIFF_BIAS, &m->bias, tmp_db);
		rc = run_op(bwd_w, hint, &x, 1, NULL);
		if (rc != DD_OK)
			goto done;
	}
	if (din)
		add_into(din, tmp_din, m->n_src);
	if (dw)
		add_into(dw, tmp_dw, m->n_wei);
	if (db && dw)
		add_into(db, tmp_db, m->n_bias);
	else if (db)
		bias_grad(db, dout, m);
	rc = DD_OK;
done:
	free(tmp_db);
	free(tmp_dw);
	free(tmp_din);
	if (hint)
		dnnl_primitive_desc_destroy(hint);
	return rc;
}

/* ---- convolution ----------------------------------------------------------------- */

/* The memory descriptors and the geometry of a Caffe convolution in oneDNN's terms:
 * groups as a leading weights dimension (goihw, the same bytes as Caffe's
 * (C_out, C_in/group, kh, kw)); dilation d - 1; right padding equal to the left,
 * which with oneDNN's floor division gives conv_out_size()'s output. */
struct conv_geom {
	struct layer_mds m;
	dnnl_dims_t strides, dilates, pad_l, pad_r;
};

static int conv_geom(struct conv_geom *g, const struct conv_desc *d)
{
	if (d->n < 0 || d->c_in <= 0 || d->c_out <= 0 || d->group <= 0 || d->c_in % d->group ||
	    d->c_out % d->group || d->kh <= 0 || d->kw <= 0 || d->sh <= 0 || d->sw <= 0 ||
	    d->dh <= 0 || d->dw <= 0 || d->ph < 0 || d->pw < 0 || d->h_out <= 0 || d->w_out <= 0)
		return DD_EINVAL;
	int gr = d->group;
	dnnl_dims_t src = { d->n, d->c_in, d->h_in, d->w_in };
	dnnl_dims_t dst = { d->n, d->c_out, d->h_out, d->w_out };
	dnnl_dims_t bias = { d->c_out };
	dnnl_dims_t wei = { d->c_out, d->c_in, d->kh, d->kw };
	dnnl_dims_t gwei = { gr, d->c_out / gr, d->c_in / gr, d->kh, d->kw };
	dnnl_status_t s = dnnl_memory_desc_init_by_tag(&g->m.src, 4, src, dnnl_f32, dnnl_nchw);
	if (s == dnnl_success)
		s = dnnl_memory_desc_init_by_tag(&g->m.dst, 4, dst, dnnl_f32, dnnl_nchw);
	if (s == dnnl_success)
		s = dnnl_memory_desc_init_by_tag(&g->m.bias, 1, bias, dnnl_f32, dnnl_x);
	if (s == dnnl_success)
		s = gr == 1 ? dnnl_memory_desc_init_by_tag(&g->m.wei, 4, wei, dnnl_f32, dnnl_oihw)
			    : dnnl_memory_desc_init_by_tag(&g->m.wei, 5, gwei, dnnl_f32, dnnl_goihw);
	if (s != dnnl_success)
		return status_of(s);
	g->m.n_src = (size_t)d->n * d->c_in * d->h_in * d->w_in;
	g->m.n_dst = (size_t)d->n * d->c_out * d->h_out * d->w_out;
	g->m.n_wei = (size_t)d->c_out * (d->c_in / gr) * d->kh * d->kw;
	g->m.n_bias = (size_t)d->c_out;
	g->m.batch = (size_t)d->n;
	g->m.inner = (size_t)d->h_out * d->w_out;
	g->strides[0] = d->sh, g->strides[1] = d->sw;
	g->dilates[0] = d->dh - 1, g->dilates[1] = d->dw - 1;
	g->pad_l[0] = g->pad_r[0] = d->ph;
	g->pad_l[1] = g->pad_r[1] = d->pw;
	return DD_OK;
}

static int conv_fwd_desc(dnnl_convolution_desc_t *op, struct conv_geom *g, int bias)
{
	return status_of(dnnl_dilated_convolution_forward_desc_init(
		op, dnnl_forward_training, dnnl_convolution_direct, &g->m.src, &g->m.wei,
		bias ? &g->m.bias : NULL, &g->m.dst, g->strides, g->dilates, g->pad_l, g->pad_r));
}

int cpu_conv_forward(float *out, const float *in, const float *w, const float *b,
		      const struct conv_desc *d)
{
	struct conv_geom g;
	dnnl_convolution_desc_t op;
	int rc = engine_get();
	if (rc == DD_OK)
		rc = conv_geom(&g, d);
	if (rc == DD_OK && d->n == 0)
		return DD_OK;
	if (rc == DD_OK)
		rc = conv_fwd_desc(&op, &g, b != NULL);
	if (rc == DD_OK)
		rc = layer_forward(&op, &g.m, out, in, w, b);
	return rc;
}

int cpu_conv_backward(float *din, float *dw, float *db, const float *dout, const float *in,
		       const float *w, const struct conv_desc *d)
{
	struct conv_geom g;
	dnnl_convolution_desc_t fwd, bwd_data, bwd_w;
	int rc = engine_get();
	if (rc == DD_OK)
		rc = conv_geom(&g, d);
	if (rc != DD_OK || d->n == 0)
		return rc;
	/* the hint's bias must match the weights-gradient primitive's */
	rc = conv_fwd_desc(&fwd, &g, db && dw);
	if (rc == DD_OK)
		rc = status_of(dnnl_dilated_convolution_backward_data_desc_init(
			&bwd_data, dnnl_convolution_direct, &g.m.src, &g.m.wei, &g.m.dst, g.strides,
			g.dilates, g.pad_l, g.pad_r));
	if (rc == DD_OK)
		rc = status_of(dnnl_dilated_convolution_backward_weights_desc_init(
			&bwd_w, dnnl_convolution_direct, &g.m.src, &g.m.wei, db && dw ? &g.m.bias : NULL,
			&g.m.dst, g.strides, g.dilates, g.pad_l, g.pad_r));
	if (rc == DD_OK)
		rc = layer_backward(&fwd, &bwd_data, &bwd_w, &g.m, din, dw, db, dout, in, w);
	return rc;
}

/* ---- inner product --------------------------------------------------------------- */

static int ip_mds(struct layer_mds *m, const struct ip_desc *d)
{
	if (d->n < 0 || d->k <= 0 || d->m <= 0)
		return DD_EINVAL;
	dnnl_dims_t src = { d->n, d->k }, wei = { d->m, d->k }, dst = { d->n, d->m }, bias = { d->m };
	dnnl_status_t s = dnnl_memory_desc_init_by_tag(&m->src, 2, src, dnnl_f32, dnnl_nc);
	if (s == dnnl_success)
		s = dnnl_memory_desc_init_by_tag(&m->wei, 2, wei, dnnl_f32, dnnl_oi);
	if (s == dnnl_success)
		s = dnnl_memory_desc_init_by_tag(&m->dst, 2, dst, dnnl_f32, dnnl_nc);
	if (s == dnnl_success)
		s = dnnl_memory_desc_init_by_tag(&m->bias, 1, bias, dnnl_f32, dnnl_x);
	if (s != dnnl_success)
		return status_of(s);
	m->n_src = (size_t)d->n * d->k;
	m->n_wei = (size_t)d->m * d->k;
	m->n_dst = (size_t)d->n * d->m;
	m->n_bias = (size_t)d->m;
	m->batch = (size_t)d->n;
	m->inner = 1;
	return DD_OK;
}

int cpu_ip_forward(float *out, const float *in, const float *w, const float *b,
		    const struct ip_desc *d)
{
	struct layer_mds m;
	dnnl_inner_product_desc_t op;
	int rc = engine_get();
	if (rc == DD_OK)
		rc = ip_mds(&m, d);
	if (rc != DD_OK || d->n == 0)
		return rc;
	rc = status_of(dnnl_inner_product_forward_desc_init(&op, dnnl_forward_training, &m.src,
							    &m.wei, b ? &m.bias : NULL, &m.dst));
	if (rc == DD_OK)
		rc = layer_forward(&op, &m, out, in, w, b);
	return rc;
}

int cpu_ip_backward(float *din, float *dw, float *db, const float *dout, const float *in,
		     const float *w, const struct ip_desc *d)
{
	struct layer_mds m;
	dnnl_inner_product_desc_t fwd, bwd_data, bwd_w;
	int rc = engine_get();
	if (rc == DD_OK)
		rc = ip_mds(&m, d);
	if (rc != DD_OK || d->n == 0)
		return rc;
	const dnnl_memory_desc_t *bias = db && dw ? &m.bias : NULL;
	rc = status_of(dnnl_inner_product_forward_desc_init(&fwd, dnnl_forward_training, &m.src,
							    &m.wei, bias, &m.dst));
	if (rc == DD_OK)
		rc = status_of(dnnl_inner_product_backward_data_desc_init(&bwd_data, &m.src, &m.wei,
									  &m.dst));
	if (rc == DD_OK)
		rc = status_of(dnnl_inner_product_backward_weights_desc_init(&bwd_w, &m.src, &m.wei,
									     bias, &m.dst));
	if (rc == DD_OK)
		rc = layer_backward(&fwd, &bwd_data, &bwd_w, &m, din, dw, db, dout, in, w);
	return rc;
}
