/* Einsum: any equation of letter labels with at most one "..." per term, explicit ("ij,jk->ik")
 * or implicit ("ij,jk": the labels seen once, in alphabetical order, after the ellipsis dims).
 * This covers matmul, batched matmul, transposes, traces and diagonals (a label repeated in one
 * term), sums over labels and outer products. Reference kernel; two-operand equations that are
 * batched matrix products also have a fast path (below).
 *
 * Every output element is a sum, over the labels that are not in the output, of the product of
 * one element of each input; the sum runs in a fixed label order in double, so results do not
 * depend on the thread count (threads split output elements). Labels of the "..." broadcast
 * numpy-style; letter labels must agree in size across terms. */
#include <ctype.h>
#include <oneapi/dnnl/dnnl.h>
#include <stdlib.h>
#include <string.h>

#include "exec/kernels/dnnl_common.h"
#include "exec/kernels/values.h"
#include "exec/op.h"

#define MAX_TERMS  8
#define N_LETTERS  52
#define MAX_LABELS (N_LETTERS + CALQ_MAX_DIMS) /* letters, then the ellipsis dims */
#define PAR_WORK   32768

typedef struct einsum_plan {
    int n_in;
    int n_out_labels, n_sum_labels;
    int out_labels[MAX_LABELS]; /* in output dim order */
    int sum_labels[MAX_LABELS];
    int64_t size[MAX_LABELS];
    int64_t stride[MAX_TERMS][MAX_LABELS]; /* element stride of each label in each input (0: absent / broadcast) */
} einsum_plan;

static int letter_id(char ch)
{
    return ch >= 'A' && ch <= 'Z' ? ch - 'A' : ch >= 'a' && ch <= 'z' ? 26 + ch - 'a' : -1;
}

static char letter_of(int id)
{
    return id < 26 ? (char)('A' + id) : (char)('a' + id - 26);
}

/* A term's labels: ids of letters, -1 for the ellipsis (at most one). */
static calq_status parse_term(calq_op_ctx *c, const char *s, size_t n, int *labels, int *count)
{
    int k = 0;
    bool ell = false;
    for (size_t i = 0; i < n; i++) {
        if (isspace((unsigned char)s[i])) continue;
        if (s[i] == '.') {
            if (ell || i + 2 >= n || s[i + 1] != '.' || s[i + 2] != '.')
                return calq__op_fail(c, CALQ_ERR_UNSUPPORTED,
                                     "unsupported equation: a term has a stray '.' or two ellipses");
            ell = true;
            i += 2;
            labels[k++] = -1;
        } else if (letter_id(s[i]) >= 0) {
            labels[k++] = letter_id(s[i]);
        } else {
            return calq__op_fail(c, CALQ_ERR_UNSUPPORTED, "unsupported equation: '%c' is not a letter label", s[i]);
        }
        if (k > CALQ_MAX_DIMS + 1)
            return calq__op_fail(c, CALQ_ERR_UNSUPPORTED, "unsupported equation: a term has more than %d labels",
                                 CALQ_MAX_DIMS);
    }
    *count = k;
    return CALQ_OK;
}

