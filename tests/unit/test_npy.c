/* .npy reader and writer: round trips, hand-made headers, truncation and garbage, atomic
 * writes, and interoperability with the real NumPy in both directions. */
#include <dirent.h>
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/file.h"
#include "base/npy.h"
#include "calq.h"

#include "expect.h"

/* Checks a status and, when `needle` is non-NULL, that the message contains it. */

static char tmpdir[256];

static const char *tmp_path(const char *name)
{
    static char buf[8][512];
    static int next;
    char *p = buf[next++ % 8];
    snprintf(p, sizeof buf[0], "%s/%s", tmpdir, name);
    return p;
}

static bool write_bytes(const char *path, const void *b, size_t n)
{
    FILE *fp = fopen(path, "wb");
    if (!fp) return false;
    bool ok = fwrite(b, 1, n, fp) == n;
    return fclose(fp) == 0 && ok;
}

/* Whole file into a malloc'ed buffer; NULL when it cannot be read. */
static uint8_t *read_bytes(const char *path, size_t *n)
{
    char *buf;
    calq_error err = {0};
    if (calq__read_file(path, &buf, n, &err) != CALQ_OK) return NULL;
    return (uint8_t *)buf;
}

static const calq_dtype all_dtypes[] = {CALQ_DTYPE_FLOAT32, CALQ_DTYPE_FLOAT64, CALQ_DTYPE_FLOAT16, CALQ_DTYPE_INT8,
                                        CALQ_DTYPE_UINT8,   CALQ_DTYPE_INT16,   CALQ_DTYPE_UINT16,  CALQ_DTYPE_INT32,
                                        CALQ_DTYPE_UINT32,  CALQ_DTYPE_INT64,   CALQ_DTYPE_UINT64,  CALQ_DTYPE_BOOL};
#define N_DTYPES ((int)(sizeof all_dtypes / sizeof all_dtypes[0]))

/* A tensor with distinct, deterministic bytes (bool gets 0/1, its only valid values). */
static calq_tensor make_tensor(calq_dtype dt, int ndim, const int64_t *dims, unsigned seed)
{
    calq_tensor t = {0};
    t.dtype = dt;
    t.ndim = ndim;
    for (int i = 0; i < ndim; i++) t.dims[i] = dims[i];
    int64_t n = calq_tensor_numel(&t);
    size_t nb = (size_t)n * calq_dtype_size(dt);
    uint8_t *p = malloc(nb ? nb : 1);
    uint32_t x = seed * 2654435761u + 1;
    for (size_t i = 0; i < nb; i++) {
        x = x * 1103515245u + 12345u;
        p[i] = dt == CALQ_DTYPE_BOOL ? (uint8_t)((x >> 16) & 1) : (uint8_t)(x >> 16);
    }
    t.data = p;
    return t;
}

static bool same_tensor(const calq_tensor *a, const calq_tensor *b)
{
    if (a->dtype != b->dtype || a->ndim != b->ndim) return false;
    for (int i = 0; i < a->ndim; i++)
        if (a->dims[i] != b->dims[i]) return false;
    size_t nb = (size_t)calq_tensor_numel(a) * calq_dtype_size(a->dtype);
    return nb == 0 || memcmp(a->data, b->data, nb) == 0;
}

/* "(3,)", "()", "(2, 3)": Python's tuple repr, as in the header NumPy writes. */
static void py_shape(const calq_tensor *t, char *buf, size_t cap)
{
    size_t at = (size_t)snprintf(buf, cap, "(");
    for (int i = 0; i < t->ndim; i++)
        at += (size_t)snprintf(buf + at, cap - at, "%s%lld", i ? ", " : "", (long long)t->dims[i]);
    snprintf(buf + at, cap - at, "%s)", t->ndim == 1 ? "," : "");
}

/* ---- round trips ------------------------------------------------------------------------- */

static void test_round_trips(void)
{
    static const struct {
        int ndim;
        int64_t dims[CALQ_MAX_DIMS];
    } shapes[] = {{0, {0}}, {1, {5}}, {4, {2, 3, 4, 5}}, {2, {0, 3}}, {8, {1, 2, 1, 2, 1, 2, 1, 2}}, {1, {1}}};
    for (int d = 0; d < N_DTYPES; d++) {
        for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
            calq_tensor t = make_tensor(all_dtypes[d], shapes[s].ndim, shapes[s].dims, (unsigned)(d * 31 + s));
            const char *path = tmp_path("rt.npy");
            calq_error err = {0};
            calq_status st = calq_npy_write(path, &t, &err);
            EXPECT_STATUS(st, CALQ_OK, &err, NULL);
            calq_tensor back;
            st = calq_npy_read(path, &back, &err);
            EXPECT_STATUS(st, CALQ_OK, &err, NULL);
            if (st == CALQ_OK) {
                if (!same_tensor(&t, &back))
                    fprintf(stderr, "round trip differs: %s shape #%zu\n", calq_dtype_name(t.dtype), s);
                EXPECT(same_tensor(&t, &back));
            }
            calq_tensor_free_data(&back);

            /* The file itself: version 1.0, '\n'-ended header, data 64-byte aligned, and the
             * exact header NumPy would write. */
            size_t n;
            uint8_t *b = read_bytes(path, &n);
            EXPECT(b != NULL && n >= 10);
            if (b && n >= 10) {
                size_t hlen = (size_t)b[8] | (size_t)b[9] << 8;
                EXPECT(b[6] == 1 && b[7] == 0);
                EXPECT((10 + hlen) % 64 == 0);
                EXPECT(10 + hlen <= n && b[10 + hlen - 1] == '\n');
                EXPECT(n == 10 + hlen + (size_t)calq_tensor_numel(&t) * calq_dtype_size(t.dtype));
                char want[256], shape[160];
                py_shape(&t, shape, sizeof shape);
                snprintf(want, sizeof want, "{'descr': '%s', 'fortran_order': False, 'shape': %s, }",
                         all_dtypes[d] == CALQ_DTYPE_FLOAT32   ? "<f4"
                         : all_dtypes[d] == CALQ_DTYPE_FLOAT64 ? "<f8"
                         : all_dtypes[d] == CALQ_DTYPE_FLOAT16 ? "<f2"
                         : all_dtypes[d] == CALQ_DTYPE_INT8    ? "|i1"
                         : all_dtypes[d] == CALQ_DTYPE_UINT8   ? "|u1"
                         : all_dtypes[d] == CALQ_DTYPE_INT16   ? "<i2"
                         : all_dtypes[d] == CALQ_DTYPE_UINT16  ? "<u2"
                         : all_dtypes[d] == CALQ_DTYPE_INT32   ? "<i4"
                         : all_dtypes[d] == CALQ_DTYPE_UINT32  ? "<u4"
                         : all_dtypes[d] == CALQ_DTYPE_INT64   ? "<i8"
                         : all_dtypes[d] == CALQ_DTYPE_UINT64  ? "<u8"
                                                               : "|b1",
                         shape);
                EXPECT(hlen >= strlen(want) && memcmp(b + 10, want, strlen(want)) == 0);
                for (size_t i = 10 + strlen(want); i + 1 < 10 + hlen && i < n; i++) EXPECT(b[i] == ' ');
                /* The buffer parser agrees with the file reader. */
                calq_tensor viabuf;
                st = calq__npy_parse(b, n, "buf", &viabuf, &err);
                EXPECT_STATUS(st, CALQ_OK, &err, NULL);
                if (st == CALQ_OK) EXPECT(same_tensor(&t, &viabuf));
                calq_tensor_free_data(&viabuf);
            }
            free(b);
            calq_tensor_free_data(&t);
        }
    }
}

