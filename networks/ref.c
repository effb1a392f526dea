/* ref.c — the reference layers: Caffe's semantics in plain loops.
 *
 * Every function here is written to be checked by eye against Caffe's layer source
 * and against the maths, never for speed: no im2col, no blocking, no threads.  The
 * fast backends are tested against these loops (ggml's test-backend-ops idea), and
 * these loops are tested by finite differences (tests/unit/test_ref.c) and against
 * PyTorch (tests/unit/test_parity.c), so a disagreement always has a referee.
 *
 * Conventions, as ref.h states them: NCHW float32; outputs first, then inputs, then
 * the descriptor; a forward overwrites its output; a backward ADDS into every
 * gradient it is given and skips any that is NULL.  Long sums (a convolution's
 * window times its channels, a batch statistic, a softmax denominator) accumulate
 * in double and are rounded to float once.  Backward passes gather rather than
 * scatter where a scatter would add many float terms into one float.
 *
 * Where Caffe's behaviour is undefined (a pooling window that lies wholly in the
 * padding, a label outside [0, C)), the function does the harmless thing and its
 * comment says so. */
#include "ref.h"

#include <float.h>
#include <math.h>
#include <stddef.h>

#include "../common/rng.h"

/* ---- convolution ------------------------------------------------------------ */

void conv_out_size(struct conv_desc *d)
{
	int ekh = d->dh * (d->kh - 1) + 1, ekw = d->dw * (d->kw - 1) + 1; /* dilated extent */
	d->h_out = (d->h_in + 2 * d->ph - ekh) / d->sh + 1;
	d->w_out = (d->w_in + 2 * d->pw - ekw) / d->sw + 1;
}

/* Where output position o's tap k lands in the input, along one axis of the given
 * stride, padding, dilation and input size: the input index, or -1 when the tap
 * falls in the padding (it reads zero). */
static inline int conv_tap(int o, int k, int stride, int pad, int dil, int size)
{
	int at = o * stride - pad + k * dil;
	return at < 0 || at >= size ? -1 : at;
}

/* The converse: the output position whose tap k lands on input index at, or -1
 * when none does (at + pad - k·dil is not a whole number of strides inside the
 * output). */
static inline int conv_src(int at, int k, int stride, int pad, int dil, int size)
{
	int t = at + pad - k * dil;
	if (t < 0 || t % stride)
		return -1;
	return t / stride < size ? t / stride : -1;
}

/* db[c] += Σ_{n,p} dout[n,c,p] over a (N, C, plane) gradient, in double per channel. */
static void channel_sums(float *db, const float *dout, int n, int c, size_t plane)
{
	for (int co = 0; co < c; co++) {
		double acc = 0.0;
		for (int k = 0; k < n; k++) {
			const float *go = dout + ((size_t)k * c + co) * plane; /* (plane) */
			for (size_t p = 0; p < plane; p++)
				acc += go[p];
		}
		db[co] += (float)acc;
	}
}

/* Cross-correlation, as Caffe (no kernel flip):
 * out[n,co,y,x] = b[co] + Σ_{ci∈group(co), i, j} w[co,ci,i,j] · in[n, g·Cig+ci, y·sh-ph+i·dh, x·sw-pw+j·dw]
 * with taps outside the input reading zero. */
void conv_forward(float *out, const float *in, const float *w, const float *b, const struct conv_desc *d)
{
	int cig = d->c_in / d->group, cog = d->c_out / d->group;
	for (int n = 0; n < d->n; n++)
		for (int co = 0; co < d->c_out; co++) {
			int g = co / cog;
			const float *wc = w + (size_t)co * cig * d->kh * d->kw; /* (C_in/group, kh, kw) */
			float *o = out + ((size_t)n * d->c_out + co) * d->h_out * d->w_out; /* (H_out, W_out) */
			for (int y = 0; y < d->h_out; y++)
				for (int x = 0; x < d->w_out; x++) {
					double acc = b ? b[co] : 0.0;
					for (int ci = 0; ci < cig; ci++) {
						const float *ip = in + ((size_t)n * d->c_in + g * cig + ci) * d->h_in * d->w_in; /* (H, W) */
						for (int i = 0; i < d->kh; i++) {
							int iy = conv_tap(y, i, d->sh, d->ph, d->dh, d->h_in);
							if (iy < 0)
								continue;
							for (int j = 0; j < d->kw; j++) {
								int ix = conv_tap(x, j, d->sw, d->pw, d->dw, d->w_in);
								if (ix < 0)
									continue;
								acc += (double)wc[((size_t)ci * d->kh + i) * d->kw + j] *
								       ip[(size_t)iy * d->w_in + ix];
							}
						}
					}
					o[(size_t)y * d->w_out + x] = (float)acc;
				}
		}
}

/* *acc += Σ_{y<ah, x<aw} a[y,x] · b[conv_tap(y, i), conv_tap(x, j)] over the taps
 * inside b (bh x bw), in order: a weight gradient's sum for one image and one
 * kernel position (i, j) — the convolution's a = dout, b = its input; the
 * deconvolution's a = its input, b = dout. */
static void tap_correlate(double *acc, const float *a, int ah, int aw, const float *b, int bh, int bw, int i, int j,
			  const struct conv_desc *d)
{
	for (int y = 0; y < ah; y++) {
		int by = conv_tap(y, i, d->sh, d->ph, d->dh, bh);
		if (by < 0)
			continue;
		for (int x = 0; x < aw; x++) {
			int bx = conv_tap(x, j, d->sw, d->pw, d->dw, bw);
			if (bx < 0)
				continue;
			*acc += (double)a[(size_t)y * aw + x] * b[(size_t)by * bw + bx];
		}
	}
}

/* din[n,c,iy,ix] += Σ over the (co, i, j) whose tap lands on (iy, ix): w · dout
 *   — gathered: the tap i lands on iy when y = (iy + ph - i·dh) / sh is a whole
 *     number inside [0, H_out);
 * dw[co,ci,i,j]  += Σ_{n,y,x} dout[n,co,y,x] · in[n, g·Cig+ci, tap];
 * db[co]         += Σ_{n,y,x} dout[n,co,y,x]. */
