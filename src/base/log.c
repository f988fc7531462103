/* log.c — formats a message and hands it to the logger callback. */
#include "base/log.h"

#include <stdarg.h>
#include <stdio.h>

void log_msg(const slm_logger *l, slm_log_level level, const char *fmt, ...) {
    if (!l || !l->fn) return;
    char buf[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    l->fn(l->user_data, level, buf);
}
