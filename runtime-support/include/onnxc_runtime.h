/* onnxc runtime: types and helpers shared by every onnxc-compiled model.
 * Link the model's object file with libonnxc_runtime.a (and -lm -lpthread -ldl on Linux). */
#ifndef ONNXC_RUNTIME_H
#define ONNXC_RUNTIME_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Return codes of NAME_run (after an error the outputs' contents are unspecified). */
#define ONNXC_OK 0
#define ONNXC_ERR_INDEX 1 /* an index input (Gather, Scatter, ...) is out of range */
#define ONNXC_ERR_ALLOC 2 /* workspace was NULL and allocating one failed */
#define ONNXC_ERR_SHAPE 3 /* input values (or NAME_run_shaped's dims) imply a shape the model
                           does not allow */
#define ONNXC_ERR_VALUE 4 /* an input value is invalid for the model */
#define ONNXC_ERR_PARAMS 5 /* a kernel's compiled parameters are invalid: the object is corrupt or
                              was compiled by a mismatched onnxc */
#define ONNXC_ERR_WORKSPACE 6 /* NAME_run_threaded: workspace_bytes is below
                                 NAME_workspace_size_threads(workers); or a NULL workspace for a
                                 model whose string outputs live in it (ONNXC_TENSOR_WORKSPACE) */
#define ONNXC_ERR_CAPACITY 7 /* NAME_run_shaped: an output's capacity is below its size (every
                                output's dims were written; nothing ran, unless an output is
                                ONNXC_TENSOR_DYNAMIC: then the run's outputs are unspecified) */
#define ONNXC_ERR_DYNAMIC 8 /* NAME_run / NAME_run_threaded of a model with ONNXC_TENSOR_DYNAMIC
                               outputs: call NAME_run_shaped, which returns their dims */
#define ONNXC_ERR_STRINGS 9 /* the strings the run makes (StringNormalizer, StringConcat,
                               StringSplit) exceed the space compiled for them: compile with a
                               larger onnxc --string-bytes */

/* Element types: the ONNX TensorProto.DataType codes. */
typedef enum onnxc_dtype {
    ONNXC_FLOAT = 1,
    ONNXC_UINT8 = 2,
    ONNXC_INT8 = 3,
    ONNXC_UINT16 = 4,
    ONNXC_INT16 = 5,
    ONNXC_INT32 = 6,
    ONNXC_INT64 = 7,
    ONNXC_STRING = 8, /* const char *: NUL-terminated UTF-8 (inputs: the caller's; outputs:
                         the model's read-only data, valid while the program runs) */
    ONNXC_BOOL = 9, /* one byte, 0 or 1 */
    ONNXC_FLOAT16 = 10, /* IEEE half, as uint16_t bits */
    ONNXC_DOUBLE = 11,
    ONNXC_UINT32 = 12,
    ONNXC_UINT64 = 13,
    ONNXC_BFLOAT16 = 16, /* as uint16_t bits */
    /* float8 and float4: one code per byte (float4 in the low 4 bits) */
    ONNXC_FLOAT8E4M3FN = 17,
    ONNXC_FLOAT8E4M3FNUZ = 18,
    ONNXC_FLOAT8E5M2 = 19,
    ONNXC_FLOAT8E5M2FNUZ = 20,
    /* 4- and 2-bit types: packed (2 or 4 per byte, the first element in the lowest bits,
       the unused high bits of the last byte 0), as ONNX and onnxruntime store them;
       size_bytes counts the packed bytes */
    ONNXC_UINT4 = 21,
    ONNXC_INT4 = 22,
    ONNXC_FLOAT4E2M1 = 23, /* packed like UINT4 */
    ONNXC_FLOAT8E8M0 = 24, /* one code per byte: 2^(code - 127), 0xFF NaN */
    ONNXC_UINT2 = 25,
    ONNXC_INT2 = 26
} onnxc_dtype;

