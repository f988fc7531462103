/* fuzz_check.h — FUZZ_CHECK(cond): a contract check of the fuzz targets, on in every build (the
 * replay tests run the targets under release and ASan): prints the failed condition and aborts. */
#ifndef SLM_FUZZ_CHECK_H
#define SLM_FUZZ_CHECK_H

#include <stdio.h>
#include <stdlib.h>

#define FUZZ_CHECK(c)                                                                              \
    do {                                                                                           \
        if (!(c)) {                                                                                \
            fprintf(stderr, "%s:%d: contract violated: %s\n", __FILE__, __LINE__, #c);             \
            abort();                                                                               \
        }                                                                                          \
    } while (0)

#endif
