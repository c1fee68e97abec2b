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

int main(void)
{
    test_numel_bad_ndim();
    return TEST_RESULT();
}