/* ---- hand-made headers ------------------------------------------------------------------- */

/* A .npy image with the given version, header text (used as is: no padding added) and data. */
static uint8_t *make_npy(int major, const char *header, const void *data, size_t ndata, size_t *n)
{
    size_t hl = strlen(header), pl = major == 1 ? 10 : 12;
    *n = pl + hl + ndata;
    uint8_t *b = malloc(*n);
    memcpy(b, "\x93NUMPY", 6);
    b[6] = (uint8_t)major;
    b[7] = 0;
    b[8] = (uint8_t)hl;
    b[9] = (uint8_t)(hl >> 8);
    if (major > 1) b[10] = (uint8_t)(hl >> 16), b[11] = (uint8_t)(hl >> 24);
    memcpy(b + pl, header, hl);
    if (ndata) memcpy(b + pl + hl, data, ndata);
    return b;
}

/* Parses a hand-made file and checks the outcome. For CALQ_OK the result must be a float32
 * tensor of shape dims[0..ndim) holding `vals`. */
static void header_case(int line, int major, const char *header, const void *data, size_t ndata, calq_status want,
                        const char *needle, int ndim, const int64_t *dims)
{
    size_t n;
    uint8_t *b = make_npy(major, header, data, ndata, &n);
    calq_tensor t;
    calq_error err = {0};
    calq_status st = calq__npy_parse(b, n, "h.npy", &t, &err);
    expect_status_at(__FILE__, line, st, want, &err, needle);
    if (st != CALQ_OK) {
        if (!strstr(err.message, "h.npy")) {
            fprintf(stderr, "%s:%d: message does not name the file: %s\n", __FILE__, line, err.message);
            failures++;
        }
        if (t.data) {
            fprintf(stderr, "%s:%d: failed parse left data behind\n", __FILE__, line);
            failures++;
        }
    } else {
        bool ok = t.ndim == ndim;
        for (int i = 0; ok && i < ndim; i++) ok = t.dims[i] == dims[i];
        if (!ok) {
            fprintf(stderr, "%s:%d: wrong shape (ndim %d)\n", __FILE__, line, t.ndim);
            failures++;
        }
        if (t.dtype == CALQ_DTYPE_FLOAT32 && ndata >= (size_t)calq_tensor_numel(&t) * 4 &&
            memcmp(t.data, data, (size_t)calq_tensor_numel(&t) * 4) != 0) {
            fprintf(stderr, "%s:%d: wrong data\n", __FILE__, line);
            failures++;
        }
    }
    calq_tensor_free_data(&t);
    free(b);
}

#define OKCASE(major, header, nd, ...)                                                                                 \
    do {                                                                                                               \
        const int64_t d_[] = {__VA_ARGS__};                                                                            \
        header_case(__LINE__, major, header, f6, sizeof f6, CALQ_OK, NULL, nd, d_);                                    \
    } while (0)
#define BADCASE(major, header, status, needle)                                                                         \
    header_case(__LINE__, major, header, f6, sizeof f6, status, needle, 0, NULL)

