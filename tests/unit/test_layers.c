/* The layer rule of docs/architecture.md, enforced: the "Layers" table says which folders each
 * folder may use; every `#include "..."` under src/ and tools/ must respect it. A violation is
 * reported as file:line with the rule that forbids it. The table is read from the document, so
 * the document and the code cannot drift apart.
 *
 * Usage: test_layers [REPO_ROOT] (ctest passes the source folder). */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "expect.h"

#define MAX_LAYERS 32
#define MAX_GEN    16
#define NAME_MAX_  64

typedef struct layer {
    char name[NAME_MAX_]; /* "base", "exec", ..., "tools" */
    char uses[MAX_LAYERS][NAME_MAX_];
    int n_uses;
} layer;

static layer layers[MAX_LAYERS];
static int n_layers;
static char gen_header[MAX_GEN][128], gen_folder[MAX_GEN][NAME_MAX_];
static int n_gen;
static int n_includes, n_files;
static const char *root;

static char *read_all(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *buf = malloc((size_t)n + 1);
    if (buf && fread(buf, 1, (size_t)n, f) != (size_t)n) {
        free(buf);
        buf = NULL;
    }
    if (buf) buf[n] = 0;
    fclose(f);
    return buf;
}

static void trim(char *s)
{
    size_t n = strlen(s);
    while (n && (s[n - 1] == ' ' || s[n - 1] == '`')) s[--n] = 0;
    size_t k = 0;
    while (s[k] == ' ' || s[k] == '`') k++;
    memmove(s, s + k, strlen(s + k) + 1);
}

/* "src/exec/" -> "exec", "tools/" -> "tools"; other paths (include/, python/) -> "". */
static void folder_key(const char *cell, char *out, size_t n)
{
    char c[256];
    snprintf(c, sizeof c, "%s", cell);
    trim(c);
    size_t len = strlen(c);
    if (len && c[len - 1] == '/') c[--len] = 0;
    if (strncmp(c, "src/", 4) == 0 && !strchr(c + 4, '/'))
        snprintf(out, n, "%s", c + 4);
    else if (strcmp(c, "tools") == 0)
        snprintf(out, n, "tools");
    else
        out[0] = 0;
}

static layer *find_layer(const char *name)
{
    for (int i = 0; i < n_layers; i++)
        if (strcmp(layers[i].name, name) == 0) return &layers[i];
    return NULL;
}

/* Splits a table row "| a | b | c |" into cells (in place). Returns the cell count. */
static int split_row(char *line, char **cells, int max)
{
    if (line[0] != '|') return 0;
    int n = 0;
    char *p = line + 1;
    while (n < max) {
        char *bar = strchr(p, '|');
        if (!bar) break;
        *bar = 0;
        cells[n++] = p;
        p = bar + 1;
    }
    return n;
}