void conv_backward(float *din, float *dw, float *db, const float *dout, const float *in,
		   const float *w, const struct conv_desc *d)
{
	int cig = d->c_in / d->group, cog = d->c_out / d->group;
	size_t plane_in = (size_t)d->h_in * d->w_in, plane_out = (size_t)d->h_out * d->w_out;

	if (db)
		channel_sums(db, dout, d->n, d->c_out, plane_out);

	if (dw)
		for (int co = 0; co < d->c_out; co++) {
			int g = co / cog;
			for (int ci = 0; ci < cig; ci++)
				for (int i = 0; i < d->kh; i++)
					for (int j = 0; j < d->kw; j++) {
						double acc = 0.0;
						for (int n = 0; n < d->n; n++) {
							const float *go = dout + ((size_t)n * d->c_out + co) * plane_out; /* (H_out, W_out) */
							const float *ip = in + ((size_t)n * d->c_in + g * cig + ci) * plane_in; /* (H, W) */
							tap_correlate(&acc, go, d->h_out, d->w_out, ip, d->h_in, d->w_in, i, j, d);
						}
						dw[(((size_t)co * cig + ci) * d->kh + i) * d->kw + j] += (float)acc;
					}
		}

	if (din)
		for (int n = 0; n < d->n; n++)
			for (int c = 0; c < d->c_in; c++) {
				int g = c / cig, ci = c % cig;
				float *gi = din + ((size_t)n * d->c_in + c) * plane_in; /* (H, W) */
				for (int iy = 0; iy < d->h_in; iy++)
					for (int ix = 0; ix < d->w_in; ix++) {
						double acc = 0.0;
						for (int co = g * cog; co < (g + 1) * cog; co++) {
							const float *go = dout + ((size_t)n * d->c_out + co) * plane_out; /* (H_out, W_out) */
							const float *wc = w + ((size_t)co * cig + ci) * d->kh * d->kw; /* (kh, kw) */
							for (int i = 0; i < d->kh; i++) {
								int y = conv_src(iy, i, d->sh, d->ph, d->dh, d->h_out);
								if (y < 0)
									continue;
								for (int j = 0; j < d->kw; j++) {
									int x = conv_src(ix, j, d->sw, d->pw, d->dw, d->w_out);
									if (x < 0)
										continue;
									acc += (double)wc[i * d->kw + j] * go[(size_t)y * d->w_out + x];
								}
							}
						}
						gi[(size_t)iy * d->w_in + ix] += (float)acc;
					}
			}
}

/* ---- deconvolution ------------------------------------------------------------ */

/* Caffe's Deconvolution, the transpose of the convolution from the top's shape to
 * the bottom's: input position (y, x) spreads in[n,ci,y,x] · w[ci,co,i,j] onto output
 * (y·sh - ph + i·dh, x·sw - pw + j·dw).  Gathered per output:
 * out[n,co,oy,ox] = b[co] + Σ_{ci∈group(co), i, j} w[ci, co - g·Cog, i, j] · in[n, ci, y, x]
 * over the taps whose source (y, x) = conv_src(oy, i), conv_src(ox, j) is inside the input. */
void deconv_forward(float *out, const float *in, const float *w, const float *b, const struct conv_desc *d)
{
	int cig = d->c_in / d->group, cog = d->c_out / d->group;
	size_t kk = (size_t)d->kh * d->kw, plane_in = (size_t)d->h_in * d->w_in;
	for (int n = 0; n < d->n; n++)
		for (int co = 0; co < d->c_out; co++) {
			int g = co / cog, col = co % cog;
			float *o = out + ((size_t)n * d->c_out + co) * d->h_out * d->w_out; /* (H_out, W_out) */
			for (int oy = 0; oy < d->h_out; oy++)
				for (int ox = 0; ox < d->w_out; ox++) {
					double acc = b ? b[co] : 0.0;
					for (int ci = g * cig; ci < (g + 1) * cig; ci++) {
						const float *wc = w + ((size_t)ci * cog + col) * kk; /* (kh, kw) */
						const float *ip = in + ((size_t)n * d->c_in + ci) * plane_in; /* (H, W) */
						for (int i = 0; i < d->kh; i++) {
							int y = conv_src(oy, i, d->sh, d->ph, d->dh, d->h_in);
							if (y < 0)
								continue;
							for (int j = 0; j < d->kw; j++) {
								int x = conv_src(ox, j, d->sw, d->pw, d->dw, d->w_in);
								if (x < 0)
									continue;
								acc += (double)wc[i * d->kw + j] * ip[(size_t)y * d->w_in + x];
							}
						}
					}
					o[(size_t)oy * d->w_out + ox] = (float)acc;
				}
		}
}

/* din[n,ci,y,x]  += Σ_{co∈group(ci), i, j} w[ci,co-g·Cog,i,j] · dout[n, co, conv_tap(y, i), conv_tap(x, j)]
 *   (a convolution of dout, taps outside the output reading zero);
 * dw[ci,col,i,j] += Σ_{n,y,x} in[n,ci,y,x] · dout[n, g·Cog+col, conv_tap(y, i), conv_tap(x, j)];
 * db[co]         += Σ_{n,oy,ox} dout[n,co,oy,ox]. */
