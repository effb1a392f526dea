/* net.h — a network description and its instantiation for one stage.
 *
 * Two steps, as DIGITS does them with Caffe:
 *
 *   net_parse()        prototxt text -> struct net: Caffe's NetParameter, the subset
 *                      deepdesk trains (the layer types of enum net_layer_type, each
 *                      with its own small param struct).  Unknown layer types, unknown
 *                      fields and out-of-range values are errors that name the layer,
 *                      the field and its LINE:COL.  Nothing here depends on a dataset.
 *
 *   net_instantiate()  struct net + a stage (train, val, deploy) + the input (image
 *                      shape, class count) -> struct net_graph: the layers of that
 *                      stage in order, params resolved, every blob with its shape,
 *                      every layer's parameter blobs and counts.  This applies
 *                      Caffe's include/exclude rules for DIGITS' three states
 *                      (train = TRAIN + stage "train", val = TEST + "val", deploy =
 *                      TEST + "deploy") and DIGITS' clean-up: Input layers go (the
 *                      dataset feeds "data" and "label"), an InnerProduct without
 *                      num_output gets the class count, an Accuracy whose top_k
 *                      exceeds the class count goes, a missing train/val data layer
 *                      is added (batch 16), the deploy net reads a 1xCxHxW "data" and
 *                      must contain a Softmax.  Then the graph checks (every bottom
 *                      made by an earlier layer, no blob made twice except in place,
 *                      no cycles) and shape inference with Caffe's formulas.
 *
 * Errors: DD_EINVAL with one sentence.  When the error is at a place in the text
 * the sentence starts "LINE:COL: " (net_err_pos() reads it back for an editor), and
 * every error about a layer names it: "14:5: layer 'conv1': unknown field
 * 'kernal_size' in convolution_param".
 *
 * Ownership: a struct net owns all it points to (one arena) until net_free().  A
 * struct net_graph owns its arrays but BORROWS names and arrays from the struct
 * net it was made from: free the graph first (net_graph_free), then the net. */
#ifndef DD_NET_H
#define DD_NET_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "../common/err.h"

struct cJSON;
struct ptx_doc;

#define NET_MAX_DIMS 4        /* axes of a blob: N, C, H, W */
#define NET_MAX_LAYERS 10000  /* in one description */

/* ---- stages ---------------------------------------------------------------- */

enum net_stage { NET_STAGE_TRAIN, NET_STAGE_VAL, NET_STAGE_DEPLOY };
enum net_phase { NET_PHASE_TRAIN, NET_PHASE_TEST };

/* "train", "val", "deploy" */
const char *net_stage_name(enum net_stage stage);
/* The inverse; DD_OK, or DD_EINVAL (with a sentence) for anything else. */
int net_stage_parse(const char *s, enum net_stage *out, struct dd_err *err);

/* ---- layers and their params ------------------------------------------------ */

enum net_layer_type {
	NET_DATA,         /* Data: tops data (N,C,H,W) [, label (N)] from the dataset */
	NET_INPUT,        /* Input: tops of given shapes (deploy files) */
	NET_CONVOLUTION,
	NET_POOLING,
	NET_INNER_PRODUCT,
	NET_RELU,
	NET_SIGMOID,
	NET_TANH,
	NET_POWER,
	NET_DROPOUT,
	NET_LRN,
	NET_BATCH_NORM,
	NET_SCALE,
	NET_ELTWISE,
	NET_CONCAT,
	NET_FLATTEN,
	NET_SOFTMAX,
	NET_SOFTMAX_LOSS, /* SoftmaxWithLoss */
	NET_ACCURACY,
	NET_EUCLIDEAN_LOSS, /* EuclideanLoss: Σ(a−b)²/(2N) */
	NET_CROP,           /* Crop: bottom 0 cut to bottom 1's shape from axis on */
	NET_DECONVOLUTION, /* Deconvolution: convolution_param, weights (C_in, C_out/group, kh, kw) */
	NET_LAYER_TYPE_COUNT
};
/* Caffe's type string: "Convolution", "SoftmaxWithLoss", ... */
const char *net_layer_type_name(enum net_layer_type type);

/* What a layer type is, for the code that builds and runs one: networks/net.c holds
 * one row per type (its name, bottom and top counts, parameter messages with their
 * fields' bounds and defaults, shape rule); this is the part the rest may read. */
