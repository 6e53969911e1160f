/* check.h — the assertion of the C tests: CHECK(cond, printf-args) counts a failure in
 * `failures` and says where, without stopping the test (main returns failures != 0). */
#ifndef IG_TEST_CHECK_H
#define IG_TEST_CHECK_H
#include <stdio.h>

static int failures;
#define CHECK(cond, ...)                                         \
    do {                                                         \
        if (!(cond)) {                                           \
            failures++;                                          \
            fprintf(stderr, "FAIL %s:%d: ", __FILE__, __LINE__); \
            fprintf(stderr, __VA_ARGS__);                        \
            fprintf(stderr, "\n");                               \
        }                                                        \
    } while (0)

#endif