void deconv_backward(float *din, float *dw, float *db, const float *dout, const float *in,
		     const float *w, const struct conv_desc *d)
{
	int cig = d->c_in / d->group, cog = d->c_out / d->group;
	size_t kk = (size_t)d->kh * d->kw;
	size_t plane_in = (size_t)d->h_in * d->w_in, plane_out = (size_t)d->h_out * d->w_out;

	if (db)
		channel_sums(db, dout, d->n, d->c_out, plane_out);

	if (dw)
		for (int ci = 0; ci < d->c_in; ci++) {
			int g = ci / cig;
			for (int col = 0; col < cog; col++)
				for (int i = 0; i < d->kh; i++)
					for (int j = 0; j < d->kw; j++) {
						double acc = 0.0;
						for (int n = 0; n < d->n; n++) {
							const float *ip = in + ((size_t)n * d->c_in + ci) * plane_in; /* (H, W) */
							const float *go = dout + ((size_t)n * d->c_out + g * cog + col) * plane_out; /* (H_out, W_out) */
							tap_correlate(&acc, ip, d->h_in, d->w_in, go, d->h_out, d->w_out, i, j, d);
						}
						dw[((size_t)ci * cog + col) * kk + (size_t)i * d->kw + j] += (float)acc;
					}
		}

	if (din)
		for (int n = 0; n < d->n; n++)
			for (int ci = 0; ci < d->c_in; ci++) {
				int g = ci / cig;
				float *gi = din + ((size_t)n * d->c_in + ci) * plane_in; /* (H, W) */
				for (int y = 0; y < d->h_in; y++)
					for (int x = 0; x < d->w_in; x++) {
						double acc = 0.0;
						for (int col = 0; col < cog; col++) {
							const float *wc = w + ((size_t)ci * cog + col) * kk; /* (kh, kw) */
							const float *go = dout + ((size_t)n * d->c_out + g * cog + col) * plane_out; /* (H_out, W_out) */
							for (int i = 0; i < d->kh; i++) {
								int oy = conv_tap(y, i, d->sh, d->ph, d->dh, d->h_out);
								if (oy < 0)
									continue;
								for (int j = 0; j < d->kw; j++) {
									int ox = conv_tap(x, j, d->sw, d->pw, d->dw, d->w_out);
									if (ox < 0)
										continue;
									acc += (double)wc[i * d->kw + j] * go[(size_t)oy * d->w_out + ox];
								}
							}
						}
						gi[(size_t)y * d->w_in + x] += (float)acc;
					}
			}
}

/* ---- inner product ------------------------------------------------------------ */

/* acc + Σ_{i<len} a[i·sa] · b[i·sb], added in order in double: each of the inner
 * product's three matrix products is this sum, along a row or a column. */
static double dot(double acc, const float *a, size_t sa, const float *b, size_t sb, int len)
{
	for (int i = 0; i < len; i++)
		acc += (double)a[i * sa] * b[i * sb];
	return acc;
}

/* out[n,m] = b[m] + Σ_k in[n,k] · w[m,k] */
void ip_forward(float *out, const float *in, const float *w, const float *b, const struct ip_desc *d)
{
	for (int n = 0; n < d->n; n++)
		for (int m = 0; m < d->m; m++) {
			const float *x = in + (size_t)n * d->k; /* (K) */
			const float *wm = w + (size_t)m * d->k;  /* (K) */
			out[(size_t)n * d->m + m] = (float)dot(b ? b[m] : 0.0, x, 1, wm, 1, d->k);
		}
}

/* din[n,k] += Σ_m dout[n,m] · w[m,k];  dw[m,k] += Σ_n dout[n,m] · in[n,k];  db[m] += Σ_n dout[n,m] */
void ip_backward(float *din, float *dw, float *db, const float *dout, const float *in,
		 const float *w, const struct ip_desc *d)
{
	if (din) /* row n of dout · column k of w */
		for (int n = 0; n < d->n; n++)
			for (int k = 0; k < d->k; k++)
				din[(size_t)n * d->k + k] += (float)dot(0.0, dout + (size_t)n * d->m, 1, w + k, (size_t)d->k, d->m);
	if (dw) /* column m of dout · column k of in */
		for (int m = 0; m < d->m; m++)
			for (int k = 0; k < d->k; k++)
				dw[(size_t)m * d->k + k] += (float)dot(0.0, dout + m, (size_t)d->m, in + k, (size_t)d->k, d->n);
	if (db)
		for (int m = 0; m < d->m; m++) {
			double acc = 0.0;
			for (int n = 0; n < d->n; n++)
				acc += dout[(size_t)n * d->m + m];
			db[m] += (float)acc;
		}
}

/* ---- pooling ------------------------------------------------------------------ */

/* The window geometry a descriptor really means: global pooling overrides the
 * kernel with the whole plane, stride 1 and no padding (Caffe's global_pooling). */
struct pool_geom {
	int kh, kw, sh, sw, ph, pw;
};

static struct pool_geom pool_geom(const struct pool_desc *d)
{
	struct pool_geom g = { d->kh, d->kw, d->sh, d->sw, d->ph, d->pw };
	if (d->global)
		g = (struct pool_geom){ d->h_in, d->w_in, 1, 1, 0, 0 };
	return g;
}

/* ceil(a / b) for b > 0 and any sign of a, as Caffe's ceil(float(a) / b). */
static int ceil_div(int a, int b)
{
	return a >= 0 ? (a + b - 1) / b : -(-a / b);
}

/* Caffe's PoolingLayer::Reshape: round up, then — only when there is padding — drop
 * the last window if it would start at or beyond input + pad (it would see padding
 * only).  Without padding Caffe keeps such a window (possible when kernel < stride);
 * pool_forward writes 0 there. */
static int pool_extent(int in, int k, int s, int p)
{
	int out = ceil_div(in + 2 * p - k, s) + 1;
	if (p > 0 && (out - 1) * s >= in + p)
		out--;
	return out;
}

void pool_out_size(struct pool_desc *d)
{
	if (d->global) {
		d->kh = d->h_in, d->kw = d->w_in;
		d->sh = d->sw = 1;
		d->ph = d->pw = 0;
	}
	d->h_out = pool_extent(d->h_in, d->kh, d->sh, d->ph);
	d->w_out = pool_extent(d->w_in, d->kw, d->sw, d->pw);
}

