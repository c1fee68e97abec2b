/* Photos -> NCHW float tensors, through Debian's stb (stb_image decodes, stb_image_resize
 * resamples). */
#include <stdlib.h>
#include <string.h>

#include <stb_image.h>
#include <stb_image_resize.h>

#include "base/error.h"

void calq_image_opts_init(calq_image_opts *o)
{
    memset(o, 0, sizeof *o);
    for (int c = 0; c < 3; c++) o->std[c] = 1.0f;
    o->scale = 1.0f;
}

calq_status calq_image_load(const char *path, const calq_image_opts *o, calq_tensor *out, calq_error *err)
{
    memset(out, 0, sizeof *out);
    calq_image_opts dflt;
    if (!o) {
        calq_image_opts_init(&dflt);
        o = &dflt;
    }
    for (int c = 0; c < 3; c++)
        if (!(o->std[c] != 0.0f))
            return calq__fail(err, CALQ_ERR_BAD_PARAMETERS, NULL, "the std of channel %d must not be 0", c);
    if (o->width < 0 || o->height < 0 || (o->width == 0) != (o->height == 0))
        return calq__fail(err, CALQ_ERR_BAD_PARAMETERS, NULL, "resize needs both a width and a height (e.g. 320x240)");
    int w, h, ch;
    unsigned char *px = stbi_load(path, &w, &h, &ch, 3);
    if (!px)
        return calq__fail(err, CALQ_ERR_BAD_FORMAT, NULL, "%s: cannot decode the image (%s)", path,
                          stbi_failure_reason() ? stbi_failure_reason() : "unknown reason");
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
