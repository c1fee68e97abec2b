/* The calibration data flags shared by calibration and compare: AMCT's --data_dir /
 * --data_types, calq's --images (with the preprocessing flags) and --npy; their table rows are
 * CLI_DATA_FLAGS (cli.h). */
#include <stdio.h>
#include <string.h>

#include "cli.h"

void cli_data_init(cli_data *d)
{
    memset(d, 0, sizeof *d);
    calq_image_opts_init(&d->img);
}

const char *cli_data_missing(const cli_data *d)
{
    if (!!d->data_dir + !!d->images + !!d->npy != 1)
        return "give the data with exactly one of --data_dir, --images, --npy";
    return NULL;
}

calq_status cli_data_open(const cli_data *d, const char *path, const calq_model *m, calq_data **out, calq_error *err)
{
    if (d->data_dir) return calq_data_open_bin(path ? path : d->data_dir, d->data_types, out, err);
    if (d->npy) return calq_data_open_npy(path ? path : d->npy, out, err);
    calq_value_info in;
    calq_status st = calq_model_input_info(m, 0, &in);
    int bs = st == CALQ_OK && in.ndim > 0 && in.dims[0] > 0 ? (int)in.dims[0] : 1;
    return calq_data_open_images(path ? path : d->images, &d->img, bs, out, err);
}
