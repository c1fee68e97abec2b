/* Photos -> NCHW float tensors, through Debian's stb (stb_image decodes, stb_image_resize
 * resamples). */
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <stb_image.h>
#include <stb_image_resize.h>

#include "base/error.h"
#include "base/file.h"
#include "calib/data.h"

/* A PNG's declared size from its IHDR chunk (the 8-byte signature, then IHDR: width, height, bit
 * depth, colour type, big-endian), read before stb_image sees the file. stb_image's own info call
 * refuses sizes above its 2^30-byte decode limit, but the reason it reports is the last format it
 * tried ("unknown image type"), so a decompression bomb (a small file declaring 10^5 x 10^5
 * pixels) read as a file of unknown type. Returns false when fp is no PNG. */
static bool png_header(FILE *fp, uint64_t *w, uint64_t *h, uint64_t *row_bytes)
{
    unsigned char b[26];
    static const unsigned char sig[12] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n', 0, 0, 0, 13};
    size_t got = fread(b, 1, sizeof b, fp);
    rewind(fp);
    if (got != sizeof b || memcmp(b, sig, sizeof sig) != 0 || memcmp(b + 12, "IHDR", 4) != 0) return false;
    *w = (uint64_t)b[16] << 24 | (uint64_t)b[17] << 16 | (uint64_t)b[18] << 8 | b[19];
    *h = (uint64_t)b[20] << 24 | (uint64_t)b[21] << 16 | (uint64_t)b[22] << 8 | b[23];
    /* samples per pixel by colour type (grey, -, RGB, palette, grey+alpha, -, RGBA) */
    static const int samples[7] = {1, 1, 3, 1, 2, 1, 4};
    uint64_t bits = (uint64_t)(b[24] ? b[24] : 1) * (uint64_t)samples[b[25] < 7 ? b[25] : 0];
    *row_bytes = 1 + (*w * bits + 7) / 8; /* a filter byte, then the packed samples */
    return true;
}

/* A JPEG's declared size from its frame header (the first SOFn marker segment: precision, then
 * height and width, big-endian), read only when stb_image refuses the header: it refuses a zero
 * width ("0 width") and a zero height ("no header height": one a later DNL marker would give, which
 * it does not read), then tries the other formats and reports the last one's "unknown image type".
 * Walks the marker segments before the frame header; false when there is none before the scan. */
static bool jpeg_frame_size(FILE *fp, uint64_t *w, uint64_t *h)
{
    bool found = false;
    rewind(fp);
    int c = fgetc(fp) == 0xff && fgetc(fp) == 0xd8 ? fgetc(fp) : EOF; /* SOI */
    while (c == 0xff) {
        int m = fgetc(fp);
        while (m == 0xff) m = fgetc(fp);               /* fill bytes */
        if (m == EOF || m == 0xd9 || m == 0xda) break; /* EOI, or the scan: no frame header before it */
        if (m == 0x01 || (m >= 0xd0 && m <= 0xd7)) {   /* TEM, RSTn: no length */
            c = fgetc(fp);
            continue;
        }
        int hi = fgetc(fp), lo = fgetc(fp);
        if (hi == EOF || lo == EOF || (hi << 8 | lo) < 2) break;
        long len = (long)(hi << 8 | lo) - 2;
        /* SOF0-SOF15 but DHT (c4), JPG (c8) and DAC (cc) */
        if (m >= 0xc0 && m <= 0xcf && m != 0xc4 && m != 0xc8 && m != 0xcc) {
            unsigned char b[5];
            found = len >= 5 && fread(b, 1, sizeof b, fp) == sizeof b;
            if (found) {
                *h = (uint64_t)b[1] << 8 | b[2];
                *w = (uint64_t)b[3] << 8 | b[4];
            }
            break;
        }
        if (fseek(fp, len, SEEK_CUR) != 0) break;
        c = fgetc(fp);
    }
    rewind(fp);
    return found;
}

/* The format a file's first bytes name, for messages ("PNG", "JPEG", ...), or NULL when they name
 * none calq knows (stb_image also reads TGA, which has no signature). Only the signature is read:
 * stb_image decodes. */
static const char *image_format(FILE *fp)
{
    unsigned char b[11] = {0};
    size_t got = fread(b, 1, sizeof b, fp);
    rewind(fp);
    if (got >= 8 && memcmp(b, "\x89PNG\r\n\x1a\n", 8) == 0) return "PNG";
    if (got >= 3 && b[0] == 0xff && b[1] == 0xd8 && b[2] == 0xff) return "JPEG";
    if (got >= 2 && b[0] == 'B' && b[1] == 'M') return "BMP";
    if (got >= 4 && memcmp(b, "GIF8", 4) == 0) return "GIF";
    if (got >= 4 && memcmp(b, "8BPS", 4) == 0) return "PSD";
    if (got >= 6 && (memcmp(b, "#?RGBE", 6) == 0 || memcmp(b, "#?RADIANCE", 10) == 0)) return "Radiance HDR";
    if (got >= 2 && b[0] == 'P' && (b[1] == '5' || b[1] == '6')) return "PNM";
    return NULL;
}