/* MAX: the window [y·sh-ph, +kh) clipped to the input; the first strictly largest
 * value wins and mask gets its flat index iy·W+ix in the input plane.  A window that
 * holds no input pixel (Caffe leaves -FLT_MAX there) writes 0 with mask -1.
 * AVE: the sum over the window clipped to the input, divided by the size of the
 * window clipped to input+pad — padding counts, the part of a ceil-rounded window
 * that hangs beyond the padding does not (Caffe's pool_size).  An empty window
 * writes 0 (Caffe would divide 0 by a size ≤ 0). */
void pool_forward(float *out, int32_t *mask, const float *in, const struct pool_desc *d)
{
	struct pool_geom g = pool_geom(d);
	size_t plane_in = (size_t)d->h_in * d->w_in, plane_out = (size_t)d->h_out * d->w_out;
	for (int nc = 0; nc < d->n * d->c; nc++) {
		const float *ip = in + (size_t)nc * plane_in; /* (H, W) */
		float *op = out + (size_t)nc * plane_out;     /* (H_out, W_out) */
		int32_t *mp = mask ? mask + (size_t)nc * plane_out : NULL;
		for (int y = 0; y < d->h_out; y++)
			for (int x = 0; x < d->w_out; x++) {
				int y0 = y * g.sh - g.ph, x0 = x * g.sw - g.pw;
				int y1 = y0 + g.kh, x1 = x0 + g.kw;
				size_t o = (size_t)y * d->w_out + x;
				if (d->method == POOL_MAX) {
					if (y1 > d->h_in) y1 = d->h_in;
					if (x1 > d->w_in) x1 = d->w_in;
					if (y0 < 0) y0 = 0;
					if (x0 < 0) x0 = 0;
					float best = -FLT_MAX;
					int32_t arg = -1;
					for (int iy = y0; iy < y1; iy++)
						for (int ix = x0; ix < x1; ix++)
							if (arg < 0 || ip[iy * d->w_in + ix] > best) {
								best = ip[iy * d->w_in + ix];
								arg = iy * d->w_in + ix;
							}
					op[o] = arg < 0 ? 0.0f : best;
					if (mp)
						mp[o] = arg;
				} else {
					if (y1 > d->h_in + g.ph) y1 = d->h_in + g.ph;
					if (x1 > d->w_in + g.pw) x1 = d->w_in + g.pw;
					int pool_size = (y1 - y0) * (x1 - x0);
					if (y0 < 0) y0 = 0;
					if (x0 < 0) x0 = 0;
					if (y1 > d->h_in) y1 = d->h_in;
					if (x1 > d->w_in) x1 = d->w_in;
					double acc = 0.0;
					for (int iy = y0; iy < y1; iy++)
						for (int ix = x0; ix < x1; ix++)
							acc += ip[iy * d->w_in + ix];
					op[o] = (y0 < y1 && x0 < x1) ? (float)(acc / pool_size) : 0.0f;
				}
			}
	}
}

/* MAX: din[mask] += dout (a pixel that is the max of several windows gets each).
 * AVE: every input pixel of the clipped window gets dout / pool_size. */
void pool_backward(float *din, const float *dout, const int32_t *mask, const struct pool_desc *d)
{
	if (!din)
		return;
	struct pool_geom g = pool_geom(d);
	size_t plane_in = (size_t)d->h_in * d->w_in, plane_out = (size_t)d->h_out * d->w_out;
	for (int nc = 0; nc < d->n * d->c; nc++) {
		float *gi = din + (size_t)nc * plane_in;          /* (H, W) */
		const float *go = dout + (size_t)nc * plane_out;  /* (H_out, W_out) */
		if (d->method == POOL_MAX) {
			const int32_t *mp = mask + (size_t)nc * plane_out;
			for (size_t o = 0; o < plane_out; o++)
				if (mp[o] >= 0)
					gi[mp[o]] += go[o];
			continue;
		}
		for (int y = 0; y < d->h_out; y++)
			for (int x = 0; x < d->w_out; x++) {
				int y0 = y * g.sh - g.ph, x0 = x * g.sw - g.pw;
				int y1 = y0 + g.kh, x1 = x0 + g.kw;
				if (y1 > d->h_in + g.ph) y1 = d->h_in + g.ph;
				if (x1 > d->w_in + g.pw) x1 = d->w_in + g.pw;
				int pool_size = (y1 - y0) * (x1 - x0);
				if (y0 < 0) y0 = 0;
				if (x0 < 0) x0 = 0;
				if (y1 > d->h_in) y1 = d->h_in;
				if (x1 > d->w_in) x1 = d->w_in;
				if (y0 >= y1 || x0 >= x1)
					continue;
				float share = go[(size_t)y * d->w_out + x] / (float)pool_size;
				for (int iy = y0; iy < y1; iy++)
					for (int ix = x0; ix < x1; ix++)
						gi[iy * d->w_in + ix] += share;
			}
	}
}

/* ---- element-wise activations -------------------------------------------------- */

/* out = max(in, 0) + slope · min(in, 0) */
void relu_forward(float *out, const float *in, int64_t count, float negative_slope)
{
	for (int64_t i = 0; i < count; i++)
		out[i] = in[i] > 0 ? in[i] : in[i] * negative_slope;
}

/* din += dout · (in > 0 ? 1 : slope) — Caffe takes the slope at exactly 0 */
void relu_backward(float *din, const float *dout, const float *in, int64_t count, float negative_slope)
{
	if (!din)
		return;
	for (int64_t i = 0; i < count; i++)
		din[i] += dout[i] * (in[i] > 0 ? 1.0f : negative_slope);
}

/* out = 1 / (1 + e^-in);  din += dout · out · (1 - out) */
void sigmoid_forward(float *out, const float *in, int64_t count)
{
	for (int64_t i = 0; i < count; i++)
		out[i] = 1.0f / (1.0f + expf(-in[i]));
}

void sigmoid_backward(float *din, const float *dout, const float *out, int64_t count)
{
	if (!din)
		return;
	for (int64_t i = 0; i < count; i++)
		din[i] += dout[i] * out[i] * (1.0f - out[i]);
}

