/* libFuzzer target for the .npy parser: any input must either parse into a tensor that
 * matches its own header or fail with a message, never crash or read out of bounds. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "base/npy.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    calq_tensor t;
    calq_error err = {0};
    calq_status st = calq__npy_parse(data, size, "fuzz.npy", &t, &err);
    if (st == CALQ_OK) {
        /* A success promises a usable tensor: a known dtype, at most CALQ_MAX_DIMS valid dims,
         * and data for every element (touching the last byte lets ASan check the size). */
        int64_t n = calq_tensor_numel(&t);
        size_t es = calq_dtype_size(t.dtype);
        if (es == 0 || t.ndim < 0 || t.ndim > CALQ_MAX_DIMS || n < 0 || !t.data) abort();
        size_t nb = (size_t)n * es;
        if (nb > size) abort();
        if (nb) {
            volatile uint8_t last = ((const uint8_t *)t.data)[nb - 1];
            (void)last;
        }
        calq_tensor_free_data(&t);
    } else {
        if (t.data || err.message[0] == 0 || err.status != st || !memchr(err.message, 0, sizeof err.message)) abort();
    }
    return 0;
}