static calq_status plan_make(calq_op_ctx *c, einsum_plan *p, int64_t *out_dims, int *out_nd)
{
    const char *eq = calq__attr_str(c->node, "equation", NULL);
    if (!eq) return calq__op_fail(c, CALQ_ERR_SHAPE, "the 'equation' attribute is missing");
    memset(p, 0, sizeof *p);
    p->n_in = c->n_in;
    if (c->n_in < 1 || c->n_in > MAX_TERMS)
        return calq__op_fail(c, CALQ_ERR_UNSUPPORTED, "unsupported equation: %d inputs (calq takes 1 to %d)", c->n_in,
                             MAX_TERMS);
    const char *arrow = strstr(eq, "->");
    size_t lhs_len = arrow ? (size_t)(arrow - eq) : strlen(eq);
    int labels[MAX_TERMS][CALQ_MAX_DIMS + 2], nl[MAX_TERMS];
    int terms = 0;
    for (size_t start = 0, i = 0; i <= lhs_len; i++) {
        if (i < lhs_len && eq[i] != ',') continue;
        if (terms >= c->n_in)
            return calq__op_fail(c, CALQ_ERR_SHAPE, "the equation '%s' has more terms than the %d inputs", eq, c->n_in);
        CALQ_TRY(parse_term(c, eq + start, i - start, labels[terms], &nl[terms]));
        terms++;
        start = i + 1;
    }
    if (terms != c->n_in)
        return calq__op_fail(c, CALQ_ERR_SHAPE, "the equation '%s' has %d terms for %d inputs", eq, terms, c->n_in);

    /* Sizes; the ellipsis dims align to the right across inputs (numpy broadcasting). */
    int n_ell = 0, seen[MAX_LABELS] = {0};
    for (int k = 0; k < MAX_LABELS; k++) p->size[k] = -1;
    for (int t = 0; t < terms; t++) {
        const calq_tensor *x = c->in[t];
        if (!x) return calq__op_fail(c, CALQ_ERR_SHAPE, "input %d is missing", t);
        if (!calq__k_numeric(x->dtype) || x->dtype != c->in[0]->dtype)
            return calq__op_fail(c, CALQ_ERR_UNSUPPORTED, "input %d is %s; every input must be of one numeric type", t,
                                 calq_dtype_name(x->dtype));
        bool has_ell = false;
        for (int i = 0; i < nl[t]; i++) has_ell |= labels[t][i] < 0;
        int e = x->ndim - (nl[t] - (has_ell ? 1 : 0));
        if (e < 0 || (!has_ell && e != 0))
            return calq__op_fail(c, CALQ_ERR_SHAPE, "term %d of '%s' has %d labels but input %d has %d dims", t, eq,
                                 nl[t] - (has_ell ? 1 : 0), t, x->ndim);
        if (e > n_ell) n_ell = e;
        int64_t st = 1;
        int d = x->ndim - 1;
        for (int i = nl[t] - 1; i >= 0; i--) {
            int lab = labels[t][i];
            int cnt = lab < 0 ? e : 1;
            for (int j = cnt - 1; j >= 0; j--, d--) {
                int id = lab < 0 ? N_LETTERS + (CALQ_MAX_DIMS - (e - j)) : lab; /* ellipsis ids count from the right */
                int64_t n = x->dims[d];
                if (lab >= 0 && p->size[id] >= 0 && p->size[id] != n)
                    return calq__op_fail(c, CALQ_ERR_SHAPE, "label '%c' is %lld in one term and %lld in another",
                                         letter_of(id), (long long)p->size[id], (long long)n);
                if (lab < 0 && p->size[id] > 1 && n != 1 && n != p->size[id])
                    return calq__op_fail(c, CALQ_ERR_SHAPE, "the '...' dims of the inputs do not broadcast");
                if (p->size[id] < 0 || (lab < 0 && p->size[id] == 1)) p->size[id] = n;
                if (n != 1 || lab >= 0) p->stride[t][id] += st;
                seen[id]++;
                st *= n;
            }
        }
    }

    /* Output labels. */
    bool in_out[MAX_LABELS] = {false};
    int no = 0;
    if (arrow) {
        int ol[CALQ_MAX_DIMS + 2], n_ol;
        CALQ_TRY(parse_term(c, arrow + 2, strlen(arrow + 2), ol, &n_ol));
        for (int i = 0; i < n_ol; i++) {
            if (ol[i] < 0) {
                for (int j = 0; j < n_ell; j++) {
                    int id = N_LETTERS + CALQ_MAX_DIMS - n_ell + j;
                    p->out_labels[no++] = id;
                    in_out[id] = true;
                }
                continue;
            }
            if (!seen[ol[i]])
                return calq__op_fail(c, CALQ_ERR_SHAPE, "output label '%c' of '%s' is in no input", letter_of(ol[i]),
                                     eq);
            if (in_out[ol[i]])
                return calq__op_fail(c, CALQ_ERR_UNSUPPORTED, "unsupported equation: output label '%c' repeats",
                                     letter_of(ol[i]));
            p->out_labels[no++] = ol[i];
            in_out[ol[i]] = true;
        }
    } else {
        for (int j = 0; j < n_ell; j++) {
            int id = N_LETTERS + CALQ_MAX_DIMS - n_ell + j;
            p->out_labels[no++] = id;
            in_out[id] = true;
        }
        for (int id = 0; id < N_LETTERS; id++)
            if (seen[id] == 1) {
                p->out_labels[no++] = id;
                in_out[id] = true;
            }
    }
    if (no > CALQ_MAX_DIMS)
        return calq__op_fail(c, CALQ_ERR_UNSUPPORTED, "unsupported equation: the output would have %d dims", no);
    p->n_out_labels = no;
    for (int id = 0; id < MAX_LABELS; id++)
        if (seen[id] && !in_out[id]) p->sum_labels[p->n_sum_labels++] = id;
    for (int i = 0; i < no; i++) out_dims[i] = p->size[p->out_labels[i]];
    *out_nd = no;
    return CALQ_OK;
}