/* out = tanh(in);  din += dout · (1 - out²) */
void tanh_forward(float *out, const float *in, int64_t count)
{
	for (int64_t i = 0; i < count; i++)
		out[i] = tanhf(in[i]);
}

void tanh_backward(float *din, const float *dout, const float *out, int64_t count)
{
	if (!din)
		return;
	for (int64_t i = 0; i < count; i++)
		din[i] += dout[i] * (1.0f - out[i] * out[i]);
}

/* out = (shift + scale·in)^power.  Caffe's special case: when power·scale = 0 the
 * output is the constant 1 (power 0) or shift^power (scale 0). */
void power_forward(float *out, const float *in, int64_t count, float power, float scale, float shift)
{
	if (power * scale == 0.0f) {
		float v = power == 0.0f ? 1.0f : powf(shift, power);
		for (int64_t i = 0; i < count; i++)
			out[i] = v;
		return;
	}
	for (int64_t i = 0; i < count; i++) {
		float u = shift + scale * in[i];
		out[i] = power == 1.0f ? u : powf(u, power);
	}
}

/* din += dout · power·scale·(shift + scale·in)^(power-1).  Caffe's cases: a constant
 * output (power·scale = 0) has gradient 0; power 1 has the constant gradient scale;
 * power 2 is the exact linear 2·scale·(shift + scale·in).  Elsewhere the formula is
 * evaluated directly, where Caffe computes power·y/u (or power·y/x when shift = 0),
 * which agrees except at u = 0 (Caffe gives NaN there, this gives the limit). */
void power_backward(float *din, const float *dout, const float *in, int64_t count, float power,
		    float scale, float shift)
{
	if (!din)
		return;
	float diff_scale = power * scale;
	for (int64_t i = 0; i < count; i++) {
		float g;
		if (diff_scale == 0.0f)
			g = 0.0f;
		else if (power == 1.0f)
			g = diff_scale;
		else if (power == 2.0f)
			g = diff_scale * (shift + scale * in[i]);
		else
			g = diff_scale * powf(shift + scale * in[i], power - 1.0f);
		din[i] += dout[i] * g;
	}
}

/* ---- dropout -------------------------------------------------------------------- */

/* Training: keep each value with probability 1 - ratio (u ∈ [0,1) drawn per value,
 * kept when u ≥ ratio) and scale the kept ones by 1/(1 - ratio), so the expectation
 * is unchanged and the test phase is the identity (Caffe's inverted dropout).  Test
 * (training = 0): out = in, and mask, when given, is set to all ones so that a
 * backward through it is the identity too. */
void dropout_forward(float *out, uint8_t *mask, const float *in, int64_t count, float ratio,
		     int training, uint64_t *rng)
{
	if (!training) {
		for (int64_t i = 0; i < count; i++) {
			out[i] = in[i];
			if (mask)
				mask[i] = 1;
		}
		return;
	}
	float scale = 1.0f / (1.0f - ratio);
	for (int64_t i = 0; i < count; i++) {
		double u = rng_unit(rng_next(rng)); /* rng: splitmix64 (common/rng.h) */
		mask[i] = u >= ratio;
		out[i] = mask[i] ? in[i] * scale : 0.0f;
	}
}

/* din += dout · mask / (1 - ratio); a NULL mask means the test phase: din += dout */
void dropout_backward(float *din, const float *dout, const uint8_t *mask, int64_t count, float ratio)
{
	if (!din)
		return;
	if (!mask) {
		for (int64_t i = 0; i < count; i++)
			din[i] += dout[i];
		return;
	}
	float scale = 1.0f / (1.0f - ratio);
	for (int64_t i = 0; i < count; i++)
		if (mask[i])
			din[i] += dout[i] * scale;
}

/* ---- LRN across channels ----------------------------------------------------------- */

/* scale[n,c,p] = k + alpha/size · Σ_{|j-c| ≤ size/2, 0 ≤ j < C} in[n,j,p]²
 * out[n,c,p]   = in[n,c,p] · scale[n,c,p]^-beta */
void lrn_forward(float *out, float *scale, const float *in, const struct lrn_desc *d)
{
	int half = (d->size - 1) / 2;
	size_t plane = (size_t)d->h * d->w;
	for (int n = 0; n < d->n; n++)
		for (int c = 0; c < d->c; c++) {
			int j0 = c - half < 0 ? 0 : c - half;
			int j1 = c + half >= d->c ? d->c - 1 : c + half;
			size_t at = ((size_t)n * d->c + c) * plane;
			for (size_t p = 0; p < plane; p++) {
				double ss = 0.0;
				for (int j = j0; j <= j1; j++) {
					double v = in[((size_t)n * d->c + j) * plane + p];
					ss += v * v;
				}
				float s = (float)(d->k + (double)d->alpha / d->size * ss);
				scale[at + p] = s;
				out[at + p] = in[at + p] * powf(s, -d->beta);
			}
		}
}

/* din[c] += dout[c]·scale[c]^-beta
 *         - 2·alpha·beta/size · in[c] · Σ_{|j-c| ≤ size/2} dout[j]·out[j] / scale[j]
 * (out[j]/scale[j] = in[j]·scale[j]^(-beta-1), the derivative of scale^-beta). */
void lrn_backward(float *din, const float *dout, const float *out, const float *in,
		  const float *scale, const struct lrn_desc *d)
{
	if (!din)
		return;
	int half = (d->size - 1) / 2;
	size_t plane = (size_t)d->h * d->w;
	double ratio = 2.0 * d->alpha * d->beta / d->size;
	for (int n = 0; n < d->n; n++)
		for (int c = 0; c < d->c; c++) {
			int j0 = c - half < 0 ? 0 : c - half;
			int j1 = c + half >= d->c ? d->c - 1 : c + half;
			size_t at = ((size_t)n * d->c + c) * plane;
			for (size_t p = 0; p < plane; p++) {
				double acc = 0.0;
				for (int j = j0; j <= j1; j++) {
					size_t q = ((size_t)n * d->c + j) * plane + p;
					acc += (double)dout[q] * out[q] / scale[q];
				}
				double g = (double)dout[at + p] * pow(scale[at + p], -d->beta) -
					   ratio * in[at + p] * acc;
				din[at + p] += (float)g;
			}
		}
}