typedef struct onnxc_tensor_info {
    const char *name;
    int32_t dtype; /* onnxc_dtype */
    int32_t rank;
    const int64_t *shape;
    uint64_t size_bytes;
    /* 0 for a tensor. An output ai.onnx.ml ZipMap makes (a sequence of maps, one per row)
       is passed as its [rows, num_keys] float tensor; key_type is the ONNX type of the maps'
       keys (ONNXC_INT64 or ONNXC_STRING) and keys points to num_keys int64_t or const char *:
       row i is the map { keys[j]: value[i][j] }. A map input (ONNXC_TENSOR_MAP): the type of
       its keys, num_keys 0 and keys NULL. */
    int32_t key_type;
    int32_t num_keys;
    const void *keys;
    uint32_t flags; /* ONNXC_TENSOR_* bits */
    uint32_t reserved;
    /* With ONNXC_TENSOR_RUN_DIMS: per dim ten int64_t {dim, mul, add, pre, div, dim2, mul2,
       pre2, div2, prod}: with s = (run-time dim `dim` + pre) / div and t = (run-time dim
       `dim2` + pre2) / div2, the divisions rounding down (a strided window's output), and t
       0 where dim2 is -1, the dim is mul*s + mul2*t + prod*s*t + add (a mask over
       past + seq, a detector's anchors over h * w), or shape's value where dim is -1;
       inputs' have pre 0 and div 1. shape and size_bytes are then the tensor's at the
       run-time dims' bounds. */
    const int64_t *run_dims;
} onnxc_tensor_info;

/* onnxc_tensor_info.flags: dim 0 is a run-time batch. shape[0] and size_bytes are one item's
   (shape[0] is 1); NAME_run_shaped takes any number of items. */
#define ONNXC_TENSOR_BATCHED 1u
/* onnxc_tensor_info.flags: an output whose dims depend on the values the run computes (the
   rows NonZero, Compress, NonMaxSuppression or Unique select, a TopK, Slice or Loop sized at
   run time). shape and size_bytes are upper bounds;
   NAME_run_shaped writes the actual dims, and returns ONNXC_ERR_CAPACITY (the dims written)
   after the run when the output's capacity is below its actual size. */
#define ONNXC_TENSOR_DYNAMIC 2u
/* onnxc_tensor_info.flags: a string output whose strings the run may make (StringNormalizer,
   StringConcat, StringSplit) in the workspace: they stay valid until the workspace is used
   again or freed, so the model needs the caller's workspace (NULL: ONNXC_ERR_WORKSPACE). */
#define ONNXC_TENSOR_WORKSPACE 4u
/* onnxc_tensor_info.flags: an input of type map(key_type, dtype), which the ai.onnx.ml
   DictVectorizer and CastMap read: its data pointer points to an onnxc_map (rank 0,
   size_bytes sizeof(onnxc_map)). */
#define ONNXC_TENSOR_MAP 8u
/* onnxc_tensor_info.flags: some dims follow the dims the model takes at run time
   (run_dims); only NAME_run_shaped runs such a model. */
#define ONNXC_TENSOR_RUN_DIMS 16u

/* A map input: size entries, keys[i] mapping to values[i]. keys: int64_t or const char *
   (NUL-terminated UTF-8, NULL reads as ""), values: float, double, int64_t or const char *,
   as the input's key_type and dtype say; the caller's, read during the call. A negative
   size, or NULL arrays with entries, is ONNXC_ERR_VALUE. Of keys given twice, the last
   counts. */
typedef struct onnxc_map {
    int64_t size;
    const void *keys;
    const void *values;
} onnxc_map;

/* A tensor with its dims, as NAME_run_shaped takes them. */
typedef struct onnxc_tensor {
    void *data;       /* row-major elements: read for inputs, written for outputs */
    int64_t *dims;    /* rank dims: read for inputs, written for outputs (may be NULL there) */
    size_t rank;      /* must equal the model's rank for the tensor */
    size_t capacity;  /* outputs: bytes available at data; ignored for inputs */
} onnxc_tensor;

