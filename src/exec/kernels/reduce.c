#include "exec/op.h"

const calq_op_def calq__ops_reduce[] = {
    {0},
};
