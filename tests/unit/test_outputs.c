/* One run's outputs (issue 14, items 4-5, src/base/outputs.c): the lock on <prefix>.lock, the
 * removal of temporary files a killed run left, and the all-or-nothing commit of several files
 * (a record and config whose commit fails leave the earlier ones as they were). */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "base/outputs.h"

#include "expect.h"

static char dir[64];

static void put(const char *name, const char *text)
{
    char p[256];
    snprintf(p, sizeof p, "%s/%s", dir, name);
    FILE *fp = fopen(p, "w");
    if (fp) {
        fputs(text, fp);
        fclose(fp);
    }
}

static bool exists(const char *name)
{
    char p[256];
    snprintf(p, sizeof p, "%s/%s", dir, name);
    return access(p, F_OK) == 0;
}

static bool holds(const char *name, const char *text)
{
    char p[256], buf[256] = "";
    snprintf(p, sizeof p, "%s/%s", dir, name);
    FILE *fp = fopen(p, "r");
    if (!fp) return false;
    size_t n = fread(buf, 1, sizeof buf - 1, fp);
    fclose(fp);
    buf[n] = 0;
    return strcmp(buf, text) == 0;
}

/* A pid no process has: a child that has exited and been reaped. */
static long dead_pid(void)
{
    pid_t p = fork();
    if (p == 0) _exit(0);
    waitpid(p, NULL, 0);
    return (long)p;
}

static void test_lock(void)
{
    char prefix[128];
    snprintf(prefix, sizeof prefix, "%s/m", dir);
    calq_error err = {0};
    calq_outputs *a = NULL, *b = NULL;
    EXPECT_STATUS(calq_outputs_begin(prefix, &a, &err), CALQ_OK, &err, NULL);
    EXPECT(exists("m.lock"));
    /* a second run on the prefix (flock conflicts between two opens in one process too) */
    char want[64];
    snprintf(want, sizeof want, "another calq run (pid %ld) is writing the outputs of", (long)getpid());
    EXPECT_STATUS(calq_outputs_begin(prefix, &b, &err), CALQ_ERR_IO, &err, want);
    EXPECT(b == NULL && strstr(err.message, "m.lock") && strstr(err.message, "another --save_path"));
    /* another prefix in the same folder is independent */
    char other[128];
    snprintf(other, sizeof other, "%s/n", dir);
    EXPECT_STATUS(calq_outputs_begin(other, &b, &err), CALQ_OK, &err, NULL);
    calq_outputs_abort(b);
    EXPECT_STATUS(calq_outputs_commit(a, &err), CALQ_OK, &err, NULL);
    EXPECT(!exists("m.lock") && !exists("n.lock")); /* removed when released */
    EXPECT_STATUS(calq_outputs_begin(prefix, &a, &err), CALQ_OK, &err, NULL);
    calq_outputs_abort(a);
}

static void test_stale(void)
{
    char prefix[128], name[128];
    snprintf(prefix, sizeof prefix, "%s/m", dir);
    long dead = dead_pid();
    const char *stale[] = {"m_qdq.onnx", "m_record.txt", "m_deploy_weights.caffemodel"};
    for (int i = 0; i < 3; i++) {
        snprintf(name, sizeof name, "%s.tmp.%ld", stale[i], dead);
        put(name, "partial");
    }
    snprintf(name, sizeof name, "m_config.json.tmp.%ld", (long)getpid()); /* a live writer's */
    put(name, "live");
    snprintf(name, sizeof name, "other_qdq.onnx.tmp.%ld", dead); /* another prefix's */
    put(name, "other");
    put("m_notes.tmp.txt", "not a temporary file");
    calq_error err = {0};
    calq_outputs *o = NULL;
    EXPECT_STATUS(calq_outputs_begin(prefix, &o, &err), CALQ_OK, &err, NULL);
    for (int i = 0; i < 3; i++) {
        snprintf(name, sizeof name, "%s.tmp.%ld", stale[i], dead);
        EXPECT(!exists(name));
    }
    snprintf(name, sizeof name, "m_config.json.tmp.%ld", (long)getpid());
    EXPECT(exists(name));
    snprintf(name, sizeof name, "other_qdq.onnx.tmp.%ld", dead);
    EXPECT(exists(name));
    EXPECT(exists("m_notes.tmp.txt"));
    calq_outputs_abort(o);
}

/* Item 4: a record that cannot be written (its target is a folder) leaves the config as it
 * was, although the config was staged first and could be written. */
