/* err.h — status + message pairs used by every internal function that can fail.
 * An slm_err is caller-owned; err_set formats a one-line message and returns the status so a
 * failing path reads `return err_set(e, SLM_ERR_FORMAT, "...")`. Passing e = NULL is allowed. */
#ifndef SLM_BASE_ERR_H
#define SLM_BASE_ERR_H

#include "statelm.h"

#define SLM_ERR_MSG_CAP 512
/* What slm_session_errmsg and slm_plan_errmsg return for a NULL handle (statelm.h NULL policy). */
#define SLM_NULL_HANDLE_MSG "invalid argument: NULL handle"

typedef struct slm_err {
    slm_status status;
    char msg[SLM_ERR_MSG_CAP];
} slm_err;

void err_clear(slm_err *e);
/* Sets status and message (printf format) and returns status. Keeps an earlier message when the
 * status is already an error, so the innermost cause wins. */
slm_status err_set(slm_err *e, slm_status status, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
/* Prefixes the current message with context ("loading x: " + msg). */
void err_prefix(slm_err *e, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Copies "message" (or the status text if empty) into buf (NUL-terminated, truncated). */
void err_copy_out(const slm_err *e, char *buf, size_t cap);

#ifdef SLM_DEBUG
#include <stdio.h>
#include <stdlib.h>
#define SLM_ASSERT(c)                                                                              \
    do {                                                                                           \
        if (!(c)) {                                                                                \
            fprintf(stderr, "%s:%d: internal assertion failed: %s\n", __FILE__, __LINE__, #c);     \
            abort();                                                                               \
        }                                                                                          \
    } while (0)
#else
#define SLM_ASSERT(c) ((void)0)
#endif

#endif