static calq_status einsum_infer(calq_op_ctx *c)
{
    einsum_plan p;
    int64_t d[CALQ_MAX_DIMS];
    int nd = 0;
    CALQ_TRY(plan_make(c, &p, d, &nd));
    calq__set_shape(c->out[0], c->in[0]->dtype, d, nd);
    return CALQ_OK;
}

static calq_status einsum_run(calq_op_ctx *c)
{
    einsum_plan p;
    int64_t d[CALQ_MAX_DIMS];
    int nd = 0;
    CALQ_TRY(plan_make(c, &p, d, &nd));
    int n = p.n_in;
    double *v[MAX_TERMS] = {NULL};
    for (int t = 0; t < n; t++) {
        int64_t cnt = calq_tensor_numel(c->in[t]);
        if (!(v[t] = malloc(sizeof(double) * (size_t)(cnt + 1)))) {
            for (int k = 0; k < t; k++) free(v[k]);
            return calq__op_fail(c, CALQ_ERR_OUT_OF_MEMORY, "out of memory for input %d (%lld values)", t,
                                 (long long)cnt);
        }
        calq__k_load(c->in[t], 0, 1, cnt, v[t]);
    }
    int64_t n_out = calq__shape_numel(d, nd), inner_work = 1;
    for (int s = 0; s < p.n_sum_labels; s++) inner_work *= p.size[p.sum_labels[s]];
    /* The innermost summed label runs as a tight loop; the others through an odometer. */
    int S = p.n_sum_labels;
    int64_t last_n = S ? p.size[p.sum_labels[S - 1]] : 1;
    int64_t last_st[MAX_TERMS];
    for (int t = 0; t < n; t++) last_st[t] = S ? p.stride[t][p.sum_labels[S - 1]] : 0;
    double *y = malloc(sizeof(double) * (size_t)(n_out + 1));
    if (!y) {
        for (int t = 0; t < n; t++) free(v[t]);
        return calq__op_fail(c, CALQ_ERR_OUT_OF_MEMORY, "out of memory for %lld outputs", (long long)n_out);
    }
#pragma omp parallel for schedule(static) if (n_out > 1 && n_out * inner_work > PAR_WORK)
    for (int64_t o = 0; o < n_out; o++) {
        int64_t base[MAX_TERMS] = {0}, rem = o;
        for (int i = p.n_out_labels - 1; i >= 0; i--) {
            int id = p.out_labels[i];
            int64_t idx = rem % p.size[id];
            rem /= p.size[id];
            for (int t = 0; t < n; t++) base[t] += idx * p.stride[t][id];
        }
        double acc = 0.0;
        int64_t outer = last_n ? inner_work / last_n : 0, ctr[MAX_LABELS] = {0}, off[MAX_TERMS];
        for (int t = 0; t < n; t++) off[t] = base[t];
        for (int64_t q = 0; q < outer; q++) {
            if (n == 2) {
                const double *a = v[0] + off[0], *b = v[1] + off[1];
                for (int64_t i = 0; i < last_n; i++) acc += a[i * last_st[0]] * b[i * last_st[1]];
            } else {
                for (int64_t i = 0; i < last_n; i++) {
                    double prod = 1.0;
                    for (int t = 0; t < n; t++) prod *= v[t][off[t] + i * last_st[t]];
                    acc += prod;
                }
            }
            /* Next position of the other summed labels. */
            for (int s = S - 2; s >= 0; s--) {
                int id = p.sum_labels[s];
                for (int t = 0; t < n; t++) off[t] += p.stride[t][id];
                if (++ctr[s] < p.size[id]) break;
                for (int t = 0; t < n; t++) off[t] -= p.stride[t][id] * p.size[id];
                ctr[s] = 0;
            }
        }
        y[o] = acc;
    }
    calq__k_store(c->out[0], 0, 1, n_out, y);
    free(y);
    for (int t = 0; t < n; t++) free(v[t]);
    return CALQ_OK;
}

