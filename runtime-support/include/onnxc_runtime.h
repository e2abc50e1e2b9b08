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
#define ONNXC_ERR_SHAPE 3 /* input values imply a shape the model does not allow */
#define ONNXC_ERR_VALUE 4 /* an input value is invalid for the model */
#define ONNXC_ERR_PARAMS 5 /* a kernel's compiled parameters are invalid: the object is corrupt or
                              was compiled by a mismatched onnxc */

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
    ONNXC_BFLOAT16 = 16 /* as uint16_t bits */
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
       row i is the map { keys[j]: value[i][j] }. */
    int32_t key_type;
    int32_t num_keys;
    const void *keys;
} onnxc_tensor_info;

typedef struct onnxc_model_info {
    const char *name;
    uint32_t num_inputs;
    uint32_t num_outputs;
    const onnxc_tensor_info *inputs;
    const onnxc_tensor_info *outputs;
    uint64_t workspace_size;
} onnxc_model_info;

/* A static, human-readable description of a return code. */
const char *onnxc_strerror(int code);

/* A 64-byte aligned workspace of `size` bytes (NULL on failure); free with onnxc_workspace_free. */
void *onnxc_workspace_alloc(uint64_t size);
void onnxc_workspace_free(void *workspace);

#ifdef __cplusplus
}
#endif

#endif /* ONNXC_RUNTIME_H */
