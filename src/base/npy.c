/* NumPy .npy files, format versions 1.0, 2.0 and 3.0.
 *
 * Layout: the 6-byte magic "\x93NUMPY", a major and a minor version byte, the header length
 * (little-endian uint16 for 1.0, uint32 for 2.0 and 3.0), then the header: the text of a Python
 * dict literal with the keys 'descr', 'fortran_order' and 'shape', padded with spaces and ended
 * by '\n'. The raw array data follows the header. The header is parsed here with a small
 * tokenizer for exactly the Python literal subset NumPy (and other writers) produce, never by
 * evaluating anything. */
#include "base/npy.h"

#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "base/error.h"
#include "base/file.h"
#include "base/tensor.h"

static const uint8_t npy_magic[6] = {0x93, 'N', 'U', 'M', 'P', 'Y'};

/* Real headers are a few hundred bytes. The cap only stops a corrupt length field from making a
 * reader of a pipe (where the file size is unknown) allocate gigabytes for it. */
#define NPY_HEADER_MAX ((size_t)1 << 20)

/* Everything the header says, checked and resolved. */
typedef struct npy_info {
    calq_dtype dtype;
    bool swap; /* data is in the opposite byte order to this machine's */
    int ndim;
    int64_t dims[CALQ_MAX_DIMS];
    size_t data_offset; /* from the start of the file */
    size_t nbytes;      /* bytes of data the shape needs */
} npy_info;

static bool host_little_endian(void)
{
    const uint16_t one = 1;
    uint8_t first;
    memcpy(&first, &one, 1);
    return first == 1;
}

/* Copies s[0..n) into buf for an error message, replacing anything unprintable, so a corrupt
 * header cannot put control characters or invalid UTF-8 into the message. */
static const char *printable(const char *s, size_t n, char *buf, size_t cap)
{
    size_t limit = cap - 1, o = 0;
    bool cut = n > limit;
    if (cut) limit = cap > 4 ? cap - 4 : 0;
    for (size_t i = 0; i < n && o < limit; i++) {
        unsigned char c = (unsigned char)s[i];
        buf[o++] = c >= 0x20 && c < 0x7f ? (char)c : '?';
    }
    if (cut)
        for (int k = 0; k < 3 && o < cap - 1; k++) buf[o++] = '.';
    buf[o] = 0;
    return buf;
}

/* ---- the fixed-size preamble ------------------------------------------------------------- */

/* Checks the magic and version in p[0..n) and reads the header length. n may be short: the
 * answer is then "not a .npy file" or "truncated", whichever the bytes present show. */
static calq_status parse_preamble(const uint8_t *p, size_t n, const char *what, size_t *preamble_len,
                                  size_t *header_len, calq_error *err)
{
    size_t m = n < sizeof npy_magic ? n : sizeof npy_magic;
    if (n == 0) return calq__fail(err, CALQ_ERR_BAD_FORMAT, NULL, "%s: empty file, not a .npy file", what);
    if (memcmp(p, npy_magic, m) != 0)
        return calq__fail(err, CALQ_ERR_BAD_FORMAT, NULL,
                          "%s: not a .npy file (it does not start with the NumPy magic \\x93NUMPY)", what);
    if (n < 8)
        return calq__fail(err, CALQ_ERR_BAD_FORMAT, NULL,
                          "%s: truncated: the file ends after %zu bytes, inside the .npy preamble", what, n);
    int major = p[6], minor = p[7];
    if (major < 1 || major > 3 || minor != 0)
        return calq__fail(err, CALQ_ERR_UNSUPPORTED, NULL,
                          "%s: .npy format version %d.%d is not supported (calq reads 1.0, 2.0 and 3.0)", what, major,
                          minor);
    size_t plen = major == 1 ? 10 : 12;
    if (n < plen)
        return calq__fail(err, CALQ_ERR_BAD_FORMAT, NULL,
                          "%s: truncated: the file ends after %zu bytes, inside the .npy preamble", what, n);
    uint32_t hlen = (uint32_t)p[8] | (uint32_t)p[9] << 8;
    if (major > 1) hlen |= (uint32_t)p[10] << 16 | (uint32_t)p[11] << 24;
    *preamble_len = plen;
    *header_len = hlen;
    return CALQ_OK;
}

