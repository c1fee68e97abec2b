/* calq_npy_compare A.npy B.npy [--atol X] [--rtol Y]: element-wise |a-b| <= atol + rtol*|b|.
 * Prints the largest absolute difference; exits 1 on mismatch. Used by the peer tests. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/tensor.h"
#include "calq.h"

int main(int argc, char **argv)
{
    double atol = 1e-4, rtol = 1e-4;
    const char *files[2] = {NULL, NULL};
    int nf = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--atol") && i + 1 < argc)
            atol = atof(argv[++i]);
        else if (!strcmp(argv[i], "--rtol") && i + 1 < argc)
            rtol = atof(argv[++i]);
        else if (nf < 2)
            files[nf++] = argv[i];
    }
    if (nf != 2) {
        fprintf(stderr, "usage: calq_npy_compare A.npy B.npy [--atol X] [--rtol Y]\n");
        return 2;
    }
    calq_tensor a, b;
    calq_error err = {0};
    if (calq_npy_read(files[0], &a, &err) != CALQ_OK || calq_npy_read(files[1], &b, &err) != CALQ_OK) {
        fprintf(stderr, "npy_compare: %s\n", err.message);
        return 1;
    }
    char sa[128], sb[128];
    if (!calq__shape_equal(a.dims, a.ndim, b.dims, b.ndim)) {
        printf("%s vs %s: shapes differ: %s vs %s\n", files[0], files[1],
               calq__shape_str(a.dims, a.ndim, sa, sizeof sa), calq__shape_str(b.dims, b.ndim, sb, sizeof sb));
        return 1;
    }
    int64_t n = calq_tensor_numel(&a), bad = 0, worst = 0;
    double max_abs = 0;
    for (int64_t i = 0; i < n; i++) {
        double x = calq__tensor_get_f64(&a, i), y = calq__tensor_get_f64(&b, i), d = fabs(x - y);
        if (!(d <= atol + rtol * fabs(y))) bad++;
        if (d > max_abs || isnan(d)) {
            max_abs = d;
            worst = i;
        }
    }
    printf("%s: %lld elements, max |diff| %.3g (at %lld: %.9g vs %.9g), %lld beyond atol %.0e + rtol %.0e\n", files[0],
           (long long)n, max_abs, (long long)worst, n ? calq__tensor_get_f64(&a, worst) : 0.0,
           n ? calq__tensor_get_f64(&b, worst) : 0.0, (long long)bad, atol, rtol);
    calq_tensor_free_data(&a);
    calq_tensor_free_data(&b);
    return bad ? 1 : 0;
}