static void test_headers(void)
{
    const float f6[6] = {1, 2, 3, 4, 5, 6};
    const calq_status BAD = CALQ_ERR_BAD_FORMAT, UNS = CALQ_ERR_UNSUPPORTED;

    OKCASE(1, "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }\n", 2, 2, 3);
    OKCASE(1, "{'shape': (2, 3), 'fortran_order': False, 'descr': '<f4'}", 2, 2, 3);
    OKCASE(1, "{'fortran_order':False,'descr':'<f4','shape':(2,3)}", 2, 2, 3);
    OKCASE(1, " \t{ 'descr' :\n'<f4' ,\r\n 'fortran_order' : False , 'shape' : ( 2 , 3 , ) , }    \n", 2, 2, 3);
    OKCASE(1, "{\"descr\": \"<f4\", \"fortran_order\": False, \"shape\": (6,)}", 1, 6);
    OKCASE(1, "{u'descr': u'<f4', u'fortran_order': False, u'shape': (2L, 3L), }", 2, 2, 3);
    OKCASE(1, "{'descr': 'f4', 'fortran_order': False, 'shape': (3, 2), }", 2, 3, 2);
    OKCASE(1, "{'descr': '=f4', 'fortran_order': False, 'shape': (1, 1, 6), }", 3, 1, 1, 6);
    OKCASE(2, "{'descr': '<f4', 'fortran_order': False, 'shape': (6,), }\n", 1, 6);
    OKCASE(3, "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }\n", 2, 2, 3);
    OKCASE(1, "{'descr': '<f4', 'fortran_order': False, 'shape': (), }", 0, 0);
    OKCASE(1, "{'descr': '<f4', 'fortran_order': False, 'shape': (0, 3), }", 2, 0, 3);
    OKCASE(1, "{'descr': '<f4', 'fortran_order': False, 'shape': (4,), }", 1, 4); /* trailing data ignored */
    /* Fortran order is accepted when its byte layout is the same as C order. */
    OKCASE(1, "{'descr': '<f4', 'fortran_order': True, 'shape': (6,), }", 1, 6);
    OKCASE(1, "{'descr': '<f4', 'fortran_order': True, 'shape': (1, 6, 1), }", 3, 1, 6, 1);
    OKCASE(1, "{'descr': '<f4', 'fortran_order': True, 'shape': (), }", 0, 0);
    OKCASE(1, "{'descr': '<f4', 'fortran_order': False, 'shape': (1, 1, 1, 1, 1, 1, 2, 3), }", 8, 1, 1, 1, 1, 1, 1, 2,
           3);

    BADCASE(1, "{'descr': '<f4', 'fortran_order': True, 'shape': (2, 3), }", UNS,
            "Fortran-order arrays are not supported; save with np.ascontiguousarray(a)");
    BADCASE(1, "{'descr': '|O', 'fortran_order': False, 'shape': (3,), }", UNS, "object arrays");
    BADCASE(1, "{'descr': '<U5', 'fortran_order': False, 'shape': (1,), }", UNS, "string");
    BADCASE(1, "{'descr': '|S3', 'fortran_order': False, 'shape': (1,), }", UNS, "string");
    BADCASE(1, "{'descr': '<c8', 'fortran_order': False, 'shape': (1,), }", UNS, "complex");
    BADCASE(1, "{'descr': '<M8[ns]', 'fortran_order': False, 'shape': (1,), }", UNS, "datetime");
    BADCASE(1, "{'descr': '<f16', 'fortran_order': False, 'shape': (1,), }", UNS, "unsupported dtype '<f16'");
    BADCASE(1, "{'descr': '', 'fortran_order': False, 'shape': (1,), }", UNS, "unsupported dtype ''");
    BADCASE(1, "{'descr': '<f4\\x00', 'fortran_order': False, 'shape': (1,), }", UNS, "unsupported dtype");
    BADCASE(1, "{'descr': [('a', '<f4'), ('b', '<i4')], 'fortran_order': False, 'shape': (1,), }", UNS,
            "structured arrays");
    BADCASE(1, "{'descr': '<f4', 'fortran_order': False, 'shape': (1, 1, 1, 1, 1, 1, 1, 1, 1), }", UNS, "9 dimensions");
    BADCASE(1, "{'descr': '<f4', 'fortran_order': False, 'shape': (-1, 3), }", BAD, "negative dimension -1");
    BADCASE(1, "{'descr': '<f4', 'fortran_order': False, 'shape': (4294967296, 4294967296, 4294967296), }", BAD,
            "more elements");
    BADCASE(1, "{'descr': '<f4', 'fortran_order': False, 'shape': (9223372036854775807,), }", BAD, "more elements");
    BADCASE(1, "{'descr': '<f4', 'fortran_order': False, 'shape': (99999999999999999999,), }", BAD, "64 bits");
    BADCASE(1, "{'descr': '<f4', 'fortran_order': False, 'shape': (6), }", BAD, "one-element tuple");
    BADCASE(1, "{'descr': '<f4', 'fortran_order': False, 'shape': [2, 3], }", BAD, "tuple");
    BADCASE(1, "{'descr': '<f4', 'fortran_order': False, 'shape': (2 3), }", BAD, "',' or ')'");
    BADCASE(1, "{'descr': '<f4', 'fortran_order': False, 'shape': (2.0, 3), }", BAD, "integer");
    BADCASE(1, "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3x), }", BAD, "integer");
    BADCASE(1, "{'descr': '<f4', 'fortran_order': False, 'shape': (,), }", BAD, "integer");
    BADCASE(1, "{'descr': '<f4', 'fortran_order': 0, 'shape': (6,), }", BAD, "True or False");
    BADCASE(1, "{'descr': '<f4', 'fortran_order': Falsey, 'shape': (6,), }", BAD, "True or False");
    BADCASE(1, "{'descr': '<f4', 'shape': (6,), }", BAD, "'fortran_order' key is missing");
    BADCASE(1, "{'fortran_order': False, 'shape': (6,), }", BAD, "'descr' key is missing");
    BADCASE(1, "{'descr': '<f4', 'fortran_order': False}", BAD, "'shape' key is missing");
    BADCASE(1, "{'descr': '<f4', 'descr': '<f4', 'fortran_order': False, 'shape': (6,)}", BAD, "appears twice");
    BADCASE(1, "{'descr': '<f4', 'fortran_order': False, 'shape': (6,), 'extra': 1}", BAD, "unexpected key 'extra'");
    BADCASE(1, "{'descr': '<f4' 'fortran_order': False, 'shape': (6,)}", BAD, "',' or '}'");
    BADCASE(1, "{'descr': '<f4', 'fortran_order': False, 'shape': (6,)", BAD, "malformed");
    BADCASE(1, "{'descr': '<f4', 'fortran_order': False, 'shape': (6,)} x", BAD, "after the closing");
    BADCASE(1, "{'descr': '<f4', 'fortran_order': False, 'shape': (6,)}}", BAD, "after the closing");
    BADCASE(1, "{'descr: '<f4', 'fortran_order': False, 'shape': (6,)}", BAD, "malformed");
    BADCASE(1, "{'descr': '<f4, 'fortran_order': False, 'shape': (6,)}", BAD, "malformed");
    BADCASE(1, "{descr: '<f4', 'fortran_order': False, 'shape': (6,)}", BAD, "quoted string");
    BADCASE(1, "{'descr' '<f4', 'fortran_order': False, 'shape': (6,)}", BAD, "':'");
    BADCASE(1, "{'descr': '<f4', 'fortran_order': False, 'shape': (6,),,}", BAD, "quoted string");
    BADCASE(1, "('descr', '<f4')", BAD, "dict");
    BADCASE(1, "", BAD, "'{'");
    BADCASE(1, "\n", BAD, "'{'");
    BADCASE(1, "{'descr': '<f4', 'fortran_order': False, 'shape': (6,)\0}", BAD, "malformed");

    /* The message the brief asks for, exactly. */
    {
        size_t n;
        uint8_t *b = make_npy(1, "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }\n", f6, 23, &n);
        calq_tensor t;
        calq_error err = {0};
        EXPECT(calq__npy_parse(b, n, "x.npy", &t, &err) == CALQ_ERR_BAD_FORMAT);
        EXPECT(strcmp(err.message, "x.npy: truncated: shape 2x3 float32 needs 24 bytes of data, the file has 23") == 0);
        EXPECT(t.data == NULL);
        free(b);
    }

    /* Big-endian data is converted to this machine's order. */
    {
        uint8_t be[12] = {0x3f, 0x80, 0, 0, 0xc0, 0, 0, 0, 0x7f, 0x80, 0, 0}; /* 1, -2, +inf */
        size_t n;
        uint8_t *b = make_npy(1, "{'descr': '>f4', 'fortran_order': False, 'shape': (3,), }", be, sizeof be, &n);
        calq_tensor t;
        calq_error err = {0};
        calq_status st = calq__npy_parse(b, n, "be.npy", &t, &err);
        EXPECT_STATUS(st, CALQ_OK, &err, NULL);
        if (st == CALQ_OK) {
            const float *v = t.data;
            EXPECT(t.dtype == CALQ_DTYPE_FLOAT32 && v[0] == 1.0f && v[1] == -2.0f && v[2] > 1e38f);
        }
        calq_tensor_free_data(&t);
        free(b);

        uint8_t be16[4] = {0x12, 0x34, 0xff, 0xfe};
        b = make_npy(1, "{'descr': '>i2', 'fortran_order': False, 'shape': (2,), }", be16, sizeof be16, &n);
        st = calq__npy_parse(b, n, "be.npy", &t, &err);
        EXPECT_STATUS(st, CALQ_OK, &err, NULL);
        if (st == CALQ_OK) {
            const int16_t *v = t.data;
            EXPECT(t.dtype == CALQ_DTYPE_INT16 && v[0] == 0x1234 && v[1] == -2);
        }
        calq_tensor_free_data(&t);
        free(b);

        /* One-byte types have no byte order; any mark is accepted. */
        b = make_npy(1, "{'descr': '>u1', 'fortran_order': False, 'shape': (4,), }", be16, sizeof be16, &n);
        st = calq__npy_parse(b, n, "be.npy", &t, &err);
        EXPECT_STATUS(st, CALQ_OK, &err, NULL);
        if (st == CALQ_OK) EXPECT(t.dtype == CALQ_DTYPE_UINT8 && memcmp(t.data, be16, 4) == 0);
        calq_tensor_free_data(&t);
        free(b);
    }

    /* Preamble problems. */
    {
        calq_tensor t;
        calq_error err = {0};
        size_t n;
        uint8_t *b = make_npy(1, "{'descr': '<f4', 'fortran_order': False, 'shape': (6,), }", f6, sizeof f6, &n);
        b[6] = 4;
        EXPECT_STATUS(calq__npy_parse(b, n, "v.npy", &t, &err), CALQ_ERR_UNSUPPORTED, &err, "version 4.0");
        b[6] = 1;
        b[7] = 1;
        EXPECT_STATUS(calq__npy_parse(b, n, "v.npy", &t, &err), CALQ_ERR_UNSUPPORTED, &err, "version 1.1");
        b[6] = 0;
        b[7] = 0;
        EXPECT_STATUS(calq__npy_parse(b, n, "v.npy", &t, &err), CALQ_ERR_UNSUPPORTED, &err, "version 0.0");
        b[6] = 1;
        b[1] = 'n';
        EXPECT_STATUS(calq__npy_parse(b, n, "v.npy", &t, &err), CALQ_ERR_BAD_FORMAT, &err, "v.npy: not a .npy file");
        b[1] = 'N';
        b[8] = 0xff; /* header length far beyond the file */
        EXPECT_STATUS(calq__npy_parse(b, n, "v.npy", &t, &err), CALQ_ERR_BAD_FORMAT, &err, "truncated");
        free(b);
        b = make_npy(2, "{'descr': '<f4', 'fortran_order': False, 'shape': (6,), }", f6, sizeof f6, &n);
        b[11] = 0xff;
        EXPECT_STATUS(calq__npy_parse(b, n, "v.npy", &t, &err), CALQ_ERR_BAD_FORMAT, &err, "truncated");
        free(b);
        EXPECT_STATUS(calq__npy_parse("", 0, "e.npy", &t, &err), CALQ_ERR_BAD_FORMAT, &err, "e.npy: empty file");
        EXPECT_STATUS(calq__npy_parse(NULL, 0, NULL, &t, &err), CALQ_ERR_BAD_FORMAT, &err, "npy data");
        EXPECT_STATUS(calq__npy_parse("PK\3\4", 4, "z.npy", &t, &err), CALQ_ERR_BAD_FORMAT, &err, "not a .npy");
    }
}