/* ---- batch norm ---------------------------------------------------------------------- */

/* Caffe 1.0's BatchNorm.  With batch statistics (training and not use_global_stats):
 *   mean[c] = E[x],  var[c] = E[(x - mean)²] (biased),  out = (x - mean) / sqrt(var + eps)
 *   factor  = maf·factor + 1,  mean_acc = maf·mean_acc + mean,
 *   var_acc = maf·var_acc + m/(m-1)·var   (m = N·H·W; the factor is 1 when m = 1).
 * With the stored statistics (use_global_stats, or training = 0 — a test-phase
 * forward never touches the blobs):
 *   s = factor == 0 ? 0 : 1/factor,  mean = s·mean_acc,  var = s·var_acc.
 * saved_mean / saved_invstd (C) receive the mean and 1/sqrt(var + eps) used, for
 * bn_backward; either may be NULL when no backward follows. */
void bn_forward(float *out, float *mean_acc, float *var_acc, float *factor, float *saved_mean,
		float *saved_invstd, const float *in, const struct bn_desc *d, int training)
{
	int global = d->use_global_stats || !training;
	size_t plane = (size_t)d->h * d->w;
	double m = (double)d->n * plane;
	double s = *factor == 0.0f ? 0.0 : 1.0 / *factor;
	for (int c = 0; c < d->c; c++) {
		double mean, var;
		if (global) {
			mean = (float)(s * mean_acc[c]);
			var = (float)(s * var_acc[c]);
		} else {
			double sum = 0.0, sq = 0.0;
			for (int n = 0; n < d->n; n++) {
				const float *x = in + ((size_t)n * d->c + c) * plane; /* (H, W) */
				for (size_t p = 0; p < plane; p++)
					sum += x[p];
			}
			mean = sum / m;
			for (int n = 0; n < d->n; n++) {
				const float *x = in + ((size_t)n * d->c + c) * plane;
				for (size_t p = 0; p < plane; p++)
					sq += (x[p] - mean) * (x[p] - mean);
			}
			var = sq / m;
			double correction = m > 1 ? m / (m - 1) : 1.0;
			mean_acc[c] = (float)(d->moving_average_fraction * mean_acc[c] + mean);
			var_acc[c] = (float)(d->moving_average_fraction * var_acc[c] + correction * var);
		}
		double invstd = 1.0 / sqrt(var + d->eps);
		for (int n = 0; n < d->n; n++) {
			const float *x = in + ((size_t)n * d->c + c) * plane; /* (H, W) */
			float *y = out + ((size_t)n * d->c + c) * plane;
			for (size_t p = 0; p < plane; p++)
				y[p] = (float)((x[p] - mean) * invstd);
		}
		if (saved_mean)
			saved_mean[c] = (float)mean;
		if (saved_invstd)
			saved_invstd[c] = (float)invstd;
	}
	if (!global)
		*factor = d->moving_average_fraction * *factor + 1.0f;
}

/* With the stored statistics (global or d->use_global_stats): din += dout · invstd.
 * With batch statistics (out is the normalised y this forward wrote, before any
 * in-place layer overwrote it):
 *   din += (dout - mean(dout) - mean(dout·y)·y) · invstd, means over (N, H, W). */
void bn_backward(float *din, const float *dout, const float *out, const float *saved_invstd,
		 const struct bn_desc *d, int global)
{
	if (!din)
		return;
	global = global || d->use_global_stats;
	size_t plane = (size_t)d->h * d->w;
	double m = (double)d->n * plane;
	for (int c = 0; c < d->c; c++) {
		double invstd = saved_invstd[c], mean_dy = 0.0, mean_dyy = 0.0;
		if (!global) {
			for (int n = 0; n < d->n; n++) {
				size_t at = ((size_t)n * d->c + c) * plane;
				for (size_t p = 0; p < plane; p++) {
					mean_dy += dout[at + p];
					mean_dyy += (double)dout[at + p] * out[at + p];
				}
			}
			mean_dy /= m;
			mean_dyy /= m;
		}
		for (int n = 0; n < d->n; n++) {
			size_t at = ((size_t)n * d->c + c) * plane;
			for (size_t p = 0; p < plane; p++) {
				double g = global ? dout[at + p]
						  : dout[at + p] - mean_dy - mean_dyy * out[at + p];
				din[at + p] += (float)(g * invstd);
			}
		}
	}
}

/* ---- Scale ------------------------------------------------------------------------------ */

/* out[n,c,p] = in[n,c,p] · gamma[c] + beta[c]  (beta only when d->bias) */
void scale_forward(float *out, const float *in, const float *gamma, const float *beta,
		   const struct scale_desc *d)
{
	for (int n = 0; n < d->n; n++)
		for (int c = 0; c < d->c; c++) {
			size_t at = ((size_t)n * d->c + c) * d->inner;
			float b = d->bias && beta ? beta[c] : 0.0f;
			for (int p = 0; p < d->inner; p++)
				out[at + p] = in[at + p] * gamma[c] + b;
		}
}

/* din += dout · gamma;  dgamma[c] += Σ dout · in;  dbeta[c] += Σ dout */
void scale_backward(float *din, float *dgamma, float *dbeta, const float *dout, const float *in,
		    const float *gamma, const struct scale_desc *d)
{
	for (int c = 0; c < d->c; c++) {
		double sg = 0.0, sb = 0.0;
		for (int n = 0; n < d->n; n++) {
			size_t at = ((size_t)n * d->c + c) * d->inner;
			for (int p = 0; p < d->inner; p++) {
				sg += (double)dout[at + p] * in[at + p];
				sb += dout[at + p];
				if (din)
					din[at + p] += dout[at + p] * gamma[c];
			}
		}
		if (dgamma)
			dgamma[c] += (float)sg;
		if (dbeta && d->bias)
			dbeta[c] += (float)sb;
	}
}

