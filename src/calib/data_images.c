/* Calibration data from a folder of photos (JPEG, PNG, BMP), read in name order through
 * calq_image_load with the user's preprocessing. Batch i is images [i*N, (i+1)*N), N being
 * dim 0 of the model's one input; a partial last batch is not used. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <stb_image.h>

#include "base/error.h"
#include "base/tensor.h"
#include "calib/data.h"

static const char *const IMAGE_EXTS[] = {".jpg", ".jpeg", ".png", ".bmp", NULL};

calq_status calq_data_open_images(const char *dir, const calq_image_opts *opts, int batch_size, calq_data **out,
                                  calq_error *err)
{
    CALQ_ERR_OR_SCRATCH(err);
    CALQ_REQUIRE(err, out);
    *out = NULL;
    CALQ_REQUIRE(err, dir);
    if (batch_size <= 0)
        return calq__fail(err, CALQ_ERR_BAD_PARAMETERS, NULL,
                          "images per batch is %d; it must be > 0 (dim 0 of the model's input)", batch_size);
    if (!dir[0])
        return calq__fail(err, CALQ_ERR_BAD_PARAMETERS, NULL, "--images needs a folder of JPEG, PNG or BMP files");
    calq_data *d = NULL;
    CALQ_TRY(calq__data_new(CALQ_DATA_IMAGES, 1, &d, err));
    if (opts) d->image_opts = *opts;
    d->batch_size = batch_size;
    d->streams[0].label = strdup(dir);
    calq_status st = d->streams[0].label ? calq__data_list_dir(&d->streams[0], dir, IMAGE_EXTS, "--images", err)
                                         : calq__fail(err, CALQ_ERR_OUT_OF_MEMORY, NULL, "out of memory");
    if (st != CALQ_OK) {
        calq_data_free(d);
        return st;
    }
    *out = d;
    return CALQ_OK;
}

/* The input must be an NCHW float32 image tensor with N == batch_size. */
static calq_status check_input(const calq_data *d, const calq_value_info *in, calq_error *err)
{
    char shape[128];
    calq__data_shape(in, shape, sizeof shape);
    if (in->ndim != 4 || in->dims[1] != 3 || in->dtype != CALQ_DTYPE_FLOAT32)
        return calq__fail(err, CALQ_ERR_SHAPE, NULL,
                          "input '%s' is %s %s, but images become N x 3 x H x W float32 tensors: use --data_dir or "
                          ".npy data for this model",
                          in->name, shape, calq_dtype_name(in->dtype));
    if (in->dims[0] != d->batch_size)
        return calq__fail(err, CALQ_ERR_SHAPE, NULL,
                          "input '%s' is %s, so a batch is %lld image%s, but the image data were opened with %d per "
                          "batch",
                          in->name, shape, (long long)in->dims[0], in->dims[0] == 1 ? "" : "s", d->batch_size);
    const calq_image_opts *o = &d->image_opts;
    if (o->width && (o->width != in->dims[3] || o->height != in->dims[2]))
        return calq__fail(err, CALQ_ERR_SHAPE, NULL,
                          "--resize %dx%d makes %dx%d images but input '%s' (%s) takes %lldx%lld (W x H): use "
                          "--resize %lldx%lld",
                          o->width, o->height, o->width, o->height, in->name, shape, (long long)in->dims[3],
                          (long long)in->dims[2], (long long)in->dims[3], (long long)in->dims[2]);
    return CALQ_OK;
}

calq_status calq__data_images_check(const calq_data *d, const calq_value_info *inputs, int n_batches, calq_error *err)
{
    const calq_value_info *in = &inputs[0];
    CALQ_TRY(check_input(d, in, err));
    /* Headers only (stbi_info): cheap, and it catches non-images and, without --resize, sizes
     * that do not fit the input before any inference. A file that fails to decode later is
     * still reported by name when its batch is read. */
    const calq_data_stream *s = &d->streams[0];
    for (int k = 0; k < n_batches * d->batch_size; k++) {
        int w, h;
        FILE *fp;
        if (calq__image_open(s->files[k], &fp, &w, &h, err) != CALQ_OK) {
            size_t at = strlen(err->message);
            snprintf(err->message + at, sizeof err->message - at, "; remove it from %s", s->label);
            return err->status;
        }
        fclose(fp);
        if (!d->image_opts.width && (w != in->dims[3] || h != in->dims[2]))
            return calq__fail(err, CALQ_ERR_SHAPE, NULL,
                              "%s is %dx%d but input '%s' takes %lldx%lld images (W x H): add --resize %lldx%lld",
                              s->files[k], w, h, in->name, (long long)in->dims[3], (long long)in->dims[2],
                              (long long)in->dims[3], (long long)in->dims[2]);
    }
    return CALQ_OK;
}

calq_status calq__data_images_read(calq_data *d, int batch, calq_tensor *inputs, calq_error *err)
{
    calq_tensor *t = &inputs[0];
    if (t->dtype != CALQ_DTYPE_FLOAT32 || t->ndim != 4 || t->dims[0] != d->batch_size || t->dims[1] != 3)
        return calq__fail(err, CALQ_ERR_SHAPE, NULL,
                          "image batches fill a %d x 3 x H x W float32 tensor; the tensor given does not fit",
                          d->batch_size);
    size_t plane = (size_t)t->dims[1] * (size_t)t->dims[2] * (size_t)t->dims[3];
    for (int k = 0; k < d->batch_size; k++) {
        const char *file = d->streams[0].files[batch * d->batch_size + k];
        calq_tensor img;
        CALQ_TRY(calq_image_load(file, &d->image_opts, &img, err));
        if (img.dims[2] != t->dims[2] || img.dims[3] != t->dims[3]) {
            calq_status st = calq__fail(err, CALQ_ERR_SHAPE, NULL,
                                        "%s is %lldx%lld after preprocessing but the input takes %lldx%lld images (W "
                                        "x H): add --resize %lldx%lld",
                                        file, (long long)img.dims[3], (long long)img.dims[2], (long long)t->dims[3],
                                        (long long)t->dims[2], (long long)t->dims[3], (long long)t->dims[2]);
            calq_tensor_free_data(&img);
            return st;
        }
        memcpy((float *)t->data + (size_t)k * plane, img.data, plane * sizeof(float));
        calq_tensor_free_data(&img);
    }
    return CALQ_OK;
}
