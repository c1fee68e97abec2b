/* CALQ_SAVE_REDUCE_RANGE (include/calq.h): the QDQ / QOperator files with 7-bit weights. The
 * record keeps AMCT's 8-bit factors (§7.1); for one export the layers' scale_w are swapped for
 * scale_w * 127/63 and swapped back afterwards, so every consumer of scale_w in the exporters
 * (the weights, the int32 biases of §6.2, QLinearConv's w_scale) agrees without knowing about it.
 * ARQ (§6.1) divides the largest magnitude by 127 when it is a positive weight and by 128 when it
 * is a negative one, so the new scale is max|w| / 63 or max|w| / 63.5 and every weight rounds
 * into [-64, 63] (onnxruntime's own reduce_range takes max|w| / 64 and allows +64; both keep a
 * pair of u8 x s8 products below 2^15). The exporters' clamp to [-64, 63] (calq__xctx.w_qmax)
 * only matters for other tools' records. */
#include <stdlib.h>

#include "base/error.h"
#include "export/export_common.h"

calq_status calq__reduce_range_begin(calq_record *rec, float ***saved, calq_error *err)
{
    *saved = calloc((size_t)rec->n_layers + 1, sizeof **saved);
    if (!*saved) return calq__fail(err, CALQ_ERR_OUT_OF_MEMORY, NULL, "save: out of memory");
    for (int i = 0; i < rec->n_layers; i++) {
        calq_record_layer *rl = &rec->layers[i];
        if (rl->n_scale_w <= 0) continue;
        if (rl->ada_w) {
            calq__reduce_range_end(rec, *saved);
            *saved = NULL;
            return calq__fail(err, CALQ_ERR_BAD_PARAMETERS, rl->name,
                              "save: --reduce-range cannot apply to layer \"%s\": its weights were learned by "
                              "ada_quantize for 8 bits (%s); save without --reduce-range, or calibrate it with "
                              "arq_quantize",
                              rl->name, rl->ada_file);
        }
        float *s = malloc(sizeof *s * (size_t)rl->n_scale_w);
        if (!s) {
            calq__reduce_range_end(rec, *saved);
            *saved = NULL;
            return calq__fail(err, CALQ_ERR_OUT_OF_MEMORY, NULL, "save: out of memory");
        }
        for (int c = 0; c < rl->n_scale_w; c++) s[c] = (float)((double)rl->scale_w[c] * 127.0 / 63.0);
        (*saved)[i] = rl->scale_w;
        rl->scale_w = s;
    }
    return CALQ_OK;
}

void calq__reduce_range_end(calq_record *rec, float **saved)
{
    if (!saved) return;
    for (int i = 0; i < rec->n_layers; i++) {
        if (!saved[i]) continue;
        free(rec->layers[i].scale_w);
        rec->layers[i].scale_w = saved[i];
    }
    free(saved);
}
