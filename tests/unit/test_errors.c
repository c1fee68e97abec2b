/* Error messages stay bounded and readable (issue 14 item 7): long names are cut with "..."
 * (src/base/cut.h), calq_error.layer holds a cut name, and a message that does not fit says so. */
#include <stdlib.h>
#include <string.h>

#include "base/error.h"
#include "expect.h"

static void test_cut(void)
{
    EXPECT(!strcmp(calq__cut("conv1").s, "conv1"));
    EXPECT(!strcmp(calq__cut(NULL).s, ""));
    char name[121];
    memset(name, 'a', 120);
    name[120] = 0;
    EXPECT(!strcmp(calq__cut(name).s, name)); /* CALQ__CUT_MAX bytes: kept */

    size_t n = 5u << 20; /* a 5 MB layer key */
    char *big = malloc(n + 1);
    memset(big, 'L', n);
    memcpy(big, "/backbone/", 10);
    memcpy(big + n - 8, "/conv_12", 8);
    big[n] = 0;
    const char *c = calq__cut(big).s;
    EXPECT(strlen(c) <= CALQ__CUT_MAX);
    EXPECT(!strncmp(c, "/backbone/LLL", 13));       /* the start says what it is */
    EXPECT(strstr(c, "L...L") != NULL);             /* the cut is marked */
    EXPECT(!strcmp(c + strlen(c) - 8, "/conv_12")); /* the end says which one */

    /* UTF-8: no character is split at either cut */
    for (size_t i = 0; i + 3 <= n; i += 3) memcpy(big + i, "\xe2\x82\xac", 3); /* euro signs */
    big[n - n % 3] = 0;
    c = calq__cut(big).s;
    size_t len = strlen(c);
    EXPECT(len <= CALQ__CUT_MAX);
    const char *dots = strstr(c, "...");
    EXPECT(dots && (dots - c) % 3 == 0 && (len - (size_t)(dots - c) - 3) % 3 == 0);

    char small[16];
    EXPECT(!strcmp(calq__cut_into("abcdefghijklmnopqrstuvwxyz", small, sizeof small), "abcdefgh...wxyz"));
    free(big);
}

static void test_fail(void)
{
    size_t n = 1u << 20;
    char *big = malloc(n + 1);
    memset(big, 'k', n);
    big[n] = 0;
    calq_error err = {0};
    /* a name printed in full cannot push out the rest of the message any more ... */
    EXPECT(calq__fail(&err, CALQ_ERR_BAD_FORMAT, big, "the model has no layer '%s'; remove it from the record",
                      calq__cut(big).s) == CALQ_ERR_BAD_FORMAT);
    EXPECT(strstr(err.message, "'; remove it from the record") != NULL);
    /* ... the layer field holds the cut name ... */
    EXPECT(strlen(err.layer) < CALQ_ERROR_NAME_MAX && strstr(err.layer, "k...k") != NULL);
    /* ... and a message cut at CALQ_ERROR_MESSAGE_MAX ends with "..." */
    calq__fail(&err, CALQ_ERR_BAD_FORMAT, NULL, "uncut: %s", big);
    EXPECT(strlen(err.message) == CALQ_ERROR_MESSAGE_MAX - 1 && !strcmp(err.message + strlen(err.message) - 3, "..."));
    /* a long context prefix is cut too, keeping the message it prefixes */
    calq__fail(&err, CALQ_ERR_IO, NULL, "cannot read the batch");
    calq__prefix(&err, "%s", big);
    EXPECT(strlen(err.message) < 400 && strstr(err.message, "k...k") &&
           strstr(err.message, "k: cannot read the batch"));
    free(big);
}

int main(void)
{
    test_cut();
    test_fail();
    if (!failures) printf("test_errors: all passed\n");
    return failures ? 1 : 0;
}
