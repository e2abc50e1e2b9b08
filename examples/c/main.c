/* Classifies a synthetic image with a model compiled by onnxc and prints the top-5 classes.
 *
 *   make            # compiles ../models/tiny_cnn.onnx with onnxc and links this program
 *   make run
 *
 * or by hand:
 *   onnxc ../models/tiny_cnn.onnx -o build/tiny_cnn.o
 *   cc -O2 -Ibuild main.c build/tiny_cnn.o $(onnxc --print-runtime-lib) -lm -lpthread -ldl -o build/classify
 */
#include <stdio.h>
#include <stdlib.h>

#include "tiny_cnn.h"

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
