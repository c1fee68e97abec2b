/* docs/operators.md lists every operator the registry implements (and nothing it does not), so
 * the "supported set" the load error points to stays true. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/file.h"
#include "op_harness.h"

int main(int argc, char **argv)
{
    const char *path = argc > 1 ? argv[1] : "docs/operators.md"; /* ctest passes the path */
    char *doc;
    size_t n;
    calq_error err = {0};
    if (calq__read_file(path, &doc, &n, &err) != CALQ_OK) {
        fprintf(stderr, "%s\n", err.message);
        return 1;
    }
    int listed = 0;
    for (const calq_op_def *d; (d = calq__op_at(listed)) != NULL;) {
        char needle[96];
        snprintf(needle, sizeof needle, "`%s`", d->op_type);
        if (!strstr(doc, needle)) {
            fprintf(stderr, "%s does not list %s\n", path, d->op_type);
            failures++;
        }
        listed++;
    }
    /* and every `Name` in the table rows is an operator calq has */
    for (char *p = strstr(doc, "\n| "); p; p = strstr(p + 1, "\n| ")) {
        char *line_end = strchr(p + 1, '\n');
        for (char *q = strchr(p, '`'); q && (!line_end || q < line_end); q = strchr(q + 1, '`')) {
            char *e = strchr(q + 1, '`');
            if (!e || (line_end && e > line_end)) break;
            char name[96];
            snprintf(name, sizeof name, "%.*s", (int)(e - q - 1), q + 1);
            if (!calq__op_find("", name)) {
                fprintf(stderr, "%s lists %s, which calq does not implement\n", path, name);
                failures++;
            }
            q = e;
        }
    }
    printf("test_operator_docs: %d operators, %d failure(s)\n", listed, failures);
    free(doc);
    return failures != 0;
}
