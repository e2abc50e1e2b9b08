/* One object, any line width: tiny_textline.onnx declares its input as [1, 1, 16, w] (a
 * dynamic width axis) and its output as [steps, 1, 11]. Compiled with `--dim w=..256`, the
 * object takes the width at run time, from its least value to 256, through
 * tiny_textline_run_shaped, and writes the output's dims (w / 4 steps).
 *
 *   make textline && ./build/textline
 */
#include <stdio.h>
#include <stdlib.h>

#include "tiny_textline.h"

#define LABELS 11
#define MAX_WIDTH 256

/* The synthetic line of `width` columns (make_tiny_textline.py's `line`). */
static void make_line(size_t width, float *px) {
    for (size_t y = 0; y < 16; y++)
        for (size_t x = 0; x < width; x++)
            px[y * width + x] = (float)((x * (x % 7 + 3) + y * 5) % 13) / 12.0f - 0.5f;
}

/* Runs a line of `width` columns; writes the output's dims. */
static int recognize(size_t width, const float *px, float *probs, size_t capacity,
                     int64_t out_dims[3], void *ws, size_t ws_bytes) {
    int64_t in_dims[4] = {1, 1, 16, (int64_t)width};
    onnxc_tensor in = {(void *)px, in_dims, 4, 0};
    onnxc_tensor out = {probs, out_dims, 3, capacity};
    return tiny_textline_run_shaped(&in, &out, ws, ws_bytes, NULL);
}

int main(void) {
    const onnxc_model_info *info = tiny_textline_info();
    printf("dim '%s' taken at run time: %lld to %lld\n", info->dim_names[0],
           (long long)info->dim_least[0], (long long)info->dim_bounds[0]);
    /* The workspace covers every width up to the bound. */
    size_t ws_bytes = tiny_textline_workspace_size_threads(1);
    void *ws = onnxc_workspace_alloc(ws_bytes);
    static float px[16 * MAX_WIDTH], probs[MAX_WIDTH * LABELS];
    int ok = ws != NULL;

    const size_t widths[] = {40, 96};
    for (size_t i = 0; ok && i < 2; i++) {
        size_t width = widths[i];
        make_line(width, px);
        int64_t dims[3];
        int rc = recognize(width, px, probs, sizeof probs, dims, ws, ws_bytes);
        if (rc != ONNXC_OK || dims[0] != (int64_t)(width / 4) || dims[1] != 1 || dims[2] != LABELS) {
            fprintf(stderr, "width %zu: status %d, dims [%lld, %lld, %lld]\n", width, rc,
                    (long long)dims[0], (long long)dims[1], (long long)dims[2]);
            ok = 0;
            break;
        }
        /* Each step's probabilities sum to 1; the checksum weighs them by step and label. */
        double checksum = 0.0;
        for (int64_t t = 0; t < dims[0]; t++) {
            double sum = 0.0;
            for (int k = 0; k < LABELS; k++) {
                sum += probs[t * LABELS + k];
                checksum += probs[t * LABELS + k] * (double)(t + 1) * (double)(k + 1);
            }
            if (sum < 0.999 || sum > 1.001) {
                fprintf(stderr, "width %zu, step %lld: probabilities sum to %f\n", width,
                        (long long)t, sum);
                ok = 0;
            }
        }
        printf("width %zu: output [%lld, 1, %d], checksum %.4f\n", width, (long long)dims[0],
               LABELS, checksum);
    }

    /* A buffer too small for the width's output: nothing runs, the dims say what it needs. */
    if (ok) {
        make_line(96, px);
        int64_t dims[3] = {0, 0, 0};
        int rc = recognize(96, px, probs, 10 * LABELS * sizeof(float), dims, ws, ws_bytes);
        printf("width 96 into room for 10 steps: %s, needs [%lld, %lld, %lld]\n",
               rc == ONNXC_ERR_CAPACITY ? "ONNXC_ERR_CAPACITY" : "unexpected status",
               (long long)dims[0], (long long)dims[1], (long long)dims[2]);
        ok = rc == ONNXC_ERR_CAPACITY && dims[0] == 24;
    }
    /* Wider than the bound: refused before anything is read. */
    if (ok) {
        int64_t dims[3];
        int rc = recognize(MAX_WIDTH + 4, px, probs, sizeof probs, dims, ws, ws_bytes);
        printf("width %d: %s\n", MAX_WIDTH + 4,
               rc == ONNXC_ERR_SHAPE ? "ONNXC_ERR_SHAPE (past the bound)" : "unexpected status");
        ok = rc == ONNXC_ERR_SHAPE;
    }
    onnxc_workspace_free(ws);
    return ok ? 0 : 1;
}