/* Reads the "## Layers" table and the generated-header table that follows it. */
static int read_table(const char *doc_path)
{
    char *doc = read_all(doc_path);
    if (!doc) {
        fprintf(stderr, "cannot read %s\n", doc_path);
        return -1;
    }
    char *sec = strstr(doc, "\n## Layers");
    char *sec_end = sec ? strstr(sec + 1, "\n## ") : NULL;
    if (!sec) {
        fprintf(stderr, "%s: no \"## Layers\" section\n", doc_path);
        free(doc);
        return -1;
    }
    if (sec_end) *sec_end = 0;
    int table = 0; /* 1: the layer table, 2: the generated headers */
    for (char *line = strtok(sec, "\n"); line; line = strtok(NULL, "\n")) {
        char copy[4096];
        snprintf(copy, sizeof copy, "%s", line);
        char *cells[8] = {0};
        int nc = split_row(copy, cells, 8);
        if (nc == 0) continue;
        char head[256];
        snprintf(head, sizeof head, "%s", cells[0]);
        trim(head);
        if (strcmp(head, "folder") == 0) {
            table = 1;
            continue;
        }
        if (strcmp(head, "generated header") == 0) {
            table = 2;
            continue;
        }
        if (strncmp(head, "---", 3) == 0) continue;
        if (table == 2 && nc >= 2 && n_gen < MAX_GEN) {
            snprintf(gen_header[n_gen], sizeof gen_header[0], "%s", head);
            folder_key(cells[1], gen_folder[n_gen], sizeof gen_folder[0]);
            n_gen++;
            continue;
        }
        if (table != 1 || nc < 3) continue;
        char key[NAME_MAX_];
        folder_key(cells[0], key, sizeof key);
        if (!key[0]) continue; /* include/calq.h, python/, tests/, bench/: not scanned */
        if (n_layers == MAX_LAYERS) break;
        layer *L = &layers[n_layers++];
        snprintf(L->name, sizeof L->name, "%s", key);
        char uses[1024];
        snprintf(uses, sizeof uses, "%s", cells[2]);
        trim(uses);
        if (strcmp(uses, "libc") == 0 || strcmp(uses, "include/calq.h") == 0 || strcmp(uses, "—") == 0) continue;
        for (char *save = NULL, *u = strtok_r(uses, ",", &save); u; u = strtok_r(NULL, ",", &save)) {
            char name[256];
            snprintf(name, sizeof name, "%s", u);
            trim(name);
            if (L->n_uses < MAX_LAYERS) snprintf(L->uses[L->n_uses++], NAME_MAX_, "%s", name);
        }
    }
    free(doc);
    /* every name in a "uses" cell must be a row: a typo would silently forbid nothing */
    int bad = 0;
    for (int i = 0; i < n_layers; i++)
        for (int k = 0; k < layers[i].n_uses; k++)
            if (!find_layer(layers[i].uses[k])) {
                fprintf(stderr, "%s: the row of %s uses \"%s\", which is not a folder of the table\n", doc_path,
                        layers[i].name, layers[i].uses[k]);
                bad++;
            }
    return bad ? -1 : 0;
}

static int may_use(const layer *L, const char *other)
{
    if (strcmp(L->name, other) == 0) return 1;
    for (int k = 0; k < L->n_uses; k++)
        if (strcmp(L->uses[k], other) == 0) return 1;
    return 0;
}

static int file_exists(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0 && S_ISREG(st.st_mode);
}

static void list_uses(const layer *L, char *buf, size_t n)
{
    size_t at = 0;
    buf[0] = 0;
    for (int k = 0; k < L->n_uses && at < n; k++)
        at += (size_t)snprintf(buf + at, n - at, "%s%s", k ? ", " : "", L->uses[k]);
    if (!L->n_uses) snprintf(buf, n, "%s", strcmp(L->name, "tools") == 0 ? "calq.h only" : "no other folder");
}

/* Checks one include of `rel` (a path relative to the root) made by a file of layer L. */
static void check_include(const layer *L, const char *rel, int line, const char *inc)
{
    n_includes++;
    if (strcmp(inc, "calq.h") == 0) return; /* the public header: everyone's */
    char dir[1024], path[2048];
    snprintf(dir, sizeof dir, "%s", rel);
    char *slash = strrchr(dir, '/');
    if (slash) *slash = 0;
    /* a header next to the including file is the folder's own */
    snprintf(path, sizeof path, "%s/%s/%s", root, dir, inc);
    const char *target = NULL;
    char key[NAME_MAX_] = "";
    if (strcmp(L->name, "tools") == 0) {
        if (file_exists(path) && !strstr(inc, "..")) return;
        fprintf(stderr, "%s:%d: tools may include only calq.h and its own headers, not \"%s\" (docs/architecture.md)\n",
                rel, line, inc);
        failures++;
        return;
    }
    for (int g = 0; g < n_gen; g++)
        if (strcmp(gen_header[g], inc) == 0) target = gen_folder[g];
    if (!target) {
        snprintf(path, sizeof path, "%s/src/%s", root, inc);
        const char *s = strchr(inc, '/');
        if (s && file_exists(path) && !strstr(inc, "..")) {
            snprintf(key, sizeof key, "%.*s", (int)(s - inc), inc);
            target = key;
        }
    }
    if (!target) {
        fprintf(stderr,
                "%s:%d: \"%s\" is not a header under src/ (write it as \"folder/name.h\") nor a generated header of "
                "the table in docs/architecture.md\n",
                rel, line, inc);
        failures++;
        return;
    }
    if (may_use(L, target)) return;
    char allowed[1024];
    list_uses(L, allowed, sizeof allowed);
    fprintf(stderr, "%s:%d: %s may not include \"%s\" (%s); %s may use: %s (docs/architecture.md, Layers)\n", rel, line,
            L->name, inc, target, L->name, allowed);
    failures++;
}