/* ---- truncation and garbage --------------------------------------------------------------- */

/* Every prefix of a valid file must fail cleanly, through both entry points; each parse gets
 * an exactly-sized heap copy so the sanitizer build catches any read past the end. */
static void truncate_all(const uint8_t *full, size_t n, const char *label)
{
    const char *path = tmp_path("trunc.npy");
    for (size_t len = 0; len <= n + 3; len++) {
        uint8_t *copy = malloc(len ? len : 1);
        memcpy(copy, full, len < n ? len : n);
        for (size_t i = n; i < len; i++) copy[i] = 0xAB; /* trailing garbage: accepted */
        calq_tensor t;
        calq_error err = {0};
        calq_status want = len < n ? CALQ_ERR_BAD_FORMAT : CALQ_OK;
        calq_status st = calq__npy_parse(copy, len, "trunc.npy", &t, &err);
        if (st != want || (st != CALQ_OK && (t.data || !strstr(err.message, "trunc.npy")))) {
            fprintf(stderr, "%s: length %zu of %zu: buffer parse gave %s: %s\n", label, len, n, calq_status_name(st),
                    err.message);
            failures++;
        }
        calq_tensor_free_data(&t);
        EXPECT(write_bytes(path, copy, len));
        st = calq_npy_read(path, &t, &err);
        if (st != want || (st != CALQ_OK && (t.data || !strstr(err.message, path)))) {
            fprintf(stderr, "%s: length %zu of %zu: file read gave %s: %s\n", label, len, n, calq_status_name(st),
                    err.message);
            failures++;
        }
        calq_tensor_free_data(&t);
        free(copy);
    }
}

