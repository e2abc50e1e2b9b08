/* Outputs with as many rows as the data selects: tiny_detector.onnx ends, as exported
 * detectors do, in NonMaxSuppression and gathers of the kept boxes, classes and scores. Its
 * outputs' dims depend on the image (ONNXC_TENSOR_DYNAMIC), so the model runs through
 * tiny_detector_run_shaped, which writes them; a buffer too small for the rows found gets
 * ONNXC_ERR_CAPACITY and the dims needed (snprintf's convention).
 *
 *   make detect && ./build/detect
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "tiny_detector.h"

#define PIXELS TINY_DETECTOR_INPUT_0_SIZE

/* Detects objects in `image` into buffers of room for `rows` detections; the dims of the
   three outputs land in dims[0..3]. Returns the status. */
static int detect(const float *image, float *boxes, int64_t *classes, float *scores, size_t rows,
                  int64_t dims[3][2], void *ws, size_t ws_bytes) {
    int64_t in_dims[4] = {1, 3, 32, 32};
    onnxc_tensor in = {(void *)image, in_dims, 4, 0};
    onnxc_tensor out[3] = {
        {boxes, dims[0], 2, rows * 4 * sizeof(float)},
        {classes, dims[1], 1, rows * sizeof(int64_t)},
        {scores, dims[2], 1, rows * sizeof(float)},
    };
    return tiny_detector_run_shaped(&in, out, ws, ws_bytes, NULL);
}

/* Runs one image: first with room for 8 detections, then with the room the dims ask for. */
static int run_image(const char *name, const float *image, void *ws, size_t ws_bytes) {
    int64_t dims[3][2];
    float *boxes = malloc(8 * 4 * sizeof(float)), *scores = malloc(8 * sizeof(float));
    int64_t *classes = malloc(8 * sizeof(int64_t));
    int rc = detect(image, boxes, classes, scores, 8, dims, ws, ws_bytes);
    if (rc == ONNXC_ERR_CAPACITY) {
        printf("%s: room for 8 detections, the model found %lld: ONNXC_ERR_CAPACITY\n", name,
               (long long)dims[0][0]);
        size_t n = (size_t)dims[0][0];
        free(boxes), free(classes), free(scores);
        boxes = malloc((n ? n : 1) * 4 * sizeof(float));
        classes = malloc((n ? n : 1) * sizeof(int64_t));
        scores = malloc((n ? n : 1) * sizeof(float));
        rc = detect(image, boxes, classes, scores, n, dims, ws, ws_bytes);
    }
    int ok = rc == ONNXC_OK && dims[0][1] == 4 && dims[1][0] == dims[0][0] && dims[2][0] == dims[0][0];
    if (!ok) {
        fprintf(stderr, "%s: status %d (%s)\n", name, rc, onnxc_strerror(rc));
    } else {
        long long n = (long long)dims[0][0];
        printf("%s: %lld detections\n", name, n);
        for (long long i = 0; i < n; i++) {
            /* NonMaxSuppression keeps boxes scoring above 0.6, of the model's 3 classes. */
            if (!(scores[i] > 0.6f) || classes[i] < 0 || classes[i] > 2) ok = 0;
            if (i < 3)
                printf("  class %lld, score %.3f, box center (%.1f, %.1f) size %.1f x %.1f\n",
                       (long long)classes[i], scores[i], boxes[4 * i], boxes[4 * i + 1],
                       boxes[4 * i + 2], boxes[4 * i + 3]);
        }
        if (!ok) fprintf(stderr, "%s: a detection is out of range\n", name);
    }
    free(boxes), free(classes), free(scores);
    return ok;
}

int main(void) {
    static float a[PIXELS], b[PIXELS];
    for (size_t i = 0; i < PIXELS; i++) {
        a[i] = (float)((i * 7919) % 1000) / 1000.0f;
        b[i] = sinf((float)i * 0.37f);
    }
    const onnxc_model_info *info = tiny_detector_info();
    for (uint32_t k = 0; k < info->num_outputs; k++)
        printf("output '%s': at most %lld rows%s\n", info->outputs[k].name,
               (long long)info->outputs[k].shape[0],
               info->outputs[k].flags & ONNXC_TENSOR_DYNAMIC ? ", as many as the data selects" : "");
    size_t ws_bytes = tiny_detector_workspace_size_threads(1);
    void *ws = onnxc_workspace_alloc(ws_bytes);
    int ok = ws != NULL;

    /* The fixed-shape entry point cannot return the rows found. */
    const void *ins[1] = {a};
    void *outs[3] = {NULL, NULL, NULL};
    int rc = tiny_detector_run(ins, outs, ws);
    printf("tiny_detector_run: %s\n", onnxc_strerror(rc));
    ok = ok && rc == ONNXC_ERR_DYNAMIC;

    ok = ok && run_image("image a", a, ws, ws_bytes);
    ok = ok && run_image("image b", b, ws, ws_bytes);
    onnxc_workspace_free(ws);
    return ok ? 0 : 1;
}