static calq_status fail_truncated_header(const char *what, size_t plen, size_t hlen, size_t avail, calq_error *err)
{
    return calq__fail(err, CALQ_ERR_BAD_FORMAT, NULL,
                      "%s: truncated: the .npy header is %zu bytes long but the file ends %zu bytes into it", what,
                      hlen, avail > plen ? avail - plen : 0);
}

static calq_status check_header_len(const char *what, size_t hlen, calq_error *err)
{
    if (hlen > NPY_HEADER_MAX)
        return calq__fail(err, CALQ_ERR_BAD_FORMAT, NULL,
                          "%s: the .npy header claims to be %zu bytes long; that is not a plausible header (corrupt "
                          "file?)",
                          what, hlen);
    return CALQ_OK;
}

/* ---- the header dict --------------------------------------------------------------------- */

typedef struct hparse {
    const char *start, *p, *end;
    const char *what;
    calq_error *err;
} hparse;

static calq_status syntax_error(hparse *h, const char *expected)
{
    char shown[160];
    return calq__fail(h->err, CALQ_ERR_BAD_FORMAT, NULL, "%s: malformed .npy header: expected %s at byte %zu of %s",
                      h->what, expected, (size_t)(h->p - h->start),
                      printable(h->start, (size_t)(h->end - h->start), shown, sizeof shown));
}

static void skip_space(hparse *h)
{
    while (h->p < h->end &&
           (*h->p == ' ' || *h->p == '\t' || *h->p == '\n' || *h->p == '\r' || *h->p == '\f' || *h->p == '\v'))
        h->p++;
}

static bool peek(hparse *h, char c)
{
    return h->p < h->end && *h->p == c;
}

static bool accept(hparse *h, char c)
{
    if (!peek(h, c)) return false;
    h->p++;
    return true;
}

/* A quoted Python string literal ('...' or "...", optionally u-prefixed as Python 2 writers
 * did). The text is copied to buf, cut to cap - 1 bytes; *len is its full length so a cut value
 * never compares equal to a short one. */
static calq_status parse_string(hparse *h, char *buf, size_t cap, size_t *len)
{
    if (h->p < h->end && (*h->p == 'u' || *h->p == 'U') && h->p + 1 < h->end && (h->p[1] == '\'' || h->p[1] == '"'))
        h->p++;
    if (!peek(h, '\'') && !peek(h, '"')) return syntax_error(h, "a quoted string");
    char quote = *h->p++;
    size_t n = 0;
    for (;;) {
        if (h->p >= h->end || *h->p == '\n') return syntax_error(h, "the closing quote of a string");
        char c = *h->p++;
        if (c == quote) break;
        /* Escapes never occur in the names and dtype codes that matter here; taking the escaped
         * character as it is keeps an escaped quote from ending the string. */
        if (c == '\\') {
            if (h->p >= h->end) return syntax_error(h, "the closing quote of a string");
            c = *h->p++;
        }
        if (n + 1 < cap) buf[n] = c;
        n++;
    }
    buf[n + 1 < cap ? n : cap - 1] = 0;
    *len = n;
    return CALQ_OK;
}

static bool is_ident_char(char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_';
}

static calq_status parse_bool(hparse *h, bool *v)
{
    const char *s = h->p;
    while (h->p < h->end && is_ident_char(*h->p)) h->p++;
    size_t n = (size_t)(h->p - s);
    if (n == 4 && memcmp(s, "True", 4) == 0) {
        *v = true;
    } else if (n == 5 && memcmp(s, "False", 5) == 0) {
        *v = false;
    } else {
        h->p = s;
        return syntax_error(h, "True or False for 'fortran_order'");
    }
    return CALQ_OK;
}

/* A decimal integer, optionally negative (rejected later with a clearer message) and with the
 * 'L' suffix Python 2 gave long integers. */