static void test_truncation(void)
{
    const int64_t dims[] = {2, 3};
    calq_tensor t = make_tensor(CALQ_DTYPE_INT16, 2, dims, 7);
    calq_error err = {0};
    const char *path = tmp_path("small.npy");
    EXPECT(calq_npy_write(path, &t, &err) == CALQ_OK);
    size_t n;
    uint8_t *b = read_bytes(path, &n);
    EXPECT(b != NULL);
    if (b) truncate_all(b, n, "v1 int16");
    free(b);

    const float f3[3] = {1, 2, 3};
    b = make_npy(2, "{'descr': '<f4', 'fortran_order': False, 'shape': (3,), }\n", f3, sizeof f3, &n);
    truncate_all(b, n, "v2 float32");
    free(b);

    /* The exact truncation message from the file reader too. */
    b = make_npy(1, "{'descr': '<f4', 'fortran_order': False, 'shape': (1, 3, 240, 320), }", f3, 0, &n);
    uint8_t *big = calloc(n + 1000, 1);
    memcpy(big, b, n);
    const char *tp = tmp_path("x.npy");
    EXPECT(write_bytes(tp, big, n + 1000));
    calq_tensor r;
    char want[600];
    snprintf(want, sizeof want,
             "%s: truncated: shape 1x3x240x320 float32 needs 921600 bytes of data, the file has 1000", tp);
    EXPECT(calq_npy_read(tp, &r, &err) == CALQ_ERR_BAD_FORMAT);
    if (strcmp(err.message, want) != 0) {
        fprintf(stderr, "unexpected message: %s\n", err.message);
        failures++;
    }
    EXPECT(r.data == NULL);
    free(big);
    free(b);
    calq_tensor_free_data(&t);
}

static void test_garbage(void)
{
    uint32_t x = 12345;
    for (int round = 0; round < 3000; round++) {
        size_t n = (size_t)(round % 300);
        uint8_t *b = malloc(n ? n : 1);
        for (size_t i = 0; i < n; i++) {
            x = x * 1664525u + 1013904223u;
            b[i] = (uint8_t)(x >> 24);
        }
        /* Most rounds keep a valid preamble so the header parser sees the garbage. */
        if (round % 3 && n >= 10) {
            memcpy(b, "\x93NUMPY", 6);
            b[6] = (uint8_t)(1 + (round / 3) % 3);
            b[7] = 0;
            size_t pl = b[6] == 1 ? 10 : 12;
            size_t hl = n >= pl ? (size_t)(x % (n - pl + 1)) : 0;
            b[8] = (uint8_t)hl;
            b[9] = (uint8_t)(hl >> 8);
            if (pl == 12 && n >= 12) b[10] = b[11] = 0;
            if (round % 2 && n > pl + 2) b[pl] = '{'; /* get past the first token */
        }
        calq_tensor t;
        calq_error err = {0};
        calq_status st = calq__npy_parse(b, n, "g.npy", &t, &err);
        EXPECT(st != CALQ_OK);
        if (st != CALQ_OK) EXPECT(t.data == NULL && strstr(err.message, "g.npy") != NULL);
        calq_tensor_free_data(&t);
        free(b);
    }

    calq_tensor t;
    calq_error err = {0};
    const char *text = tmp_path("text.npy");
    EXPECT(write_bytes(text, "hello, world\n", 13));
    EXPECT_STATUS(calq_npy_read(text, &t, &err), CALQ_ERR_BAD_FORMAT, &err, "not a .npy file");
    EXPECT(strstr(err.message, text) != NULL);
    EXPECT_STATUS(calq_npy_read(tmp_path("missing.npy"), &t, &err), CALQ_ERR_IO, &err, "missing.npy");
    EXPECT(t.data == NULL);
    /* A directory opens on Linux but cannot be read. */
    EXPECT_STATUS(calq_npy_read(tmpdir, &t, &err), CALQ_ERR_IO, &err, tmpdir);
    EXPECT(t.data == NULL);
}

/* ---- writes that fail leave the old file alone ------------------------------------------- */

static int count_entries(const char *dir)
{
    DIR *d = opendir(dir);
    if (!d) return -1;
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL)
        if (strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0) n++;
    closedir(d);
    return n;
}

