#include "exec/op.h"

const calq_op_def calq__ops_elementwise[] = {
    {0},
};