/* ---- Eltwise ------------------------------------------------------------------------------ */

/* PROD: out = Π in_i.  SUM: out = Σ coeff_i · in_i.  MAX: out = max_i in_i with
 * Caffe's tie rule: between inputs 0 and 1 a tie goes to 1, from input 2 on a later
 * input must be strictly greater; argmax (may be NULL unless a backward follows)
 * records the winner. */
void eltwise_forward(float *out, int32_t *argmax, const float *const *in, int k, int64_t count,
		     enum eltwise_op op, const float *coeffs)
{
	for (int64_t i = 0; i < count; i++) {
		if (op == ELTWISE_PROD) {
			float v = in[0][i];
			for (int j = 1; j < k; j++)
				v *= in[j][i];
			out[i] = v;
		} else if (op == ELTWISE_SUM) {
			double v = 0.0;
			for (int j = 0; j < k; j++)
				v += (double)(coeffs ? coeffs[j] : 1.0f) * in[j][i];
			out[i] = (float)v;
		} else {
			int32_t arg = 0;
			if (k > 1)
				arg = in[0][i] > in[1][i] ? 0 : 1;
			float v = in[arg][i];
			for (int j = 2; j < k; j++)
				if (in[j][i] > v)
					v = in[j][i], arg = j;
			out[i] = v;
			if (argmax)
				argmax[i] = arg;
		}
	}
}

/* PROD: din_j += dout · Π_{i≠j} in_i (Caffe's stable_prod_grad, no division).
 * SUM:  din_j += coeff_j · dout.   MAX: din_j += dout where argmax = j.
 * din itself or any din[j] may be NULL. */
void eltwise_backward(float *const *din, const float *dout, const float *const *in,
		      const float *out, const int32_t *argmax, int k, int64_t count, enum eltwise_op op,
		      const float *coeffs)
{
	(void)out; /* Caffe's other PROD gradient, out / in_j, would need it; see above */
	if (!din)
		return;
	for (int j = 0; j < k; j++) {
		float *g = din[j];
		if (!g)
			continue;
		for (int64_t i = 0; i < count; i++) {
			if (op == ELTWISE_PROD) {
				float v = dout[i];
				for (int q = 0; q < k; q++)
					if (q != j)
						v *= in[q][i];
				g[i] += v;
			} else if (op == ELTWISE_SUM) {
				g[i] += (coeffs ? coeffs[j] : 1.0f) * dout[i];
			} else if (argmax[i] == j) {
				g[i] += dout[i];
			}
		}
	}
}

/* ---- Concat (axis 1) ------------------------------------------------------------------------ */

/* out (N, Σc_i, inner): for each n, input i's (c_i, inner) block follows input i-1's */
void concat_forward(float *out, const float *const *in, const int *c, int k, int n, int inner)
{
	int ctot = 0;
	for (int i = 0; i < k; i++)
		ctot += c[i];
	for (int b = 0; b < n; b++) {
		float *o = out + (size_t)b * ctot * inner; /* (Σc_i, inner) */
		for (int i = 0; i < k; i++) {
			const float *x = in[i] + (size_t)b * c[i] * inner; /* (c_i, inner) */
			for (size_t p = 0; p < (size_t)c[i] * inner; p++)
				o[p] = x[p];
			o += (size_t)c[i] * inner;
		}
	}
}

void concat_backward(float *const *din, const float *dout, const int *c, int k, int n, int inner)
{
	if (!din)
		return;
	int ctot = 0;
	for (int i = 0; i < k; i++)
		ctot += c[i];
	for (int b = 0; b < n; b++) {
		const float *go = dout + (size_t)b * ctot * inner; /* (Σc_i, inner) */
		for (int i = 0; i < k; i++) {
			if (din[i]) {
				float *g = din[i] + (size_t)b * c[i] * inner; /* (c_i, inner) */
				for (size_t p = 0; p < (size_t)c[i] * inner; p++)
					g[p] += go[p];
			}
			go += (size_t)c[i] * inner;
		}
	}
}

/* ---- softmax over axis 1 --------------------------------------------------------------------- */

/* out[n,c,p] = e^(in[n,c,p] - max_c in) / Σ_c e^(in[n,c,p] - max_c in) */
void softmax_forward(float *out, const float *in, int n, int c, int inner)
{
	for (int b = 0; b < n; b++)
		for (int p = 0; p < inner; p++) {
			const float *x = in + (size_t)b * c * inner + p; /* (C) with stride inner */
			float *y = out + (size_t)b * c * inner + p;
			float mx = x[0];
			for (int j = 1; j < c; j++)
				if (x[(size_t)j * inner] > mx)
					mx = x[(size_t)j * inner];
			double sum = 0.0;
			for (int j = 0; j < c; j++)
				sum += exp((double)x[(size_t)j * inner] - mx);
			for (int j = 0; j < c; j++)
				y[(size_t)j * inner] = (float)(exp((double)x[(size_t)j * inner] - mx) / sum);
		}
}

/* din[c] += out[c] · (dout[c] - Σ_j dout[j]·out[j]) */
void softmax_backward(float *din, const float *dout, const float *out, int n, int c, int inner)
{
	if (!din)
		return;
	for (int b = 0; b < n; b++)
		for (int p = 0; p < inner; p++) {
			size_t at = (size_t)b * c * inner + p;
			double dot = 0.0;
			for (int j = 0; j < c; j++)
				dot += (double)dout[at + (size_t)j * inner] * out[at + (size_t)j * inner];
			for (int j = 0; j < c; j++) {
				size_t q = at + (size_t)j * inner;
				din[q] += (float)(out[q] * (dout[q] - dot));
			}
		}
}

/* ---- SoftmaxWithLoss ---------------------------------------------------------------------------- */

/* A label counts when it is not ignore_label and lies in [0, C).  Caffe does not
 * check the range (it reads out of bounds); an out-of-range label is skipped here
 * like an ignored one, and the graph is where such data should be rejected. */
