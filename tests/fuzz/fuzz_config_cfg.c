/* libFuzzer target for the simplified .cfg reader (amct-reference.md §7.3, through src/textproto).
 * Any input must either fail with a message or give a config whose every entry is a quantizable
 * layer of the model and whose JSON, written and read back, reproduces itself byte for byte. */
#include "fuzz_config_common.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    return fuzz_config_one(calq__config_parse_cfg, data, size, "fuzz.cfg");
}