/* ---- fast path: two float32 operands forming a batched matrix product ------------------------
 *
 * An equation whose labels (of size > 1) are each either in both inputs and the output (batch),
 * in the first input and the output (M), in the second and the output (N) or in both inputs only
 * (K), with one M, one N and one K label, is a matrix product per batch index: "nqhd,nkhd->nhqk"
 * (attention scores as exported transformers write them), "bij,bjk->bik". When each operand has
 * unit stride along one of its two matrix dims and the output along M or N, every batch is one
 * oneDNN sgemm on strided views, no copies. Each batch's sgemm runs on one thread (inside a
 * parallel region), so the bits do not depend on the thread count; they differ from the
 * reference's double sums by float rounding. */
typedef struct einsum_mm {
    bool swap;   /* the output is unit-stride along M: computed as (B^T A^T) */
    char ta, tb; /* sgemm transposition flags of the two operands (after the swap) */
    int64_t m, n, k, lda, ldb, ldc;
    int nb;                                        /* batch labels */
    int64_t bsize[MAX_LABELS], bst[3][MAX_LABELS]; /* per batch label: size, strides in A, B, Y */
    int64_t batch;
} einsum_mm;

static calq_status einsum_prepare(calq_op_ctx *c)
{
    c->state = NULL;
    if (c->n_in != 2 || c->in[0]->dtype != CALQ_DTYPE_FLOAT32) return CALQ_OK;
    einsum_plan p;
    int64_t d[CALQ_MAX_DIMS];
    int nd = 0;
    CALQ_TRY(plan_make(c, &p, d, &nd));
    int64_t ost[MAX_LABELS] = {0}, st = 1;
    bool in_out[MAX_LABELS] = {false};
    for (int i = p.n_out_labels - 1; i >= 0; i--) {
        ost[p.out_labels[i]] = st;
        in_out[p.out_labels[i]] = true;
        st *= p.size[p.out_labels[i]];
    }
    einsum_mm mm = {0};
    int lm = -1, ln = -1, lk = -1;
    for (int id = 0; id < MAX_LABELS; id++) {
        if (p.size[id] <= 1) continue; /* absent, or a size-1 dim: no effect on the product */
        const bool a = p.stride[0][id] != 0, b = p.stride[1][id] != 0, o = in_out[id];
        if (a && b && o) {
            mm.bsize[mm.nb] = p.size[id];
            mm.bst[0][mm.nb] = p.stride[0][id];
            mm.bst[1][mm.nb] = p.stride[1][id];
            mm.bst[2][mm.nb++] = ost[id];
        } else if (a && o && !b && lm < 0) {
            lm = id;
        } else if (b && o && !a && ln < 0) {
            ln = id;
        } else if (a && b && !o && lk < 0) {
            lk = id;
        } else {
            return CALQ_OK; /* another form: the reference */
        }
    }
    if (lm < 0 || ln < 0 || lk < 0) return CALQ_OK;
    int64_t sam = p.stride[0][lm], sak = p.stride[0][lk], sbk = p.stride[1][lk], sbn = p.stride[1][ln];
    int64_t scm = ost[lm], scn = ost[ln];
    mm.m = p.size[lm];
    mm.n = p.size[ln];
    mm.k = p.size[lk];
    if (scm == 1 && scn != 1) { /* Y^T = B^T A^T: the second operand plays A */
        mm.swap = true;
        int64_t t = mm.m;
        mm.m = mm.n;
        mm.n = t;
        t = sam, sam = sbn, sbn = t;
        t = sak, sak = sbk, sbk = t;
        t = scm, scm = scn, scn = t;
    }
    if (scn != 1) return CALQ_OK;
    mm.ldc = scm;
    if (sak == 1) {
        mm.ta = 'N';
        mm.lda = sam;
    } else if (sam == 1) {
        mm.ta = 'T';
        mm.lda = sak;
    } else {
        return CALQ_OK;
    }
    if (sbn == 1) {
        mm.tb = 'N';
        mm.ldb = sbk;
    } else if (sbk == 1) {
        mm.tb = 'T';
        mm.ldb = sbn;
    } else {
        return CALQ_OK;
    }
    /* oneDNN checks the leading dims against the row lengths */
    if (mm.lda < (mm.ta == 'N' ? mm.k : mm.m) || mm.ldb < (mm.tb == 'N' ? mm.n : mm.k) || mm.ldc < mm.n) return CALQ_OK;
    mm.batch = 1;
    for (int i = 0; i < mm.nb; i++) mm.batch *= mm.bsize[i];
    einsum_mm *s = malloc(sizeof *s);
    if (!s) return calq__op_fail(c, CALQ_ERR_OUT_OF_MEMORY, "out of memory");
    *s = mm;
    c->state = s;
    return CALQ_OK;
}