static void scan_file(const layer *L, const char *rel)
{
    char path[2048];
    snprintf(path, sizeof path, "%s/%s", root, rel);
    char *text = read_all(path);
    if (!text) {
        fprintf(stderr, "cannot read %s\n", path);
        failures++;
        return;
    }
    n_files++;
    int line = 1;
    for (char *p = text; *p; line++) {
        char *end = strchr(p, '\n');
        if (end) *end = 0;
        const char *q = p;
        while (*q == ' ' || *q == '\t') q++;
        if (*q == '#') {
            q++;
            while (*q == ' ' || *q == '\t') q++;
            if (strncmp(q, "include", 7) == 0) {
                q += 7;
                while (*q == ' ' || *q == '\t') q++;
                if (*q == '"') {
                    const char *e = strchr(q + 1, '"');
                    if (e) {
                        char inc[512];
                        snprintf(inc, sizeof inc, "%.*s", (int)(e - q - 1), q + 1);
                        check_include(L, rel, line, inc);
                    }
                }
            }
        }
        if (!end) break;
        p = end + 1;
    }
    free(text);
}

static int is_source(const char *name)
{
    size_t n = strlen(name);
    return (n > 2 && strcmp(name + n - 2, ".c") == 0) || (n > 2 && strcmp(name + n - 2, ".h") == 0);
}

/* Every .c/.h under rel (recursively) belongs to L. */
static void scan_dir(const layer *L, const char *rel)
{
    char path[2048];
    snprintf(path, sizeof path, "%s/%s", root, rel);
    DIR *d = opendir(path);
    if (!d) {
        fprintf(stderr, "cannot open %s\n", path);
        failures++;
        return;
    }
    for (struct dirent *e; (e = readdir(d)) != NULL;) {
        if (e->d_name[0] == '.') continue;
        char sub[2048], full[4096];
        snprintf(sub, sizeof sub, "%s/%s", rel, e->d_name);
        snprintf(full, sizeof full, "%s/%s", root, sub);
        struct stat st;
        if (stat(full, &st) != 0) continue;
        if (S_ISDIR(st.st_mode))
            scan_dir(L, sub);
        else if (is_source(e->d_name))
            scan_file(L, sub);
    }
    closedir(d);
}

int main(int argc, char **argv)
{
    root = argc > 1 ? argv[1] : ".";
    char doc[2048];
    snprintf(doc, sizeof doc, "%s/docs/architecture.md", root);
    if (read_table(doc) != 0) return 1;
    EXPECT(n_layers >= 10); /* base .. api, tools: the table was found and read */
    EXPECT(find_layer("tools") != NULL);

    /* every folder under src/ has a row */
    char src[2048];
    snprintf(src, sizeof src, "%s/src", root);
    DIR *d = opendir(src);
    if (!d) {
        fprintf(stderr, "cannot open %s\n", src);
        return 1;
    }
    for (struct dirent *e; (e = readdir(d)) != NULL;) {
        if (e->d_name[0] == '.') continue;
        char full[4096];
        snprintf(full, sizeof full, "%s/%s", src, e->d_name);
        struct stat st;
        if (stat(full, &st) != 0 || !S_ISDIR(st.st_mode)) continue;
        const layer *L = find_layer(e->d_name);
        if (!L) {
            fprintf(stderr, "src/%s/ has no row in the Layers table of docs/architecture.md\n", e->d_name);
            failures++;
            continue;
        }
        char rel[512];
        snprintf(rel, sizeof rel, "src/%s", e->d_name);
        scan_dir(L, rel);
    }
    closedir(d);
    if (find_layer("tools")) scan_dir(find_layer("tools"), "tools");
    EXPECT(n_files > 50);
    printf("test_layers: %d folders, %d files, %d includes, %d violation(s)\n", n_layers, n_files, n_includes,
           failures);
    return failures != 0;
}