typedef struct onnxc_model_info {
    const char *name;
    uint32_t num_inputs;
    uint32_t num_outputs;
    const onnxc_tensor_info *inputs;
    const onnxc_tensor_info *outputs;
    uint64_t workspace_size;       /* bytes NAME_run needs */
    uint64_t workspace_per_worker; /* bytes each further worker of NAME_run_threaded adds */
    /* Dims the model takes at run time (NAME_run_shaped finds them in the inputs' dims):
       how many, their largest values, their names, their least values (below them the
       model is invalid, e.g. a window wider than the dim) and the multiples they are taken
       in (a dim taken in multiples of 32, as an FPN that adds upsamplings to its laterals
       needs, is 32 times its value: its least and largest values count multiples). */
    uint64_t num_dims;
    const int64_t *dim_bounds;
    const char *const *dim_names;
    const int64_t *dim_least;
    const int64_t *dim_multiples;
    /* The most items a run-time batch may hold (compiled with --dim N=..B for a leading batch
       dim N); 0 when any number may. NAME_run_shaped returns ONNXC_ERR_SHAPE for more. */
    int64_t batch_bound;
} onnxc_model_info;

/* ---- Threads ------------------------------------------------------------------------------
 * NAME_run_threaded runs a model on threads the caller provides: a pool of the application's
 * (OpenMP, rayon, its own) behind a parallel_for callback, or the runtime's (onnxc_pool_*).
 * Nothing starts threads behind the caller's back, and there is no global state.
 *
 * parallel_for(pool, n, fn, ctx) must run fn(ctx, task, worker) once for every task < n and
 * return when all have returned. `worker` identifies the running thread: worker < workers, and
 * two tasks of one parallel_for call that run at the same time never share a worker (each has
 * its own scratch in the workspace). Tasks may run in any order, on any thread, including
 * the caller's. For example, with OpenMP:
 *
 *     static void omp_for(void *pool, size_t n, onnxc_task_fn fn, void *ctx) {
 *         (void)pool;
 *         #pragma omp parallel for schedule(dynamic)
 *         for (size_t i = 0; i < n; i++) fn(ctx, i, (size_t)omp_get_thread_num());
 *     }
 *     onnxc_threads t = { omp_for, NULL, (size_t)omp_get_max_threads() };
 *
 * Results are bit-identical for every thread count: work is split by output elements only,
 * each computed by the same operations in the same order. */
typedef void (*onnxc_task_fn)(void *ctx, size_t task, size_t worker);
typedef struct onnxc_threads {
    void (*parallel_for)(void *pool, size_t n, onnxc_task_fn fn, void *ctx);
    void *pool;
    size_t workers; /* the most tasks that run at once; 1 (or parallel_for NULL): sequential */
} onnxc_threads;

#define ONNXC_MAX_WORKERS 1024 /* workers beyond this are not used */

/* The runtime's pool: `threads` threads counting the caller's (threads - 1 are started; they
   spin briefly after each call, then sleep). NULL when threads is 0 or a thread cannot start.
   One pool can serve concurrent NAME_run_threaded calls (each from its own thread, with its
   own workspace): a call that finds the pool busy runs on its own thread. */
typedef struct onnxc_pool onnxc_pool;
onnxc_pool *onnxc_pool_create(size_t threads);
void onnxc_pool_destroy(onnxc_pool *pool); /* no call may be running on it */
/* The pool's callback table (workers = its thread count), valid while the pool lives. */
onnxc_threads onnxc_pool_threads(const onnxc_pool *pool);

/* A static, human-readable description of a return code. */
const char *onnxc_strerror(int code);

/* A 64-byte aligned workspace of `size` bytes (NULL on failure); free with onnxc_workspace_free. */
void *onnxc_workspace_alloc(uint64_t size);
void onnxc_workspace_free(void *workspace);

#ifdef __cplusplus
}
#endif

#endif /* ONNXC_RUNTIME_H */