static calq_status parse_int(hparse *h, int64_t *v)
{
    bool neg = accept(h, '-');
    if (neg) skip_space(h);
    if (h->p >= h->end || *h->p < '0' || *h->p > '9') return syntax_error(h, "an integer dimension");
    uint64_t x = 0;
    while (h->p < h->end && *h->p >= '0' && *h->p <= '9') {
        unsigned d = (unsigned)(*h->p - '0');
        if (x > ((uint64_t)INT64_MAX - d) / 10) {
            char shown[160];
            return calq__fail(h->err, CALQ_ERR_BAD_FORMAT, NULL,
                              "%s: a dimension in the .npy header does not fit in 64 bits: %s", h->what,
                              printable(h->start, (size_t)(h->end - h->start), shown, sizeof shown));
        }
        x = x * 10 + d;
        h->p++;
    }
    if (peek(h, 'L') || peek(h, 'l')) h->p++;
    if (h->p < h->end && (is_ident_char(*h->p) || *h->p == '.')) return syntax_error(h, "an integer dimension");
    *v = neg ? -(int64_t)x : (int64_t)x;
    return CALQ_OK;
}

/* A tuple of integers: "()", "(3,)", "(2, 3)", "(2, 3,)". More than CALQ_MAX_DIMS entries are
 * counted but not stored, so the caller can say how many there were. */
static calq_status parse_shape(hparse *h, int64_t *dims, int *ndim)
{
    if (!accept(h, '(')) return syntax_error(h, "a tuple such as (2, 3) for 'shape'");
    int n = 0;
    bool comma = false;
    skip_space(h);
    while (!accept(h, ')')) {
        int64_t d = 0;
        CALQ_TRY(parse_int(h, &d));
        if (n < CALQ_MAX_DIMS) dims[n] = d;
        n++;
        skip_space(h);
        comma = accept(h, ',');
        skip_space(h);
        if (!comma && !peek(h, ')')) return syntax_error(h, "',' or ')' in the shape tuple");
    }
    /* "(3)" is the integer 3 in Python, not a tuple; NumPy itself rejects such a header. */
    if (n == 1 && !comma) {
        h->p--;
        return syntax_error(h, "a one-element tuple written (n,) for 'shape'");
    }
    *ndim = n;
    return CALQ_OK;
}

typedef struct npy_header_fields {
    char descr[64];
    size_t descr_len;
    bool fortran;
    int ndim; /* may exceed CALQ_MAX_DIMS: only the first CALQ_MAX_DIMS dims are stored */
    int64_t dims[CALQ_MAX_DIMS];
} npy_header_fields;

static calq_status parse_dict(hparse *h, npy_header_fields *f)
{
    bool have_descr = false, have_fortran = false, have_shape = false;
    skip_space(h);
    if (!accept(h, '{')) return syntax_error(h, "'{' (the header is a Python dict literal)");
    for (;;) {
        skip_space(h);
        if (accept(h, '}')) break;
        char key[32];
        size_t key_len;
        CALQ_TRY(parse_string(h, key, sizeof key, &key_len));
        skip_space(h);
        if (!accept(h, ':')) return syntax_error(h, "':' after a key");
        skip_space(h);
        bool *seen;
        if (key_len == 5 && strcmp(key, "descr") == 0) {
            seen = &have_descr;
            if (peek(h, '['))
                return calq__fail(h->err, CALQ_ERR_UNSUPPORTED, NULL,
                                  "%s: structured arrays (record dtypes with named fields) are not supported; save "
                                  "each field as its own plain numeric array",
                                  h->what);
            CALQ_TRY(parse_string(h, f->descr, sizeof f->descr, &f->descr_len));
        } else if (key_len == 13 && strcmp(key, "fortran_order") == 0) {
            seen = &have_fortran;
            CALQ_TRY(parse_bool(h, &f->fortran));
        } else if (key_len == 5 && strcmp(key, "shape") == 0) {
            seen = &have_shape;
            CALQ_TRY(parse_shape(h, f->dims, &f->ndim));
        } else {
            char shown[40];
            return calq__fail(h->err, CALQ_ERR_BAD_FORMAT, NULL,
                              "%s: malformed .npy header: unexpected key '%s' (a header has exactly 'descr', "
                              "'fortran_order' and 'shape')",
                              h->what,
                              printable(key, key_len < sizeof key ? key_len : sizeof key - 1, shown, sizeof shown));
        }
        if (*seen)
            return calq__fail(h->err, CALQ_ERR_BAD_FORMAT, NULL, "%s: malformed .npy header: key '%s' appears twice",
                              h->what, key);
        *seen = true;
        skip_space(h);
        if (!accept(h, ',')) {
            skip_space(h);
            if (!accept(h, '}')) return syntax_error(h, "',' or '}' after a value");
            break;
        }
    }
    skip_space(h);
    if (h->p != h->end) return syntax_error(h, "only padding after the closing '}'");
    if (!have_descr || !have_fortran || !have_shape)
        return calq__fail(h->err, CALQ_ERR_BAD_FORMAT, NULL, "%s: malformed .npy header: the '%s' key is missing",
                          h->what,
                          !have_descr     ? "descr"
                          : !have_fortran ? "fortran_order"
                                          : "shape");
    return CALQ_OK;
}