enum net_reads { NET_READS_NO, NET_READS_YES, NET_READS_IN_PLACE };
struct net_layer_type_info {
	const char *name;           /* Caffe's type string */
	int bottom_min, bottom_max; /* how many bottoms it takes */
	int top_min, top_max;       /* how many tops it makes */
	int elementwise;            /* top 0 has bottom 0's shape, value by value: it may work in place */
	int reads_bottom;           /* its backward reads bottom 0's values */
	enum net_reads reads_top;   /* its backward reads top 0's: no, yes, or only in place (ReLU) */
	size_t filler[2];           /* offsetof(struct net_layer, ...) of the filler of parameter
				     * blob 0, and of the later ones; 0: none (they start at zero) */
};
/* The row of type; NULL for a value outside the enum.  Static, never freed. */
const struct net_layer_type_info *net_layer_type_info(enum net_layer_type type);

enum net_filler_type {
	NET_FILLER_CONSTANT,
	NET_FILLER_UNIFORM,
	NET_FILLER_GAUSSIAN,
	NET_FILLER_XAVIER,
	NET_FILLER_MSRA,
	NET_FILLER_BILINEAR, /* Caffe's, for a Deconvolution that upsamples (graph.c) */
};
enum net_variance_norm { NET_FAN_IN, NET_FAN_OUT, NET_FAN_AVERAGE };

/* Caffe's FillerParameter; defaults constant 0, uniform [0,1], gaussian (0,1), FAN_IN. */
struct net_filler {
	enum net_filler_type type;
	float value;                 /* constant */
	float min, max;              /* uniform */
	float mean, std;             /* gaussian */
	enum net_variance_norm variance_norm; /* xavier, msra */
};

struct net_shape {
	int ndim; /* 0 for a scalar (a loss, an accuracy) */
	int64_t dim[NET_MAX_DIMS];
};

struct net_conv_param {
	int num_output;
	int kh, kw, sh, sw, ph, pw, dh, dw; /* kernel, stride (1), pad (0), dilation (1) */
	int group;                          /* 1 */
	int bias_term;                      /* 1 */
	struct net_filler weight_filler, bias_filler;
};

enum net_pool_method { NET_POOL_MAX, NET_POOL_AVE };
struct net_pool_param {
	enum net_pool_method pool; /* MAX */
	int kh, kw, sh, sw, ph, pw; /* global: kernel = the input's H, W once instantiated */
	int global;
};

struct net_ip_param {
	int num_output; /* 0 in a description: unset, DIGITS gives it the class count */
	int bias_term;  /* 1 */
	struct net_filler weight_filler, bias_filler;
};

struct net_relu_param { float negative_slope; };              /* 0 */
struct net_power_param { float power, scale, shift; };       /* (shift + scale*x)^power: 1, 1, 0 */
struct net_dropout_param { float ratio; };                    /* 0.5 */
struct net_lrn_param { int local_size; float alpha, beta, k; }; /* 5, 1, 0.75, 1; across channels */

struct net_bn_param {
	int use_global_stats; /* -1 unset: by phase, as Caffe (a graph resolves it: train 0, else 1) */
	float moving_average_fraction; /* 0.999 */
	float eps;                     /* 1e-5 */
};

struct net_scale_param {
	int bias_term;                    /* 0 */
	struct net_filler filler;         /* of the scale; Caffe's default constant 1 */
	struct net_filler bias_filler;    /* constant 0 */
};

enum net_eltwise_op { NET_ELTWISE_PROD, NET_ELTWISE_SUM, NET_ELTWISE_MAX };
struct net_eltwise_param {
	enum net_eltwise_op op; /* SUM */
	const float *coeff;     /* SUM only; NULL: all 1; else one per bottom */
	int ncoeff;
};

struct net_softmax_param { int axis; }; /* 1 (the only axis supported) */

/* Caffe's LossParameter.NormalizationMode: what the summed loss is divided by */
enum net_loss_norm {
	NET_NORM_FULL,       /* every position, ignored ones too: N * H * W */
	NET_NORM_VALID,      /* the positions not ignored (the default) */
	NET_NORM_BATCH_SIZE, /* N */
	NET_NORM_NONE        /* 1 */
};

struct net_loss_param {
	int axis;              /* softmax axis: 1 */
	int has_ignore_label;
	int ignore_label;      /* labels equal to it are skipped */
	enum net_loss_norm normalization; /* VALID; the legacy normalize gives it when it is not given */
	int has_normalization;
	int normalize;         /* legacy: true = VALID, false = BATCH_SIZE */
	int has_normalize;
};

/* Caffe's CropParameter: bottom 0 cut to bottom 1's shape on every axis >= axis */
struct net_crop_param {
	int axis;                        /* 2; negative counts from the end */
	int64_t offset[NET_MAX_DIMS];    /* none: 0; one: for every cropped axis; else one per axis */
	int noffset;                     /* once instantiated (a net_node's copy): axis is >= 0 and
					  * offset[] has one value per axis of bottom 0, 0 before axis */
};

