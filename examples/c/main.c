/* Classifies a synthetic image with a model compiled by onnxc and prints the top-5 classes.
 *
 *   make            # compiles ../models/tiny_cnn.onnx with onnxc and links this program
 *   make run
 *
 * or by hand:
 *   onnxc ../models/tiny_cnn.onnx -o build/tiny_cnn.o
 *   cc -O2 -Ibuild main.c build/tiny_cnn.o $(onnxc --print-link-flags) -o build/classify
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tiny_cnn.h"

/* Several application threads calling the model at once, each with its own workspace, all
 * sharing one runtime pool: every call must give the single-thread call's bits. */
#define CALLERS 3
typedef struct {
    const float *image;
    const float *want;
    const onnxc_threads *threads;
    int ok;
} caller;

static void *call_model(void *arg) {
    caller *c = arg;
    static const size_t workers = 2;
    size_t bytes = tiny_cnn_workspace_size_threads(workers);
    void *ws = onnxc_workspace_alloc(bytes);
    float *probs = malloc(sizeof(float) * TINY_CNN_OUTPUT_0_SIZE);
    c->ok = ws && probs;
    for (int i = 0; c->ok && i < 20; i++) {
        const void *inputs[] = {c->image};
        void *outputs[] = {probs};
        c->ok = tiny_cnn_run_threaded(inputs, outputs, ws, bytes, c->threads) == ONNXC_OK &&
                memcmp(probs, c->want, sizeof(float) * TINY_CNN_OUTPUT_0_SIZE) == 0;
    }
    free(probs);
    onnxc_workspace_free(ws);
    return NULL;
}

int main(void) {
    const onnxc_model_info *info = tiny_cnn_info();
    printf("model %s: input '%s' [%lld, %lld, %lld, %lld], output '%s'\n", info->name, info->inputs[0].name,
           (long long)info->inputs[0].shape[0], (long long)info->inputs[0].shape[1],
           (long long)info->inputs[0].shape[2], (long long)info->inputs[0].shape[3], info->outputs[0].name);

    static float image[TINY_CNN_INPUT_0_SIZE];
    static float probs[TINY_CNN_OUTPUT_0_SIZE];
    for (size_t i = 0; i < TINY_CNN_INPUT_0_SIZE; i++) image[i] = (float)i / (float)TINY_CNN_INPUT_0_SIZE;

    /* The caller owns the workspace: allocate it once and reuse it for every call. */
    void *workspace = onnxc_workspace_alloc(tiny_cnn_workspace_size());
    if (!workspace) {
        fprintf(stderr, "cannot allocate %zu bytes of workspace\n", tiny_cnn_workspace_size());
        return 1;
    }
    const void *inputs[] = {image};
    void *outputs[] = {probs};
    int rc = tiny_cnn_run(inputs, outputs, workspace);
    onnxc_workspace_free(workspace);
    if (rc != ONNXC_OK) {
        fprintf(stderr, "tiny_cnn_run failed: %s\n", onnxc_strerror(rc));
        return 1;
    }

    /* The same call on two threads of the runtime's pool (an application with a pool of its
     * own passes its parallel_for instead: see onnxc_threads in onnxc_runtime.h). The
     * workspace grows by one scratch slot per further worker; the results are bit-identical. */
    onnxc_pool *pool = onnxc_pool_create(2);
    if (!pool) {
        fprintf(stderr, "cannot start the runtime's pool\n");
        return 1;
    }
    onnxc_threads threads = onnxc_pool_threads(pool);
    static float probs2[TINY_CNN_OUTPUT_0_SIZE];
    size_t bytes = tiny_cnn_workspace_size_threads(threads.workers);
    void *ws2 = onnxc_workspace_alloc(bytes);
    void *outputs2[] = {probs2};
    rc = ws2 ? tiny_cnn_run_threaded(inputs, outputs2, ws2, bytes, &threads) : ONNXC_ERR_ALLOC;
    onnxc_workspace_free(ws2);
    if (rc != ONNXC_OK) {
        fprintf(stderr, "tiny_cnn_run_threaded failed: %s\n", onnxc_strerror(rc));
        return 1;
    }
    printf("2 threads: %s\n", memcmp(probs, probs2, sizeof probs) == 0 ? "bit-identical" : "DIFFERENT");

    /* Concurrent callers sharing the pool. */
    pthread_t tid[CALLERS];
    caller callers[CALLERS];
    int all_ok = memcmp(probs, probs2, sizeof probs) == 0;
    for (int i = 0; i < CALLERS; i++) {
        callers[i] = (caller){image, probs, &threads, 0};
        if (pthread_create(&tid[i], NULL, call_model, &callers[i]) != 0) return 1;
    }
    for (int i = 0; i < CALLERS; i++) {
        pthread_join(tid[i], NULL);
        all_ok &= callers[i].ok;
    }
    onnxc_pool_destroy(pool);
    printf("%d concurrent callers on one pool: %s\n", CALLERS, all_ok ? "bit-identical" : "DIFFERENT");
    if (!all_ok) return 1;

    int order[TINY_CNN_OUTPUT_0_SIZE];
    for (int i = 0; i < (int)TINY_CNN_OUTPUT_0_SIZE; i++) order[i] = i;
    for (int i = 0; i < 5; i++) /* partial selection sort: top 5 */
        for (int j = i + 1; j < (int)TINY_CNN_OUTPUT_0_SIZE; j++)
            if (probs[order[j]] > probs[order[i]]) {
                int t = order[i];
                order[i] = order[j];
                order[j] = t;
            }
    printf("top-5:\n");
    for (int i = 0; i < 5; i++) printf("  class %d  p=%.6f\n", order[i], probs[order[i]]);
    return 0;
}
