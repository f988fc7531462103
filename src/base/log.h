/* log.h — the library logs only through the caller's callback (it never prints). */
#ifndef SLM_BASE_LOG_H
#define SLM_BASE_LOG_H

#include "statelm.h"

typedef struct slm_logger {
    slm_log_fn fn;       /* NULL = silent */
    void *user_data;
} slm_logger;

void log_msg(const slm_logger *l, slm_log_level level, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

#endif