static void test_failed_writes(void)
{
    char dir[512];
    snprintf(dir, sizeof dir, "%s/keep", tmpdir);
    EXPECT(mkdir(dir, 0755) == 0);
    char path[600];
    snprintf(path, sizeof path, "%s/old.npy", dir);
    const int64_t dims[] = {3, 4};
    calq_tensor old = make_tensor(CALQ_DTYPE_FLOAT32, 2, dims, 1);
    calq_error err = {0};
    EXPECT(calq_npy_write(path, &old, &err) == CALQ_OK);
    size_t n0;
    uint8_t *before = read_bytes(path, &n0);
    EXPECT(before != NULL);

    calq_tensor bad = make_tensor(CALQ_DTYPE_FLOAT32, 2, dims, 2);
#define EXPECT_UNCHANGED()                                                                                             \
    do {                                                                                                               \
        size_t n1;                                                                                                     \
        uint8_t *after = read_bytes(path, &n1);                                                                        \
        EXPECT(after &&before &&n1 == n0 && memcmp(after, before, n0) == 0);                                           \
        EXPECT(count_entries(dir) == 1);                                                                               \
        free(after);                                                                                                   \
    } while (0)

    bad.dtype = CALQ_DTYPE_UNDEFINED;
    EXPECT_STATUS(calq_npy_write(path, &bad, &err), CALQ_ERR_UNSUPPORTED, &err, "old.npy");
    EXPECT_UNCHANGED();
    bad.dtype = CALQ_DTYPE_FLOAT32;
    bad.dims[0] = -3;
    EXPECT_STATUS(calq_npy_write(path, &bad, &err), CALQ_ERR_SHAPE, &err, "old.npy");
    EXPECT_UNCHANGED();
    bad.dims[0] = 3;
    bad.ndim = CALQ_MAX_DIMS + 1;
    EXPECT_STATUS(calq_npy_write(path, &bad, &err), CALQ_ERR_SHAPE, &err, "old.npy");
    EXPECT_UNCHANGED();
    bad.ndim = 2;
    void *data = bad.data;
    bad.data = NULL;
    EXPECT_STATUS(calq_npy_write(path, &bad, &err), CALQ_ERR_BAD_PARAMETERS, &err, "old.npy");
    EXPECT_UNCHANGED();
    bad.data = data;

    /* The temporary file cannot be created. Root may write into a read-only directory, so
     * block the temporary name with a directory instead (calq__atomic_open uses
     * "<path>.tmp.<pid>"); the chmod variant runs too when not root. */
    char blocker[700];
    snprintf(blocker, sizeof blocker, "%s.tmp.%ld", path, (long)getpid());
    EXPECT(mkdir(blocker, 0755) == 0);
    EXPECT_STATUS(calq_npy_write(path, &bad, &err), CALQ_ERR_IO, &err, "old.npy");
    rmdir(blocker);
    EXPECT_UNCHANGED();
    if (geteuid() != 0) {
        EXPECT(chmod(dir, 0555) == 0);
        EXPECT_STATUS(calq_npy_write(path, &bad, &err), CALQ_ERR_IO, &err, "old.npy");
        EXPECT(chmod(dir, 0755) == 0);
        EXPECT_UNCHANGED();
    } else {
        printf("test_npy: running as root, skipping the read-only-directory write check\n");
    }
    char nowhere[700];
    snprintf(nowhere, sizeof nowhere, "%s/no/such/dir/x.npy", tmpdir);
    EXPECT_STATUS(calq_npy_write(nowhere, &bad, &err), CALQ_ERR_IO, &err, "x.npy");

    /* And a successful write does replace it. */
    EXPECT(calq_npy_write(path, &bad, &err) == CALQ_OK);
    calq_tensor back;
    EXPECT(calq_npy_read(path, &back, &err) == CALQ_OK);
    EXPECT(same_tensor(&bad, &back));
    EXPECT(count_entries(dir) == 1);
    calq_tensor_free_data(&back);
#undef EXPECT_UNCHANGED
    free(before);
    calq_tensor_free_data(&old);
    calq_tensor_free_data(&bad);
}

/* ---- NumPy interoperability -------------------------------------------------------------- */

static const char *python = "/usr/bin/python3";

typedef struct np_case {
    const char *name;
    const char *expr;   /* a NumPy expression */
    int version;        /* 0: np.save; 2 or 3: np.lib.format.write_array with that version */
    calq_status status; /* what calq_npy_read must return */
    const char *needle; /* in the error message */
    calq_dtype dtype;
    int ndim;
    int64_t dims[CALQ_MAX_DIMS];
} np_case;