/* ---- dtypes ------------------------------------------------------------------------------- */

/* NumPy's kind letter and item size for each calq dtype ("f4"); NULL when there is none. */
static const char *npy_code(calq_dtype t)
{
    switch (t) {
    case CALQ_DTYPE_FLOAT32: return "f4";
    case CALQ_DTYPE_FLOAT64: return "f8";
    case CALQ_DTYPE_FLOAT16: return "f2";
    case CALQ_DTYPE_INT8: return "i1";
    case CALQ_DTYPE_UINT8: return "u1";
    case CALQ_DTYPE_INT16: return "i2";
    case CALQ_DTYPE_UINT16: return "u2";
    case CALQ_DTYPE_INT32: return "i4";
    case CALQ_DTYPE_UINT32: return "u4";
    case CALQ_DTYPE_INT64: return "i8";
    case CALQ_DTYPE_UINT64: return "u8";
    case CALQ_DTYPE_BOOL: return "b1";
    case CALQ_DTYPE_UNDEFINED: break;
    }
    return NULL;
}

/* Resolves a descr such as '<f4' or '|u1'. The byte-order mark is optional ('f4' is what
 * np.dtype('f4').str would be without one); '=' and '|' mean this machine's order. */
static calq_status parse_descr(const npy_header_fields *f, const char *what, calq_dtype *dtype, bool *swap,
                               calq_error *err)
{
    const char *d = f->descr;
    size_t len = f->descr_len;
    char order = '=';
    if (len > 0 && d[0] != 0 && strchr("<>|=", d[0])) {
        order = *d++;
        len--;
    }
    static const calq_dtype all[] = {CALQ_DTYPE_FLOAT32, CALQ_DTYPE_FLOAT64, CALQ_DTYPE_FLOAT16, CALQ_DTYPE_INT8,
                                     CALQ_DTYPE_UINT8,   CALQ_DTYPE_INT16,   CALQ_DTYPE_UINT16,  CALQ_DTYPE_INT32,
                                     CALQ_DTYPE_UINT32,  CALQ_DTYPE_INT64,   CALQ_DTYPE_UINT64,  CALQ_DTYPE_BOOL};
    if (f->descr_len < sizeof f->descr) {
        for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) {
            const char *code = npy_code(all[i]);
            if (len != strlen(code) || memcmp(d, code, len) != 0) continue;
            *dtype = all[i];
            bool little = host_little_endian();
            *swap = calq_dtype_size(all[i]) > 1 && ((order == '<' && !little) || (order == '>' && little));
            return CALQ_OK;
        }
    }
    char shown[80];
    printable(f->descr, f->descr_len < sizeof f->descr ? f->descr_len : sizeof f->descr - 1, shown, sizeof shown);
    const char *why;
    switch (*d) {
    case 'O':
        why = "object arrays hold pickled Python objects, not numbers; save a numeric array instead, e.g. "
              "np.save(path, a.astype(np.float32))";
        break;
    case 'U':
    case 'S':
    case 'a': why = "string arrays are not numeric data"; break;
    case 'c': why = "complex numbers are not supported; save the real and imaginary parts as float32 arrays"; break;
    case 'M':
    case 'm': why = "datetime and timedelta arrays are not numeric tensors"; break;
    case 'V': why = "raw-bytes (void) arrays are not numeric tensors"; break;
    default:
        why = "calq reads float16/32/64, int8/16/32/64, uint8/16/32/64 and bool (descr such as '<f4', '|u1', "
              "'<i8')";
        break;
    }
    return calq__fail(err, CALQ_ERR_UNSUPPORTED, NULL, "%s: unsupported dtype '%s': %s", what, shown, why);
}

