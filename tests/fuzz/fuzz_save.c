/* libFuzzer target for save (issue 6, src/export): a fuzzed record file against the in-memory
 * test model (conv, pool, fc, mm, deconv; tests/support/calib_model.h), saved in all four
 * formats at once. Any record either fails with a message and leaves no file (nor temporary
 * file) behind, or passes the checks and every file is written; hostile factors (tiny or huge
 * scales, extreme offsets, shift_bit) must not crash the weight / bias / deq_scale arithmetic. */
#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../support/calib_model.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static int count_files(const char *dir)
{
    int n = 0;
    DIR *d = opendir(dir);
    for (struct dirent *e; d && (e = readdir(d));)
        if (e->d_name[0] != '.') n++;
    if (d) closedir(d);
    return n;
}

static void clear(const char *dir)
{
    char path[512];
    DIR *d = opendir(dir);
    for (struct dirent *e; d && (e = readdir(d));) {
        if (e->d_name[0] == '.') continue;
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        unlink(path);
    }
    if (d) closedir(d);
}

static char dir[64], record[96], prefix[96];

/* The run's folder and record go when the process exits (libFuzzer's -max_total_time ends with
 * exit(): every run left /tmp/calq_fuzz_save_<pid> and its record behind). */
static void remove_files(void)
{
    clear(dir);
    rmdir(dir);
    unlink(record);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static calq_model *model;
    calq_error err = {0};
    if (!model) {
        model = calib_test_model(&err);
        snprintf(dir, sizeof dir, "/tmp/calq_fuzz_save_%d", (int)getpid());
        mkdir(dir, 0700);
        snprintf(record, sizeof record, "%s.record.txt", dir);
        snprintf(prefix, sizeof prefix, "%s/m", dir);
        atexit(remove_files);
    }
    if (!model) abort();
    FILE *f = fopen(record, "wb");
    if (!f) return 0;
    fwrite(data, 1, size, f);
    fclose(f);
    const calq_save_format fmts[4] = {CALQ_SAVE_QDQ, CALQ_SAVE_QOPERATOR, CALQ_SAVE_ASCEND_FAKE_QUANT,
                                      CALQ_SAVE_ASCEND_DEPLOY};
    calq_status st = calq_save_models(model, record, NULL, fmts, 4, prefix, &err);
    int n = count_files(dir);
    if (st != CALQ_OK && (!err.message[0] || n != 0)) abort(); /* a failure says why and writes nothing */
    if (st == CALQ_OK && n != 4) abort();                      /* success writes every file, no temp left */
    clear(dir);
    return 0;
}