static const np_case np_cases[] = {
    {"f32_4d",
     "np.arange(24, dtype=np.float32).reshape(1, 2, 3, 4) * 0.25 - 2",
     0,
     CALQ_OK,
     NULL,
     CALQ_DTYPE_FLOAT32,
     4,
     {1, 2, 3, 4}},
    {"f64", "np.linspace(-1, 1, 7)", 0, CALQ_OK, NULL, CALQ_DTYPE_FLOAT64, 1, {7}},
    {"f16", "(np.arange(6, dtype=np.float16) / 3).reshape(2, 3)", 0, CALQ_OK, NULL, CALQ_DTYPE_FLOAT16, 2, {2, 3}},
    {"i1", "np.arange(-5, 5, dtype=np.int8)", 0, CALQ_OK, NULL, CALQ_DTYPE_INT8, 1, {10}},
    {"u1", "np.arange(250, 256, dtype=np.uint8).reshape(3, 2)", 0, CALQ_OK, NULL, CALQ_DTYPE_UINT8, 2, {3, 2}},
    {"i2", "np.array([-32768, 0, 32767], dtype=np.int16)", 0, CALQ_OK, NULL, CALQ_DTYPE_INT16, 1, {3}},
    {"u2", "np.array([0, 1, 65535], dtype=np.uint16)", 0, CALQ_OK, NULL, CALQ_DTYPE_UINT16, 1, {3}},
    {"i4", "np.arange(-3, 3, dtype=np.int32).reshape(2, 1, 3)", 0, CALQ_OK, NULL, CALQ_DTYPE_INT32, 3, {2, 1, 3}},
    {"u4", "np.array([0, 4294967295], dtype=np.uint32)", 0, CALQ_OK, NULL, CALQ_DTYPE_UINT32, 1, {2}},
    {"i8", "np.array([-(2**62), 1, 2**62], dtype=np.int64)", 0, CALQ_OK, NULL, CALQ_DTYPE_INT64, 1, {3}},
    {"u8", "np.array([2**64 - 1, 0], dtype=np.uint64)", 0, CALQ_OK, NULL, CALQ_DTYPE_UINT64, 1, {2}},
    {"b1", "np.array([[True, False], [False, True]])", 0, CALQ_OK, NULL, CALQ_DTYPE_BOOL, 2, {2, 2}},
    {"scalar", "np.float32(3.5)", 0, CALQ_OK, NULL, CALQ_DTYPE_FLOAT32, 0, {0}},
    {"empty", "np.zeros((0, 3), np.float32)", 0, CALQ_OK, NULL, CALQ_DTYPE_FLOAT32, 2, {0, 3}},
    {"max_dims",
     "np.arange(256, dtype=np.float32).reshape((2,) * 8)",
     0,
     CALQ_OK,
     NULL,
     CALQ_DTYPE_FLOAT32,
     8,
     {2, 2, 2, 2, 2, 2, 2, 2}},
    {"be_f4", "(np.arange(5, dtype=np.float32) - 1.5).astype('>f4')", 0, CALQ_OK, NULL, CALQ_DTYPE_FLOAT32, 1, {5}},
    {"be_i8", "(np.arange(4) * -1000).astype('>i8')", 0, CALQ_OK, NULL, CALQ_DTYPE_INT64, 1, {4}},
    {"v2", "np.arange(12, dtype=np.float32).reshape(3, 4)", 2, CALQ_OK, NULL, CALQ_DTYPE_FLOAT32, 2, {3, 4}},
    {"v3", "np.arange(6, dtype=np.int32)", 3, CALQ_OK, NULL, CALQ_DTYPE_INT32, 1, {6}},
    {"fortran",
     "np.asfortranarray(np.arange(6, dtype=np.float32).reshape(2, 3))",
     0,
     CALQ_ERR_UNSUPPORTED,
     "Fortran-order arrays are not supported; save with np.ascontiguousarray(a)",
     0,
     0,
     {0}},
    {"object", "np.array([1, 'a', None], dtype=object)", 0, CALQ_ERR_UNSUPPORTED, "object arrays", 0, 0, {0}},
    {"unicode", "np.array(['ab', 'c'])", 0, CALQ_ERR_UNSUPPORTED, "string arrays", 0, 0, {0}},
    {"structured", "np.zeros(3, dtype=[('a', '<f4'), ('b', '<i4')])", 0, CALQ_ERR_UNSUPPORTED, "structured", 0, 0, {0}},
    {"complex", "np.zeros(2, np.complex64)", 0, CALQ_ERR_UNSUPPORTED, "complex", 0, 0, {0}},
    {"dims9", "np.zeros((1,) * 9, np.float32)", 0, CALQ_ERR_UNSUPPORTED, "9 dimensions", 0, 0, {0}},
};

static bool have_numpy(void)
{
    char cmd[256];
    snprintf(cmd, sizeof cmd, "%s -c 'import numpy' >/dev/null 2>&1", python);
    return access(python, X_OK) == 0 && system(cmd) == 0;
}

static bool run_python(const char *script_name, const char *script)
{
    const char *sp = tmp_path(script_name);
    if (!write_bytes(sp, script, strlen(script))) return false;
    char cmd[1200];
    snprintf(cmd, sizeof cmd, "%s '%s' '%s'", python, sp, tmpdir);
    return system(cmd) == 0;
}

static void test_numpy_reads(void)
{
    /* NumPy writes each case and, for numeric ones, the raw little-endian bytes beside it. */
    char script[8192];
    size_t at = (size_t)snprintf(script, sizeof script,
                                 "import sys\nimport numpy as np\nd = sys.argv[1]\n"
                                 "def out(name, a, version=0):\n"
                                 "    p = d + '/np_' + name + '.npy'\n"
                                 "    if version:\n"
                                 "        with open(p, 'wb') as f:\n"
                                 "            np.lib.format.write_array(f, np.asanyarray(a), version=(version, 0))\n"
                                 "    else:\n"
                                 "        np.save(p, a, allow_pickle=True)\n"
                                 "    a = np.asarray(a)\n"
                                 "    if a.dtype.kind in 'biuf':\n"
                                 "        raw = np.ascontiguousarray(a).astype(a.dtype.newbyteorder('<')).tobytes()\n"
                                 "        with open(d + '/np_' + name + '.bin', 'wb') as f:\n"
                                 "            f.write(raw)\n");
    for (size_t i = 0; i < sizeof np_cases / sizeof np_cases[0]; i++)
        at += (size_t)snprintf(script + at, sizeof script - at, "out('%s', %s, %d)\n", np_cases[i].name,
                               np_cases[i].expr, np_cases[i].version);
    if (!run_python("np_write.py", script)) {
        fprintf(stderr, "test_npy: generating files with NumPy failed\n");
        failures++;
        return;
    }
    for (size_t i = 0; i < sizeof np_cases / sizeof np_cases[0]; i++) {
        const np_case *c = &np_cases[i];
        char name[64];
        snprintf(name, sizeof name, "np_%s.npy", c->name);
        const char *path = tmp_path(name);
        calq_tensor t;
        calq_error err = {0};
        calq_status st = calq_npy_read(path, &t, &err);
        if (st != c->status) fprintf(stderr, "NumPy case %s:\n", c->name);
        EXPECT_STATUS(st, c->status, &err, c->needle);
        if (st != CALQ_OK) {
            EXPECT(t.data == NULL);
            if (!strstr(err.message, path)) {
                fprintf(stderr, "NumPy case %s: message does not name the file: %s\n", c->name, err.message);
                failures++;
            }
            continue;
        }
        bool shape_ok = t.dtype == c->dtype && t.ndim == c->ndim;
        for (int k = 0; shape_ok && k < c->ndim; k++) shape_ok = t.dims[k] == c->dims[k];
        if (!shape_ok) {
            fprintf(stderr, "NumPy case %s: got %s with %d dims\n", c->name, calq_dtype_name(t.dtype), t.ndim);
            failures++;
        }
        snprintf(name, sizeof name, "np_%s.bin", c->name);
        size_t nraw;
        uint8_t *raw = read_bytes(tmp_path(name), &nraw);
        size_t nb = (size_t)calq_tensor_numel(&t) * calq_dtype_size(t.dtype);
        if (!raw || nraw != nb || (nb && memcmp(raw, t.data, nb) != 0)) {
            fprintf(stderr, "NumPy case %s: data differs from NumPy's tobytes()\n", c->name);
            failures++;
        }
        free(raw);
        /* A few values by hand, independent of the .bin files. */
        if (strcmp(c->name, "f32_4d") == 0) EXPECT(((float *)t.data)[5] == -0.75f);
        if (strcmp(c->name, "be_f4") == 0) EXPECT(((float *)t.data)[0] == -1.5f && ((float *)t.data)[4] == 2.5f);
        if (strcmp(c->name, "be_i8") == 0) EXPECT(((int64_t *)t.data)[3] == -3000);
        if (strcmp(c->name, "scalar") == 0) EXPECT(((float *)t.data)[0] == 3.5f);
        if (strcmp(c->name, "i8") == 0) EXPECT(((int64_t *)t.data)[0] == -((int64_t)1 << 62));
        calq_tensor_free_data(&t);
    }
}