/* ---- putting it together ------------------------------------------------------------------ */

/* Parses and checks the header text (hlen bytes at `text`; the data starts at data_offset). */
static calq_status parse_header(const char *text, size_t hlen, size_t data_offset, const char *what, npy_info *info,
                                calq_error *err)
{
    npy_header_fields f;
    memset(&f, 0, sizeof f);
    hparse h = {text, text, text + hlen, what, err};
    CALQ_TRY(parse_dict(&h, &f));

    memset(info, 0, sizeof *info);
    CALQ_TRY(parse_descr(&f, what, &info->dtype, &info->swap, err));
    if (f.ndim > CALQ_MAX_DIMS)
        return calq__fail(err, CALQ_ERR_UNSUPPORTED, NULL, "%s: the array has %d dimensions; calq supports at most %d",
                          what, f.ndim, CALQ_MAX_DIMS);
    for (int i = 0; i < f.ndim; i++)
        if (f.dims[i] < 0)
            return calq__fail(err, CALQ_ERR_BAD_FORMAT, NULL, "%s: malformed .npy header: negative dimension %lld",
                              what, (long long)f.dims[i]);
    char shape[256];
    calq__shape_str(f.dims, f.ndim, shape, sizeof shape);
    int64_t numel = calq__shape_numel(f.dims, f.ndim);
    size_t es = calq_dtype_size(info->dtype);
    /* Half of SIZE_MAX is also calq__tensor_alloc's limit, and far beyond any real array. */
    if (numel < 0 || (uint64_t)numel > SIZE_MAX / es / 2)
        return calq__fail(err, CALQ_ERR_BAD_FORMAT, NULL,
                          "%s: malformed .npy header: shape %s has more elements than any array can hold", what, shape);
    /* Fortran order only differs from C order when two or more dims exceed 1; otherwise the
     * bytes are the same and the array is read as it is. */
    int big_dims = 0;
    for (int i = 0; i < f.ndim; i++) big_dims += f.dims[i] > 1;
    if (f.fortran && big_dims > 1 && numel > 0)
        return calq__fail(err, CALQ_ERR_UNSUPPORTED, NULL,
                          "%s: Fortran-order arrays are not supported; save with np.ascontiguousarray(a)", what);
    info->ndim = f.ndim;
    memcpy(info->dims, f.dims, sizeof f.dims);
    info->data_offset = data_offset;
    info->nbytes = (size_t)numel * es;
    return CALQ_OK;
}

static calq_status fail_truncated_data(const char *what, const npy_info *info, size_t have, calq_error *err)
{
    char shape[256];
    return calq__fail(
        err, CALQ_ERR_BAD_FORMAT, NULL, "%s: truncated: shape %s %s needs %zu bytes of data, the file has %zu", what,
        calq__shape_str(info->dims, info->ndim, shape, sizeof shape), calq_dtype_name(info->dtype), info->nbytes, have);
}

static void swap_bytes(void *data, size_t nbytes, size_t es)
{
    uint8_t *p = data;
    for (size_t off = 0; off + es <= nbytes; off += es)
        for (size_t i = 0; i < es / 2; i++) {
            uint8_t t = p[off + i];
            p[off + i] = p[off + es - 1 - i];
            p[off + es - 1 - i] = t;
        }
}

static calq_status tensor_for(const npy_info *info, calq_tensor *out, calq_error *err)
{
    memset(out, 0, sizeof *out);
    out->dtype = info->dtype;
    out->ndim = info->ndim;
    memcpy(out->dims, info->dims, sizeof out->dims);
    calq_status st = calq__tensor_alloc(out, err);
    if (st != CALQ_OK) out->data = NULL;
    return st;
}