calq_status calq__image_open(const char *path, FILE **fp, int *w, int *h, calq_error *err)
{
    size_t size;
    CALQ_TRY(calq__open_regular(path, CALQ_IMAGE_MAX_BYTES, "an image", fp, &size, err));
    uint64_t pw, ph, row;
    if (png_header(*fp, &pw, &ph, &row)) {
        /* Bounded before decoding: at most CALQ_IMAGE_MAX_PIXELS, and no more rows than the
         * file's compressed data can hold (deflate expands at most 1032:1, RFC 1951's longest
         * match of 258 bytes per 2-bit code), so a truncated or forged PNG is not decoded. */
        if (pw == 0 || ph == 0) {
            fclose(*fp);
            *fp = NULL;
            return calq__fail(err, CALQ_ERR_BAD_FORMAT, NULL,
                              "%s: the PNG has no pixels (its header declares %llux%llu); remove the file", path,
                              (unsigned long long)pw, (unsigned long long)ph);
        }
        const char *why = NULL;
        if (pw * ph > CALQ_IMAGE_MAX_PIXELS)
            why = "more than calq decodes";
        else if (row * ph > 1032 * (uint64_t)size + 1024)
            why = "more than its compressed data can hold (deflate expands at most 1032:1), so the file is "
                  "truncated or forged";
        if (why) {
            fclose(*fp);
            *fp = NULL;
            return calq__fail(err, CALQ_ERR_BAD_FORMAT, NULL,
                              "%s: the PNG declares %llux%llu pixels (%llu bytes decoded) in a file of %zu bytes, %s "
                              "(at most %llu pixels, a photo of %llu megapixels, and the memory that takes); scale "
                              "it down or remove the file",
                              path, (unsigned long long)pw, (unsigned long long)ph, (unsigned long long)(row * ph),
                              size, why, (unsigned long long)CALQ_IMAGE_MAX_PIXELS,
                              (unsigned long long)CALQ_IMAGE_MAX_PIXELS >> 20);
        }
    }
    const char *format = image_format(*fp);
    int comp;
    if (!stbi_info_from_file(*fp, w, h, &comp)) {
        uint64_t jw = 0, jh = 0;
        bool jpeg_empty =
            format && strcmp(format, "JPEG") == 0 && jpeg_frame_size(*fp, &jw, &jh) && (jw == 0 || jh == 0);
        fclose(*fp);
        *fp = NULL;
        if (jpeg_empty)
            return calq__fail(err, CALQ_ERR_BAD_FORMAT, NULL,
                              "%s: the JPEG has no pixels (its header says %llux%llu); remove the file", path,
                              (unsigned long long)jw, (unsigned long long)jh);
        const char *why = stbi_failure_reason() && *stbi_failure_reason() ? stbi_failure_reason() : "unknown format";
        /* stb_image tries every format in turn, so a failed header check reports the last one's
         * "unknown image type"; when the signature names the format, that reason would mislead */
        if (format && strcmp(why, "unknown image type") == 0)
            return calq__fail(err, CALQ_ERR_BAD_FORMAT, NULL,
                              "%s: not a readable %s (stb_image refuses its header: corrupt, a variant it does not "
                              "read, or more than the 2^30 bytes of pixels it decodes)",
                              path, format);
        return calq__fail(err, CALQ_ERR_BAD_FORMAT, NULL, "%s: not a readable %s (%s%s)", path,
                          format ? format : "image", why,
                          strcmp(why, "unknown image type") == 0
                              ? ": no JPEG, PNG or BMP stb_image reads, or one declaring more than the 2^30 bytes of "
                                "pixels it decodes"
                              : "");
    }
    /* stb_image's info call gives a BMP's height as its header stores it: negative for a top-down
     * BMP (rows stored first row first), which stb_image decodes, flipping bottom-up ones, so
     * both come out top row first. INT_MIN has no positive int; int64 keeps it a size too large. */
    int64_t ww = *w, hh = *h;
    if (format && strcmp(format, "BMP") == 0 && hh < 0) hh = -hh;
    const char *what = format ? format : "image";
    calq_status st = CALQ_OK;
    if (ww == 0 || hh == 0)
        st = calq__fail(err, CALQ_ERR_BAD_FORMAT, NULL,
                        "%s: the %s has no pixels (its header says %lldx%lld); remove the file", path, what,
                        (long long)ww, (long long)hh);
    else if (ww < 0 || hh < 0)
        st = calq__fail(err, CALQ_ERR_BAD_FORMAT, NULL,
                        "%s: the %s claims %lldx%lld pixels, a negative size: the file is corrupt", path, what,
                        (long long)ww, (long long)hh);
    else if ((uint64_t)ww * (uint64_t)hh > CALQ_IMAGE_MAX_PIXELS)
        st = calq__fail(err, CALQ_ERR_BAD_FORMAT, NULL,
                        "%s: the %s claims %lldx%lld pixels, more than the %llu calq decodes (a photo of up to "
                        "%llu megapixels); scale it down first",
                        path, what, (long long)ww, (long long)hh, (unsigned long long)CALQ_IMAGE_MAX_PIXELS,
                        (unsigned long long)CALQ_IMAGE_MAX_PIXELS >> 20);
    if (st != CALQ_OK) {
        fclose(*fp);
        *fp = NULL;
        return st;
    }
    *w = (int)ww;
    *h = (int)hh;
    return CALQ_OK;
}