static void test_numpy_loads_ours(void)
{
    static const struct {
        int ndim;
        int64_t dims[CALQ_MAX_DIMS];
    } shapes[] = {{0, {0}}, {1, {3}}, {4, {1, 3, 4, 5}}, {2, {0, 2}}};
    char *script = malloc(1 << 16);
    size_t cap = 1 << 16;
    size_t at = (size_t)snprintf(script, cap,
                                 "import sys\nimport numpy as np\nd = sys.argv[1]\nbad = 0\n"
                                 "def check(name, dtype, shape):\n"
                                 "    global bad\n"
                                 "    p = d + '/' + name + '.npy'\n"
                                 "    a = np.load(p)\n"
                                 "    with open(p, 'rb') as f:\n"
                                 "        b = f.read()\n"
                                 "    with open(d + '/' + name + '.bin', 'rb') as f:\n"
                                 "        raw = f.read()\n"
                                 "    hl = int.from_bytes(b[8:10], 'little')\n"
                                 "    ok = (a.dtype.name == dtype and a.shape == shape and a.tobytes() == raw\n"
                                 "          and a.dtype.byteorder in '=|' and b[6:8] == b'\\x01\\x00'\n"
                                 "          and (10 + hl) %% 64 == 0 and a.flags.c_contiguous)\n"
                                 "    if not ok:\n"
                                 "        print('NumPy disagrees on', name, a.dtype, a.shape)\n"
                                 "        bad += 1\n");
    for (int d = 0; d < N_DTYPES; d++) {
        for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
            calq_tensor t = make_tensor(all_dtypes[d], shapes[s].ndim, shapes[s].dims, (unsigned)(100 + d * 7 + s));
            char name[64], file[80], shape[128];
            snprintf(name, sizeof name, "calq_%s_%zu", calq_dtype_name(t.dtype), s);
            snprintf(file, sizeof file, "%s.npy", name);
            calq_error err = {0};
            EXPECT_STATUS(calq_npy_write(tmp_path(file), &t, &err), CALQ_OK, &err, NULL);
            snprintf(file, sizeof file, "%s.bin", name);
            size_t nb = (size_t)calq_tensor_numel(&t) * calq_dtype_size(t.dtype);
            EXPECT(write_bytes(tmp_path(file), t.data, nb));
            py_shape(&t, shape, sizeof shape);
            at += (size_t)snprintf(script + at, cap - at, "check('%s', '%s', %s)\n", name, calq_dtype_name(t.dtype),
                                   shape);
            calq_tensor_free_data(&t);
        }
    }
    /* Values NumPy computes itself, not just bytes it echoes back. */
    const float vals[] = {-1.5f, 0.0f, 0.25f, 1e-3f, 65504.0f, -3e38f};
    calq_tensor v = {CALQ_DTYPE_FLOAT32, 2, {2, 3}, (void *)vals};
    calq_error err = {0};
    EXPECT_STATUS(calq_npy_write(tmp_path("calq_vals.npy"), &v, &err), CALQ_OK, &err, NULL);
    at += (size_t)snprintf(script + at, cap - at,
                           "a = np.load(d + '/calq_vals.npy')\n"
                           "if not np.array_equal(a, np.array([[-1.5, 0.0, 0.25], [1e-3, 65504.0, -3e38]], "
                           "np.float32)):\n"
                           "    print('NumPy reads other values:', a)\n"
                           "    bad += 1\n"
                           "sys.exit(1 if bad else 0)\n");
    if (!run_python("np_check.py", script)) {
        fprintf(stderr, "test_npy: NumPy could not load calq's files as written\n");
        failures++;
    }
    free(script);
}

int main(void)
{
    snprintf(tmpdir, sizeof tmpdir, "/tmp/calq_test_npy.XXXXXX");
    if (!mkdtemp(tmpdir)) {
        perror("mkdtemp");
        return 1;
    }
    test_round_trips();
    test_headers();
    test_truncation();
    test_garbage();
    test_failed_writes();
    if (have_numpy()) {
        test_numpy_reads();
        test_numpy_loads_ours();
    } else {
        SKIP_BECAUSE("the python has no numpy: the NumPy interoperability checks did not run");
    }
    char cmd[400];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmpdir);
    if (failures == 0 && system(cmd) != 0) fprintf(stderr, "test_npy: could not remove %s\n", tmpdir);
    if (failures)
        fprintf(stderr, "test_npy: %d failure(s); files kept in %s\n", failures, tmpdir);
    else
        printf("test_npy: all passed\n");
    return TEST_RESULT();
}
