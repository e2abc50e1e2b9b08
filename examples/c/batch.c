/* One object, any batch size: tiny_cnn_batch.onnx declares its input as [batch, 3, 32, 32]
 * (a dynamic batch axis), and onnxc compiles it without flags to the program for one image
 * plus tiny_cnn_batch_run_shaped, which takes tensors with their dims.
 *
 *   make batch && ./build/batch
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tiny_cnn_batch.h"

#define IMAGE TINY_CNN_BATCH_INPUT_0_SIZE   /* floats of one image */
#define CLASSES TINY_CNN_BATCH_OUTPUT_0_SIZE /* floats of one result */

/* Runs `n` images through the shaped entry point; returns its status. */
static int classify(size_t n, const float *images, float *probs, size_t capacity, int64_t out_dims[2],
                    void *ws, size_t ws_bytes) {
    int64_t in_dims[4] = {(int64_t)n, 3, 32, 32};
    onnxc_tensor in = {(void *)images, in_dims, 4, 0};
    onnxc_tensor out = {probs, out_dims, 2, capacity};
    return tiny_cnn_batch_run_shaped(&in, &out, ws, ws_bytes, NULL);
}

int main(void) {
    enum { MAX_BATCH = 4 };
    static float images[MAX_BATCH * IMAGE];
    for (size_t i = 0; i < MAX_BATCH * IMAGE; i++) images[i] = (float)((i * 7919) % 1000) / 1000.0f;
    const onnxc_model_info *info = tiny_cnn_batch_info();
    printf("input '%s': dim 0 is %s\n", info->inputs[0].name,
           info->inputs[0].flags & ONNXC_TENSOR_BATCHED ? "a run-time batch" : "fixed");

    /* The workspace does not depend on the batch size: one item runs at a time. */
    size_t ws_bytes = tiny_cnn_batch_workspace_size_threads(1);
    void *ws = onnxc_workspace_alloc(ws_bytes);
    static float one[MAX_BATCH * CLASSES], batch[MAX_BATCH * CLASSES];
    int ok = ws != NULL;

    /* Each image alone (tiny_cnn_batch_run takes one), then all of them in one call. */
    for (size_t i = 0; ok && i < MAX_BATCH; i++) {
        const void *inputs[] = {images + i * IMAGE};
        void *outputs[] = {one + i * CLASSES};
        ok = tiny_cnn_batch_run(inputs, outputs, ws) == ONNXC_OK;
    }
    for (size_t n = 1; ok && n <= MAX_BATCH; n += MAX_BATCH - 1) {
        int64_t dims[2] = {0, 0};
        ok = classify(n, images, batch, sizeof batch, dims, ws, ws_bytes) == ONNXC_OK && dims[0] == (int64_t)n &&
             dims[1] == CLASSES && memcmp(batch, one, n * CLASSES * sizeof(float)) == 0;
        printf("batch of %zu: output [%lld, %lld], %s\n", n, (long long)dims[0], (long long)dims[1],
               ok ? "each item bit-identical to its one-image call" : "DIFFERENT");
    }

    /* Too small an output buffer: nothing runs, the dims say what is needed. */
    int64_t dims[2] = {0, 0};
    int rc = classify(MAX_BATCH, images, batch, 2 * CLASSES * sizeof(float), dims, ws, ws_bytes);
    printf("capacity for 2 of 4 results: %s, needs [%lld, %lld]\n", onnxc_strerror(rc), (long long)dims[0],
           (long long)dims[1]);
    ok = ok && rc == ONNXC_ERR_CAPACITY && dims[0] == MAX_BATCH;

    /* A shape the model does not take: refused before anything is read. */
    int64_t bad_dims[4] = {MAX_BATCH, 3, 16, 16};
    onnxc_tensor bad = {images, bad_dims, 4, 0};
    onnxc_tensor out = {batch, dims, 2, sizeof batch};
    rc = tiny_cnn_batch_run_shaped(&bad, &out, ws, ws_bytes, NULL);
    printf("images of 16x16: %s\n", onnxc_strerror(rc));
    ok = ok && rc == ONNXC_ERR_SHAPE;

    onnxc_workspace_free(ws);
    return ok ? 0 : 1;
}
