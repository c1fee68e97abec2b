/* Careless arguments to the public functions an embedder calls (probe h2): each is refused with
 * a message, or answered as the header says, instead of reading or writing outside the caller's
 * memory or being taken silently for something else. */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "expect.h"

/* calq_tensor_numel read dims[ndim - 1] for any ndim: a tensor of 9 or more dims read past the
 * struct (ASan: stack-buffer-overflow), and a negative ndim gave 1 element. */
static void test_numel_bad_ndim(void)
{
    calq_tensor t = {CALQ_DTYPE_FLOAT32, 2, {2, 3}, NULL};
    EXPECT(calq_tensor_numel(&t) == 6);
    t.ndim = 0;
    EXPECT(calq_tensor_numel(&t) == 1); /* a scalar */
    t.ndim = CALQ_MAX_DIMS + 1;
    EXPECT(calq_tensor_numel(&t) == -1);
    t.ndim = INT_MAX;
    EXPECT(calq_tensor_numel(&t) == -1);
    t.ndim = -1;
    EXPECT(calq_tensor_numel(&t) == -1);
    EXPECT(calq_tensor_numel(NULL) == -1);
}

static calq_status no_batches(void *user, int batch, calq_tensor *inputs, int n_inputs, int *end, calq_error *err)
{
    *end = 1;
    return CALQ_OK;
}

/* calq_data_describe / _batch_source / _sample_source take (buf, n) as snprintf does, but wrote
 * buf[0] even when n is 0 (a caller asking for nothing, or handing a zero-size buffer). */
static void test_describe_zero_size(void)
{
    calq_error err = {0};
    calq_data *d = NULL;
    EXPECT_STATUS(calq_data_open_stream(no_batches, NULL, "test", &d, &err), CALQ_OK, &err, NULL);
    if (!d) return;
    char buf[8] = "xyz";
    calq_data_describe(d, buf, 0);
    EXPECT(strcmp(buf, "xyz") == 0);
    EXPECT(calq_data_batch_source(d, 0, buf, 0) == buf);
    EXPECT(strcmp(buf, "xyz") == 0);
    EXPECT(calq_data_sample_source(d, 0, 0, buf, 0) == buf);
    EXPECT(strcmp(buf, "xyz") == 0);
    calq_data_describe(d, buf, sizeof buf); /* cut to the buffer, terminated */
    EXPECT(strlen(buf) == sizeof buf - 1);
    calq_data_free(d);
}

int main(void)
{
    test_numel_bad_ndim();
    test_describe_zero_size();
    return TEST_RESULT();
}