static calq_status einsum_run_fast(calq_op_ctx *c)
{
    const einsum_mm *s = c->state;
    const float *a = c->in[s->swap ? 1 : 0]->data, *b = c->in[s->swap ? 0 : 1]->data;
    float *y = c->out[0]->data;
    const int ia = s->swap ? 1 : 0, ib = s->swap ? 0 : 1;
    int failed = 0;
    /* a parallel region, inside which oneDNN's sgemm runs on the calling thread; for little work
     * a team of one, oneDNN told so too */
    const bool serial = s->batch * s->m * s->n * s->k < CALQ_DNNL_SERIAL_WORK;
    const int prev = calq__dnnl_serial_begin(serial);
#pragma omp parallel for schedule(static) reduction(| : failed)
    for (int64_t t = 0; t < s->batch; t++) {
        int64_t rem = t, oa = 0, ob = 0, oy = 0;
        for (int i = s->nb - 1; i >= 0; i--) {
            const int64_t idx = rem % s->bsize[i];
            rem /= s->bsize[i];
            oa += idx * s->bst[ia][i];
            ob += idx * s->bst[ib][i];
            oy += idx * s->bst[2][i];
        }
        if (dnnl_sgemm(s->ta, s->tb, s->m, s->n, s->k, 1.0f, a + oa, s->lda, b + ob, s->ldb, 0.0f, y + oy, s->ldc) !=
            dnnl_success)
            failed = 1;
    }
    calq__dnnl_serial_end(serial, prev);
    return failed ? calq__op_fail(c, CALQ_ERR_INTERNAL, "oneDNN sgemm failed") : CALQ_OK;
}

static void einsum_release(void *state)
{
    free(state);
}

const calq_op_def calq__ops_einsum[] = {
    {"Einsum", 1, MAX_TERMS, 1, 1, 0, false, einsum_infer, einsum_run, einsum_prepare, einsum_run_fast, einsum_release,
     0},
    {0},
};
