#include <stdio.h>
#include "calq.h"
int main(void) { printf("calq %s\n", CALQ_VERSION_STRING); return 0; }