static void test_all_or_nothing(void)
{
    char prefix[128], path[192];
    snprintf(prefix, sizeof prefix, "%s/r", dir);
    put("r_config.json", "old config");
    snprintf(path, sizeof path, "%s/r_record.txt", dir);
    mkdir(path, 0755);
    calq_error err = {0};
    calq_outputs *o = NULL;
    FILE *fp;
    EXPECT_STATUS(calq_outputs_begin(prefix, &o, &err), CALQ_OK, &err, NULL);
    char cfg[192];
    snprintf(cfg, sizeof cfg, "%s/r_config.json", dir);
    EXPECT_STATUS(calq__staged_open(&o->staged, cfg, &fp, &err), CALQ_OK, &err, NULL);
    fputs("new config", fp);
    EXPECT_STATUS(calq__staged_open(&o->staged, path, &fp, &err), CALQ_OK, &err, NULL);
    fputs("new record", fp);
    /* what a save reads back: the staged file, before anything is renamed */
    EXPECT(strstr(calq__outputs_source(o, cfg), ".tmp.") != NULL);
    EXPECT(calq__outputs_source(o, "elsewhere") != NULL && !strcmp(calq__outputs_source(o, "elsewhere"), "elsewhere"));
    EXPECT_STATUS(calq_outputs_commit(o, &err), CALQ_ERR_IO, &err, "it is a folder");
    EXPECT(holds("r_config.json", "old config"));
    EXPECT(!exists("r.lock"));
    rmdir(path);
    /* and when both can be written, both are */
    EXPECT_STATUS(calq_outputs_begin(prefix, &o, &err), CALQ_OK, &err, NULL);
    EXPECT_STATUS(calq__staged_open(&o->staged, cfg, &fp, &err), CALQ_OK, &err, NULL);
    fputs("new config", fp);
    EXPECT_STATUS(calq__staged_open(&o->staged, path, &fp, &err), CALQ_OK, &err, NULL);
    fputs("new record", fp);
    EXPECT_STATUS(calq_outputs_commit(o, &err), CALQ_OK, &err, NULL);
    EXPECT(holds("r_config.json", "new config") && holds("r_record.txt", "new record"));
    unlink(cfg);
    unlink(path);
}

/* A set that keeps a new record but no model removes an earlier run's models at commit, after
 * the renames, and only then: a failing commit removes nothing (hostile-input probe #9: a failed
 * calibration left its new record beside the previous run's models). */
static void test_removals(void)
{
    char prefix[128], rec[192], model[192], gone[192];
    snprintf(prefix, sizeof prefix, "%s/d", dir);
    snprintf(rec, sizeof rec, "%s/d_record.txt", dir);
    snprintf(model, sizeof model, "%s/d_qdq.onnx", dir);
    snprintf(gone, sizeof gone, "%s/d_qoperator.onnx", dir); /* never written: no error */
    put("d_qdq.onnx", "old model");
    put("d_record.txt", "old record");
    calq_error err = {0};
    calq_outputs *o = NULL;
    FILE *fp;
    /* a commit that fails (the record's path is a folder) leaves the model */
    unlink(rec);
    mkdir(rec, 0755);
    EXPECT_STATUS(calq_outputs_begin(prefix, &o, &err), CALQ_OK, &err, NULL);
    EXPECT_STATUS(calq__staged_open(&o->staged, rec, &fp, &err), CALQ_OK, &err, NULL);
    fputs("new record", fp);
    EXPECT_STATUS(calq__staged_remove(&o->staged, model, &err), CALQ_OK, &err, NULL);
    EXPECT(!strcmp(calq__outputs_source(o, model), model)); /* a removal is nothing to read */
    EXPECT_STATUS(calq_outputs_commit(o, &err), CALQ_ERR_IO, &err, "it is a folder");
    EXPECT(holds("d_qdq.onnx", "old model"));
    rmdir(rec);
    EXPECT_STATUS(calq_outputs_begin(prefix, &o, &err), CALQ_OK, &err, NULL);
    EXPECT_STATUS(calq__staged_open(&o->staged, rec, &fp, &err), CALQ_OK, &err, NULL);
    fputs("new record", fp);
    EXPECT_STATUS(calq__staged_remove(&o->staged, model, &err), CALQ_OK, &err, NULL);
    EXPECT_STATUS(calq__staged_remove(&o->staged, gone, &err), CALQ_OK, &err, NULL);
    EXPECT_STATUS(calq_outputs_commit(o, &err), CALQ_OK, &err, NULL);
    EXPECT(holds("d_record.txt", "new record") && !exists("d_qdq.onnx") && !exists("d_qoperator.onnx"));
    unlink(rec);
}

int main(void)
{
    snprintf(dir, sizeof dir, "/tmp/calq_outputs_XXXXXX");
    if (!mkdtemp(dir)) return 1;
    test_lock();
    test_stale();
    test_all_or_nothing();
    test_removals();
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    if (system(cmd) != 0) failures++;
    if (failures) fprintf(stderr, "%d failure(s)\n", failures);
    return failures ? 1 : 0;
}