void calq_image_opts_init(calq_image_opts *o)
{
    if (!o) return; /* as the free functions: nothing to fill */
    memset(o, 0, sizeof *o);
    for (int c = 0; c < 3; c++) o->std[c] = 1.0f;
    o->scale = 1.0f;
}

calq_status calq_image_load(const char *path, const calq_image_opts *o, calq_tensor *out, calq_error *err)
{
    CALQ_ERR_OR_SCRATCH(err);
    CALQ_REQUIRE(err, out);
    memset(out, 0, sizeof *out);
    CALQ_REQUIRE(err, path);
    calq_image_opts dflt;
    if (!o) {
        calq_image_opts_init(&dflt);
        o = &dflt;
    }
    for (int c = 0; c < 3; c++) {
        if (!(o->std[c] != 0.0f))
            return calq__fail(err, CALQ_ERR_BAD_PARAMETERS, NULL, "the std of channel %d must not be 0", c);
        /* --std 1e-45 made every pixel inf, and calq run wrote inf / NaN outputs with exit 0 */
        float inv = o->scale / o->std[c];
        if (!isfinite(inv) || !isfinite((0.0f - o->mean[c]) * inv) || !isfinite((255.0f - o->mean[c]) * inv))
            return calq__fail(err, CALQ_ERR_BAD_PARAMETERS, NULL,
                              "%s: channel %d: (pixel - mean %g) / std %g * scale %g overflows float32 for pixels of "
                              "0 to 255; choose a mean, std and scale that keep the input finite",
                              path, c, (double)o->mean[c], (double)o->std[c], (double)o->scale);
    }
    if (o->width < 0 || o->height < 0 || (o->width == 0) != (o->height == 0))
        return calq__fail(err, CALQ_ERR_BAD_PARAMETERS, NULL, "resize needs both a width and a height (e.g. 320x240)");
    if ((uint64_t)o->width * (uint64_t)o->height > CALQ_IMAGE_MAX_PIXELS)
        return calq__fail(err, CALQ_ERR_BAD_PARAMETERS, NULL,
                          "resize to %dx%d is more than the %llu pixels calq makes of an image", o->width, o->height,
                          (unsigned long long)CALQ_IMAGE_MAX_PIXELS);
    int w, h, ch;
    FILE *fp;
    CALQ_TRY(calq__image_open(path, &fp, &w, &h, err));
    const char *format = image_format(fp);
    unsigned char *px = stbi_load_from_file(fp, &w, &h, &ch, 3);
    fclose(fp);
    if (!px) {
        /* stb_image leaves some failures without a reason, or with an empty one: a GIF without
         * an image ends at its header's "", and a truncated PNG's missing chunk type reads as
         * four NUL bytes, the first letter of its "XXXX PNG chunk not known" */
        const char *why = stbi_failure_reason();
        return calq__fail(err, CALQ_ERR_BAD_FORMAT, NULL, "%s: cannot decode the %s (%s)", path,
                          format ? format : "image", why && *why ? why : "truncated or unsupported file");
    }
    int ow = o->width ? o->width : w, oh = o->height ? o->height : h;
    unsigned char *src = px;
    if (ow != w || oh != h) {
        src = malloc((size_t)ow * (size_t)oh * 3);
        if (!src || !stbir_resize_uint8(px, w, h, 0, src, ow, oh, 0, 3)) {
            free(src);
            stbi_image_free(px);
            return calq__fail(err, CALQ_ERR_OUT_OF_MEMORY, NULL, "%s: cannot resize to %dx%d", path, ow, oh);
        }
    }
    out->dtype = CALQ_DTYPE_FLOAT32;
    out->ndim = 4;
    out->dims[0] = 1;
    out->dims[1] = 3;
    out->dims[2] = oh;
    out->dims[3] = ow;
    size_t plane = (size_t)ow * (size_t)oh;
    float *dst = malloc(plane * 3 * sizeof(float));
    if (!dst) {
        if (src != px) free(src);
        stbi_image_free(px);
        return calq__fail(err, CALQ_ERR_OUT_OF_MEMORY, NULL, "out of memory loading %s", path);
    }
    for (int c = 0; c < 3; c++) {
        int sc = o->bgr ? 2 - c : c;
        float mean = o->mean[c], inv = o->scale / o->std[c];
        for (size_t i = 0; i < plane; i++) dst[(size_t)c * plane + i] = ((float)src[i * 3 + (size_t)sc] - mean) * inv;
    }
    if (src != px) free(src);
    stbi_image_free(px);
    out->data = dst;
    return CALQ_OK;
}