calq_status calq__npy_parse(const void *buf, size_t n, const char *what, calq_tensor *out, calq_error *err)
{
    const uint8_t *p = buf;
    if (!what) what = "npy data";
    memset(out, 0, sizeof *out);
    if (!p && n) return calq__fail(err, CALQ_ERR_BAD_PARAMETERS, NULL, "%s: no buffer", what);

    size_t plen, hlen;
    CALQ_TRY(parse_preamble(p, n, what, &plen, &hlen, err));
    if (hlen > n - plen) return fail_truncated_header(what, plen, hlen, n, err);
    CALQ_TRY(check_header_len(what, hlen, err));
    npy_info info;
    CALQ_TRY(parse_header((const char *)p + plen, hlen, plen + hlen, what, &info, err));
    size_t have = n - info.data_offset;
    if (have < info.nbytes) return fail_truncated_data(what, &info, have, err);
    /* Bytes after the data are ignored, as NumPy's own reader does. */
    CALQ_TRY(tensor_for(&info, out, err));
    if (info.nbytes) memcpy(out->data, p + info.data_offset, info.nbytes);
    if (info.swap) swap_bytes(out->data, info.nbytes, calq_dtype_size(info.dtype));
    return CALQ_OK;
}

/* Reads exactly n bytes unless the file ends first; returns how many were read. */
static size_t read_up_to(FILE *fp, void *dst, size_t n)
{
    size_t got = 0;
    while (got < n) {
        size_t r = fread((uint8_t *)dst + got, 1, n - got, fp);
        if (r == 0) break;
        got += r;
    }
    return got;
}

/* Reads header and data straight from the file rather than through a whole-file buffer: a
 * calibration batch can be hundreds of megabytes and a second copy would double the peak. */
static calq_status read_npy_file(FILE *fp, const char *path, calq_tensor *out, calq_error *err)
{
    /* The size of a regular file is known up front, so a corrupt header cannot make us
     * allocate more than the file could hold. */
    struct stat sb;
    bool sized = fstat(fileno(fp), &sb) == 0 && S_ISREG(sb.st_mode) && sb.st_size >= 0;
    uint64_t fsize = sized ? (uint64_t)sb.st_size : 0;

    uint8_t pre[12];
    size_t got = read_up_to(fp, pre, 8);
    size_t plen, hlen;
    if (got == 8 && pre[6] >= 2 && pre[6] <= 3 && pre[7] == 0 && memcmp(pre, npy_magic, 6) == 0)
        got += read_up_to(fp, pre + 8, 4);
    else if (got == 8)
        got += read_up_to(fp, pre + 8, 2);
    if (ferror(fp)) return calq__fail(err, CALQ_ERR_IO, NULL, "cannot read %s: %s", path, strerror(errno));
    CALQ_TRY(parse_preamble(pre, got, path, &plen, &hlen, err));
    if (sized && hlen > fsize - plen) return fail_truncated_header(path, plen, hlen, (size_t)fsize, err);
    CALQ_TRY(check_header_len(path, hlen, err));

    char *text = malloc(hlen ? hlen : 1);
    if (!text) return calq__fail(err, CALQ_ERR_OUT_OF_MEMORY, NULL, "%s: out of memory for the .npy header", path);
    size_t hgot = read_up_to(fp, text, hlen);
    if (ferror(fp)) {
        free(text);
        return calq__fail(err, CALQ_ERR_IO, NULL, "cannot read %s: %s", path, strerror(errno));
    }
    if (hgot < hlen) {
        free(text);
        return fail_truncated_header(path, plen, hlen, plen + hgot, err);
    }
    npy_info info;
    calq_status st = parse_header(text, hlen, plen + hlen, path, &info, err);
    free(text);
    if (st != CALQ_OK) return st;

    if (sized && fsize - info.data_offset < info.nbytes)
        return fail_truncated_data(path, &info, (size_t)(fsize - info.data_offset), err);
    CALQ_TRY(tensor_for(&info, out, err));
    size_t dgot = read_up_to(fp, out->data, info.nbytes);
    if (ferror(fp) || dgot < info.nbytes) {
        calq_tensor_free_data(out);
        if (ferror(fp)) return calq__fail(err, CALQ_ERR_IO, NULL, "cannot read %s: %s", path, strerror(errno));
        return fail_truncated_data(path, &info, dgot, err);
    }
    if (info.swap) swap_bytes(out->data, info.nbytes, calq_dtype_size(info.dtype));
    return CALQ_OK;
}

