#include "base/cut.h"

#include <string.h>

static int continuation(char c)
{
    return ((unsigned char)c & 0xC0) == 0x80; /* 10xxxxxx: inside a UTF-8 character */
}

char *calq__cut_into(const char *s, char *buf, size_t n)
{
    if (!s) s = "";
    size_t len = strlen(s);
    if (len < n) {
        memcpy(buf, s, len + 1);
        return buf;
    }
    /* two thirds from the start (where a name says what it is), the rest from the end (where it
     * says which one: ".../stage3/conv_12"); both cuts fall between characters */
    size_t room = n - 1 - 3, head = room * 2 / 3, from = len - (room - head);
    while (head > 0 && continuation(s[head])) head--;
    while (from < len && continuation(s[from])) from++;
    memcpy(buf, s, head);
    memcpy(buf + head, "...", 3);
    memcpy(buf + head + 3, s + from, len - from + 1);
    return buf;
}

calq__cut_buf calq__cut(const char *s)
{
    calq__cut_buf b;
    calq__cut_into(s, b.s, sizeof b.s);
    return b;
}
