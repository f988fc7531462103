/* err.c — status names (from the SLM_STATUS_LIST table) and the slm_err helpers. */
#include "base/err.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

SLM_API const char *slm_status_name(slm_status status) {
    switch (status) {
#define SLM_X_NAME(name, value, text) case name: return #name;
        SLM_STATUS_LIST(SLM_X_NAME)
#undef SLM_X_NAME
    }
    return "SLM_UNKNOWN_STATUS";
}

SLM_API const char *slm_status_str(slm_status status) {
    switch (status) {
#define SLM_X_STR(name, value, text) case name: return text;
        SLM_STATUS_LIST(SLM_X_STR)
#undef SLM_X_STR
    }
    return "unknown status";
}

void err_clear(slm_err *e) {
    if (!e) return;
    e->status = SLM_OK;
    e->msg[0] = '\0';
}

slm_status err_set(slm_err *e, slm_status status, const char *fmt, ...) {
    if (!e) return status;
    if (e->status != SLM_OK && e->msg[0]) return status;
    e->status = status;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(e->msg, sizeof e->msg, fmt, ap);
    va_end(ap);
    return status;
}

void err_prefix(slm_err *e, const char *fmt, ...) {
    if (!e) return;
    char head[SLM_ERR_MSG_CAP];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(head, sizeof head, fmt, ap);
    va_end(ap);
    size_t hl = strnlen(head, sizeof head - 1);
    size_t ml = strnlen(e->msg, sizeof e->msg - 1);
    if (hl + ml > sizeof e->msg - 1) ml = sizeof e->msg - 1 - hl;
    memmove(e->msg + hl, e->msg, ml);
    memcpy(e->msg, head, hl);
    e->msg[hl + ml] = '\0';
}

void err_copy_out(const slm_err *e, char *buf, size_t cap) {
    if (!buf || cap == 0) return;
    const char *m = (e && e->msg[0]) ? e->msg : slm_status_str(e ? e->status : SLM_OK);
    snprintf(buf, cap, "%s", m);
}
