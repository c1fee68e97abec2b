/* Replays a fuzz target's regression corpus (tests/fuzz/corpus/<target>: seeds and the inputs
 * that once crashed, regression-*) without libFuzzer: linked with the target's
 * LLVMFuzzerTestOneInput, it feeds every file of the folders and files it is given, in name
 * order, once. A target aborts (or ASan stops it) on a broken promise, so plain `ctest` in the
 * Release and ASan builds keeps every fixed crash fixed (issue 10, item 7); `make test-fuzz`
 * still explores with libFuzzer. An empty corpus is an error: it would replay nothing.
 * Usage: replay_<target> DIR|FILE... */
#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define REPLAY_MAX_BYTES (16u << 20) /* corpus files are small; a bigger one is a mistake */

static int replay_file(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (!f) {
        fprintf(stderr, "replay: cannot open %s\n", path);
        return -1;
    }
    uint8_t *buf = malloc(REPLAY_MAX_BYTES);
    size_t n = buf ? fread(buf, 1, REPLAY_MAX_BYTES, f) : 0;
    int bad = !buf || ferror(f) || !feof(f);
    fclose(f);
    if (bad) {
        fprintf(stderr, "replay: cannot read %s (or it is over %u bytes)\n", path, REPLAY_MAX_BYTES);
        free(buf);
        return -1;
    }
    /* an exact-size copy, so ASan sees a read past the input's end */
    uint8_t *data = malloc(n ? n : 1);
    if (!data) {
        free(buf);
        return -1;
    }
    memcpy(data, buf, n);
    free(buf);
    printf("replay: %s (%zu bytes)\n", path, n);
    fflush(stdout); /* the last name printed is the input that crashed */
    LLVMFuzzerTestOneInput(data, n);
    free(data);
    return 0;
}

static int cmp_name(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Replays path (a file, or every regular file in a folder); returns the count, -1 on error. */
static int replay_path(const char *path)
{
    struct stat st;
    if (stat(path, &st) != 0) {
        fprintf(stderr, "replay: %s does not exist\n", path);
        return -1;
    }
    if (!S_ISDIR(st.st_mode)) return replay_file(path) == 0 ? 1 : -1;
    DIR *d = opendir(path);
    if (!d) return -1;
    char **names = NULL;
    int n = 0, cap = 0, done = 0;
    for (struct dirent *e; (e = readdir(d));) {
        if (e->d_name[0] == '.') continue;
        if (n == cap) {
            char **nn = realloc(names, sizeof *names * (size_t)(cap = cap ? cap * 2 : 64));
            if (!nn) break;
            names = nn;
        }
        names[n++] = strdup(e->d_name);
    }
    closedir(d);
    if (n) qsort(names, (size_t)n, sizeof *names, cmp_name);
    for (int i = 0; i < n; i++) {
        char file[4096];
        snprintf(file, sizeof file, "%s/%s", path, names[i]);
        if (done >= 0 && stat(file, &st) == 0 && S_ISREG(st.st_mode)) done = replay_file(file) == 0 ? done + 1 : -1;
        free(names[i]);
    }
    free(names);
    return done;
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: %s DIR|FILE...\n", argv[0]);
        return 2;
    }
    int total = 0;
    for (int i = 1; i < argc; i++) {
        int n = replay_path(argv[i]);
        if (n < 0) return 1;
        total += n;
    }
    if (total == 0) {
        fprintf(stderr, "replay: no input in the corpus: nothing was replayed\n");
        return 1;
    }
    printf("replay: %d inputs, no failure\n", total);
    return 0;
}