struct net_accuracy_param {
	int top_k; /* 1 */
	int has_ignore_label;
	int ignore_label;
};

/* Data layer: data_param and transform_param together. */
struct net_data_param {
	int batch_size;           /* 0: unset */
	int crop_size;            /* 0: no crop */
	int mirror;               /* 0 */
	float scale;              /* 1 */
	const char *mean_file;    /* NULL: none */
	const float *mean_value;  /* per channel, or one for all; NULL: none */
	int nmean_value;
};

struct net_input_param {
	const struct net_shape *shape; /* one per top, or one for all */
	int nshape;
};

/* Caffe's NetStateRule: a rule matches a state when every condition given holds. */
struct net_rule {
	int phase;                 /* -1: any, else enum net_phase */
	int min_level, max_level;  /* INT32_MIN / INT32_MAX when unset; deepdesk's level is 0 */
	const char *const *stage;  /* all of these stages are required */
	int nstage;
	const char *const *not_stage; /* none of these may be present */
	int nnot_stage;
};

struct net_param_spec { float lr_mult, decay_mult; }; /* 1, 1 */

/* A layer: a common header, then the params of its type (the one union member its
 * type names; the others are zero). */
struct net_layer {
	const char *name;            /* may be "" (Caffe allows it); see net_layer_label */
	enum net_layer_type type;
	int line, col;               /* of `layer` in the text; 0 for a layer deepdesk added */
	const char *const *bottom;
	int nbottom;
	const char *const *top;
	int ntop;
	const struct net_rule *include;
	int ninclude;
	const struct net_rule *exclude; /* Caffe: include or exclude, not both */
	int nexclude;
	const struct net_param_spec *param; /* one per parameter blob, in order; may be fewer */
	int nparam;
	const float *loss_weight;    /* NULL, or one per top */
	int nloss_weight;
	union {
		struct net_data_param data;       /* NET_DATA */
		struct net_input_param input;     /* NET_INPUT */
		struct net_conv_param conv;       /* NET_CONVOLUTION, NET_DECONVOLUTION */
		struct net_pool_param pool;       /* NET_POOLING */
		struct net_ip_param ip;           /* NET_INNER_PRODUCT */
		struct net_relu_param relu;       /* NET_RELU */
		struct net_power_param power;     /* NET_POWER */
		struct net_dropout_param dropout; /* NET_DROPOUT */
		struct net_lrn_param lrn;         /* NET_LRN */
		struct net_bn_param bn;           /* NET_BATCH_NORM */
		struct net_scale_param scale;     /* NET_SCALE */
		struct net_eltwise_param eltwise; /* NET_ELTWISE */
		struct net_softmax_param softmax; /* NET_SOFTMAX */
		struct net_loss_param loss;       /* NET_SOFTMAX_LOSS */
		struct net_accuracy_param accuracy; /* NET_ACCURACY */
		struct net_crop_param crop;       /* NET_CROP */
	};                                    /* Sigmoid, TanH, Concat (axis 1), Flatten, EuclideanLoss: none */
};

struct net {
	const char *name;                 /* "" when the description has none */
	const struct net_layer *layer;
	int nlayer;
	/* Caffe's legacy top-level inputs: input: "data" with input_shape or input_dim */
	const char *const *input;
	int ninput;
	const struct net_shape *input_shape; /* one per input when given */
	int ninput_shape;
	struct ptx_doc *doc_;             /* private: the arena all of this lives in */
};

/* Parse a prototxt.  On success *out is the description; caller frees with
 * net_free().  On failure *out is NULL and err holds the first error. */
int net_parse(const char *text, size_t len, struct net **out, struct dd_err *err);
void net_free(struct net *net);

/* 'conv1', or "#3" for a layer without a name: how messages name a layer. */
void net_layer_label(const struct net_layer *l, int index, char *buf, size_t n);

/* ---- instantiation ------------------------------------------------------------ */

/* What the dataset feeds in.  Zero means "not given". */
struct net_input {
	int n;       /* batch; 0: the data layer's batch_size, else 16 (DIGITS); deploy: 1 */
	int c, h, w; /* the dataset's image shape, before any crop */
	int crop;    /* 0: the data layer's crop_size (clamped to the image), else this,
		      * which must fit the image (DIGITS' form field) */
	int classes; /* for InnerProducts without num_output and Accuracy's top_k */
};

