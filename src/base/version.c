/* calq_version: the library's own version, for programs that check at run time which library
 * the dynamic linker gave them (libuv's uv_version). */
#include "calq.h"

unsigned int calq_version(void)
{
    return CALQ_VERSION_HEX;
}

const char *calq_version_string(void)
{
    return CALQ_VERSION_STRING;
}