static int label_counts(int label, int c, int ignore_label)
{
	return !(ignore_label >= 0 && label == ignore_label) && label >= 0 && label < c;
}

double loss_normalizer(enum loss_norm norm, int n, int inner, int valid)
{
	double v = norm == LOSS_NORM_FULL ? (double)n * inner
		 : norm == LOSS_NORM_VALID ? valid
		 : norm == LOSS_NORM_BATCH_SIZE ? n
					      : 1;
	return v > 1 ? v : 1;
}

/* loss = -Σ_valid log(max(prob[label], FLT_MIN)) / loss_normalizer(...) */
float softmax_loss_forward(float *prob, const float *in, const float *labels, int n, int c,
			   int inner, int ignore_label, enum loss_norm norm)
{
	softmax_forward(prob, in, n, c, inner);
	double loss = 0.0;
	int valid = 0;
	for (int b = 0; b < n; b++)
		for (int p = 0; p < inner; p++) {
			int label = (int)labels[(size_t)b * inner + p];
			if (!label_counts(label, c, ignore_label))
				continue;
			float pr = prob[((size_t)b * c + label) * inner + p];
			loss -= log(pr > FLT_MIN ? pr : FLT_MIN);
			valid++;
		}
	return (float)(loss / loss_normalizer(norm, n, inner, valid));
}

/* din[n,c,p] += loss_weight · (prob[n,c,p] - [c = label]) / normaliser; positions
 * whose label does not count get nothing. */
void softmax_loss_backward(float *din, const float *prob, const float *labels, int n, int c,
			   int inner, int ignore_label, enum loss_norm norm, float loss_weight)
{
	if (!din)
		return;
	int valid = 0;
	for (int i = 0; i < n * inner; i++)
		valid += label_counts((int)labels[i], c, ignore_label);
	double w = (double)loss_weight / loss_normalizer(norm, n, inner, valid);
	for (int b = 0; b < n; b++)
		for (int p = 0; p < inner; p++) {
			int label = (int)labels[(size_t)b * inner + p];
			if (!label_counts(label, c, ignore_label))
				continue;
			for (int j = 0; j < c; j++) {
				size_t q = ((size_t)b * c + j) * inner + p;
				din[q] += (float)(w * (prob[q] - (j == label ? 1.0 : 0.0)));
			}
		}
}

/* ---- EuclideanLoss -------------------------------------------------------------------------------- */

float euclidean_loss_forward(float *diff, const float *a, const float *b, int n, int64_t count)
{
	double s = 0;
	for (int64_t i = 0; i < count; i++) {
		diff[i] = a[i] - b[i];
		s += (double)diff[i] * diff[i];
	}
	return (float)(s / (2.0 * (n > 0 ? n : 1)));
}

void euclidean_loss_backward(float *da, float *db, const float *diff, int n, int64_t count, float loss_weight)
{
	float w = loss_weight / (float)(n > 0 ? n : 1);
	for (int64_t i = 0; i < count; i++) {
		if (da)
			da[i] += w * diff[i];
		if (db)
			db[i] -= w * diff[i];
	}
}

/* ---- Crop -------------------------------------------------------------------------------------------- */

/* The shape as four axes, leading ones 1 (offset 0), for one loop nest. */
static void crop_4d(const struct crop_desc *d, int in[4], int out[4], int off[4])
{
	int lead = 4 - d->ndim;
	for (int a = 0; a < 4; a++) {
		int k = a - lead;
		in[a] = k < 0 ? 1 : d->in[k];
		out[a] = k < 0 ? 1 : d->out[k];
		off[a] = k < 0 ? 0 : d->off[k];
	}
}

/* Every output value against its input value: forward copies in into out,
 * backward adds out (the top's gradient) into in (the bottom's). */
static void crop_walk(float *out, float *in, const struct crop_desc *d, int backward)
{
	int ni[4], no[4], off[4];
	crop_4d(d, ni, no, off);
	size_t o = 0;
	for (int a0 = 0; a0 < no[0]; a0++)
		for (int a1 = 0; a1 < no[1]; a1++)
			for (int a2 = 0; a2 < no[2]; a2++) {
				float *row = in + (((size_t)(a0 + off[0]) * ni[1] + (size_t)(a1 + off[1])) * ni[2] +
						   (size_t)(a2 + off[2])) * ni[3] + off[3];
				for (int a3 = 0; a3 < no[3]; a3++, o++)
					if (backward)
						row[a3] += out[o];
					else
						out[o] = row[a3];
			}
}

void crop_forward(float *out, const float *in, const struct crop_desc *d)
{
	crop_walk(out, (float *)in, d, 0); /* only read */
}

void crop_backward(float *din, const float *dout, const struct crop_desc *d)
{
	if (din)
		crop_walk((float *)dout, din, d, 1); /* dout only read */
}

/* ---- Accuracy ------------------------------------------------------------------------------------ */

/* A position is correct when fewer than top_k OTHER classes score >= its label's
 * score: ties count against the label, as Caffe since late 2017 counts them
 * (num_better_predictions with >=), so a network that outputs a constant scores 0,
 * not 1.  Ignored positions are not counted; no counted position gives 0.  A label
 * outside [0, C) counts as a miss. */
float accuracy_forward(const float *in, const float *labels, int n, int c, int inner, int top_k,
		       int ignore_label)
{
	int hits = 0, count = 0;
	for (int b = 0; b < n; b++)
		for (int p = 0; p < inner; p++) {
			int label = (int)labels[(size_t)b * inner + p];
			if (ignore_label >= 0 && label == ignore_label)
				continue;
			count++;
			if (label < 0 || label >= c)
				continue;
			const float *x = in + (size_t)b * c * inner + p; /* (C) with stride inner */
			float s = x[(size_t)label * inner];
			int better = 0;
			for (int j = 0; j < c; j++)
				if (j != label && x[(size_t)j * inner] >= s)
					better++;
			if (better < top_k)
				hits++;
		}
	return count ? (float)hits / (float)count : 0.0f;
}