/* The input shape a description declares itself (an Input layer's or the legacy
 * input_shape/input_dim of its first input): c, h, w and n; classes and crop stay
 * as they are.  DD_OK, or DD_ENOENT when it declares none. */
int net_declared_input(const struct net *def, struct net_input *in);

struct net_blob {
	const char *name; /* borrowed from the description */
	struct net_shape shape;
	int64_t count;    /* elements (1 for a scalar) */
	int producer;     /* index of the node that creates it */
};

struct net_param_blob {
	const char *role; /* "weights", "bias", "scale", "mean", "variance", "factor" */
	struct net_shape shape;
	int64_t count;
	float lr_mult, decay_mult;
	int learned;      /* updated by the solver: lr_mult > 0 and not BatchNorm's statistics */
};

/* One layer of an instantiated graph. */
struct net_node {
	struct net_layer l;  /* the layer with params resolved (InnerProduct num_output,
			      * global pooling's kernel, BatchNorm's use_global_stats, the
			      * data layer's batch and crop);
			      * a copy whose arrays and names are borrowed */
	int index;           /* in the description's layer[]; -1 for a layer deepdesk added */
	const int *bottom;   /* l.nbottom blob indices */
	const int *top;      /* l.ntop blob indices */
	int in_place;        /* top[0] == bottom[0] (ReLU and other element-wise layers) */
	struct net_param_blob param[3];
	int nparam;
	int64_t nparams;     /* elements in param[] */
	float loss_weight;   /* of top[0]: 1 for SoftmaxWithLoss unless given, else 0 */
};

struct net_graph {
	enum net_stage stage;
	const char *name;          /* the description's */
	struct net_input in;       /* resolved: batch, crop (0: none), classes */
	struct net_node *node;     /* in execution order; node[0] makes the data */
	int nnode;
	struct net_blob *blob;
	int nblob;
	int64_t params;            /* elements of all parameter blobs (what a snapshot stores) */
	int64_t learned;           /* of those, the ones the solver updates */
	int64_t activations;       /* elements of all blobs (in-place layers share theirs) */
	int *io_;                  /* private: node bottom/top indices */
	void *added_;              /* private: the layer deepdesk added, if any */
};

/* Instantiate def for one stage with the given input.  On success *out is the
 * graph; caller frees with net_graph_free(), before net_free(def).  On failure *out
 * is NULL and err names the layer ("LINE:COL: layer 'pool2': ..."). */
int net_instantiate(const struct net *def, enum net_stage stage, const struct net_input *in,
		    struct net_graph **out, struct dd_err *err);
void net_graph_free(struct net_graph *g);

/* The check table: one line per layer (name, type, top shapes, parameter count)
 * and a total line.  Returns DD_OK or DD_EIO. */
int net_graph_print(const struct net_graph *g, FILE *f);

/* The same as JSON: {"name","stage","input":{n,c,h,w,crop,classes},"layers":[{name,
 * type,line,col,bottoms,tops:[{name,shape}],params:[{role,shape,count,learned}],
 * param_count,in_place}],"params","learned","activations"}.  Caller frees with
 * cJSON_Delete(); NULL when out of memory. */
struct cJSON *net_graph_json(const struct net_graph *g);

/* The graph as Caffe prototxt (networks/netprint.c): its stage's layers with their
 * params resolved, the input as Caffe's deploy files declare it (input: "data" and
 * input_shape), nothing only training reads (fillers, lr_mult, stage rules).  For a
 * deploy graph that is a deploy.prototxt whose deploy stage instantiates to the same
 * layers and parameter blobs.  Caller frees with free(); NULL when out of memory. */
char *net_graph_prototxt(const struct net_graph *g);

/* When err's message starts "LINE:COL: ", set *line and *col and return 1; else 0. */
int net_err_pos(const struct dd_err *err, int *line, int *col);

/* ---- the standard networks ------------------------------------------------------ */

struct net_standard {
	const char *name;    /* "lenet", "alexnet", "googlenet", "resnet_small" */
	const char *title;   /* "LeNet" */
	const char *about;   /* one line for a picker */
	int c, h, w;         /* the dataset image shape it is meant for */
	int classes;         /* a class count for checking it without a dataset */
	const char *text;    /* the prototxt (built in from networks/standard/NAME.prototxt) */
};

/* The table, terminated by an entry whose name is NULL; static, never freed. */
extern const struct net_standard net_standards[];

/* The standard network called name, or NULL. */
const struct net_standard *net_standard_find(const char *name);
/* Its prototxt text, or NULL: static, never freed. */
const char *net_standard_text(const char *name);

#endif