calq_status calq_npy_read(const char *path, calq_tensor *out, calq_error *err)
{
    CALQ_ERR_OR_SCRATCH(err);
    CALQ_REQUIRE(err, out);
    memset(out, 0, sizeof *out);
    CALQ_REQUIRE(err, path);
    FILE *fp;
    size_t size;
    CALQ_TRY(calq__open_regular(path, SIZE_MAX, "a .npy file", &fp, &size, err));
    calq_status st = read_npy_file(fp, path, out, err);
    fclose(fp);
    return st;
}

/* ---- writing ------------------------------------------------------------------------------ */

/* The header NumPy's own writer produces: "{'descr': '<f4', 'fortran_order': False, 'shape':
 * (2, 3), }", padded with spaces and a final '\n' so the data starts at a multiple of 64 bytes
 * (which lets readers map the data aligned). Returns the padded length. */
static size_t format_header(const calq_tensor *t, char *buf, size_t cap)
{
    const char *code = npy_code(t->dtype);
    char order = calq_dtype_size(t->dtype) == 1 ? '|' : host_little_endian() ? '<' : '>';
    char shape[CALQ_MAX_DIMS * 24 + 8];
    size_t at = 0;
    shape[at++] = '(';
    for (int i = 0; i < t->ndim; i++)
        at += (size_t)snprintf(shape + at, sizeof shape - at, "%s%lld", i ? ", " : "", (long long)t->dims[i]);
    if (t->ndim == 1) shape[at++] = ',';
    shape[at++] = ')';
    shape[at] = 0;
    int n = snprintf(buf, cap, "{'descr': '%c%s', 'fortran_order': False, 'shape': %s, }", order, code, shape);
    size_t len = (size_t)n;
    size_t total = 10 + len + 1;
    size_t pad = (64 - total % 64) % 64;
    memset(buf + len, ' ', pad);
    buf[len + pad] = '\n';
    return len + pad + 1;
}

calq_status calq_npy_write(const char *path, const calq_tensor *t, calq_error *err)
{
    CALQ_ERR_OR_SCRATCH(err);
    CALQ_REQUIRE(err, path);
    CALQ_REQUIRE(err, t);
    if (!npy_code(t->dtype))
        return calq__fail(err, CALQ_ERR_UNSUPPORTED, NULL, "%s: cannot write a tensor of dtype %s to .npy", path,
                          calq_dtype_name(t->dtype));
    if (t->ndim < 0 || t->ndim > CALQ_MAX_DIMS)
        return calq__fail(err, CALQ_ERR_SHAPE, NULL, "%s: cannot write a tensor with %d dimensions (0..%d allowed)",
                          path, t->ndim, CALQ_MAX_DIMS);
    int64_t numel = calq_tensor_numel(t);
    size_t es = calq_dtype_size(t->dtype);
    if (numel < 0 || (uint64_t)numel > SIZE_MAX / es) {
        char shape[256];
        return calq__fail(err, CALQ_ERR_SHAPE, NULL, "%s: cannot write a tensor of invalid shape %s", path,
                          calq__shape_str(t->dims, t->ndim, shape, sizeof shape));
    }
    size_t nbytes = (size_t)numel * es;
    if (nbytes && !t->data)
        return calq__fail(err, CALQ_ERR_BAD_PARAMETERS, NULL, "%s: the tensor to write has no data", path);

    /* At most 8 dims of 20 digits: the header stays far below version 1.0's 65535-byte limit. */
    char header[512];
    size_t hlen = format_header(t, header, sizeof header);
    uint8_t pre[10] = {0x93, 'N', 'U', 'M', 'P', 'Y', 1, 0, (uint8_t)(hlen & 0xff), (uint8_t)(hlen >> 8)};

    calq_atomic_file f;
    CALQ_TRY(calq__atomic_open(&f, path, err));
    bool ok = fwrite(pre, 1, sizeof pre, f.fp) == sizeof pre && fwrite(header, 1, hlen, f.fp) == hlen &&
              (nbytes == 0 || fwrite(t->data, 1, nbytes, f.fp) == nbytes);
    if (!ok) {
        int e = errno;
        calq__atomic_abort(&f);
        return calq__fail(err, CALQ_ERR_IO, NULL, "cannot write %s: %s (the previous file, if any, is unchanged)", path,
                          strerror(e));
    }
    return calq__atomic_commit(&f, err);
}
