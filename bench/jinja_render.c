/* jinja_render.c — time of text/jinja on real chat templates: parse once, then render a 20-turn
 * conversation (user/assistant turns, tool calls and results, reasoning) with 5 tools, many times;
 * prints µs of CPU time per parse and per render for each template given (default: Qwen3.5-4B, SmolLM3 and
 * LFM2.5-Instruct from $STATELM_CACHE/llamacpp-ref/templates, fetched by scripts/fetch-models.sh).
 * Usage: bench_jinja_render [template.jinja ...] */
#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "text/jinja.h"

/* CPU time of this thread: the figures hold on a machine shared with other work. */
static double now_us(void) {
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec / 1e3;
}

static char *slurp(const char *path, size_t *n) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long len = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *b = malloc((size_t)len + 1);
    *n = b ? fread(b, 1, (size_t)len, f) : 0;
    if (b) b[*n] = '\0';
    fclose(f);
    return b;
}

static cJSON *conversation(void) {
    cJSON *ctx = cJSON_CreateObject(), *msgs = cJSON_AddArrayToObject(ctx, "messages");
    cJSON *tools = cJSON_AddArrayToObject(ctx, "tools");
    char buf[512];
    for (int i = 0; i < 5; i++) {
        snprintf(buf, sizeof buf,
                 "{\"type\": \"function\", \"function\": {\"name\": \"tool_%d\", \"description\": \"Does thing %d.\","
                 " \"parameters\": {\"type\": \"object\", \"properties\": {\"city\": {\"type\": \"string\", \"description\": \"A city\"},"
                 " \"days\": {\"type\": \"integer\"}}, \"required\": [\"city\"]}}}", i, i);
        cJSON_AddItemToArray(tools, cJSON_Parse(buf));
    }
    cJSON_AddItemToArray(msgs, cJSON_Parse("{\"role\": \"system\", \"content\": \"You are a helpful assistant.\"}"));
    for (int t = 0; t < 20; t++) {
        snprintf(buf, sizeof buf, "{\"role\": \"user\", \"content\": \"Question number %d: what is the weather like in city %d today?\"}", t, t);
        cJSON_AddItemToArray(msgs, cJSON_Parse(buf));
        if (t % 4 == 3) {
            snprintf(buf, sizeof buf, "{\"role\": \"assistant\", \"content\": \"\", \"tool_calls\": [{\"id\": \"call%06d\", \"type\": \"function\","
                     " \"function\": {\"name\": \"tool_%d\", \"arguments\": {\"city\": \"Paris\", \"days\": %d}}}]}", t, t % 5, t);
            cJSON_AddItemToArray(msgs, cJSON_Parse(buf));
            snprintf(buf, sizeof buf, "{\"role\": \"tool\", \"tool_call_id\": \"call%06d\", \"content\": \"{\\\"temp\\\": %d}\"}", t, 20 + t);
            cJSON_AddItemToArray(msgs, cJSON_Parse(buf));
        }
        snprintf(buf, sizeof buf, "{\"role\": \"assistant\", \"content\": \"Answer %d: it is sunny, about %d degrees.\", \"reasoning_content\": \"Think %d.\"}", t, 20 + t, t);
        cJSON_AddItemToArray(msgs, cJSON_Parse(buf));
    }
    cJSON_AddBoolToObject(ctx, "add_generation_prompt", 1);
    cJSON_AddStringToObject(ctx, "bos_token", "<s>");
    cJSON_AddStringToObject(ctx, "eos_token", "</s>");
    return ctx;
}

static int bench(const char *path, const cJSON *ctx) {
    size_t n;
    char *src = slurp(path, &n);
    if (!src) {
        fprintf(stderr, "%s: cannot read (run scripts/fetch-models.sh)\n", path);
        return 1;
    }
    slm_err e;
    err_clear(&e);
    jinja_template *t = NULL;
    int reps = 200;
    double t0 = now_us();
    for (int i = 0; i < reps; i++) {
        jinja_free(t);
        if (jinja_parse(src, n, NULL, &t, &e) != SLM_OK) {
            fprintf(stderr, "%s: %s\n", path, e.msg);
            free(src);
            return 1;
        }
    }
    double parse_us = (now_us() - t0) / reps;
    size_t out_n = 0;
    t0 = now_us();
    for (int i = 0; i < reps; i++) {
        char *out;
        jinja_span *sp;
        size_t ns;
        if (jinja_render(t, ctx, NULL, NULL, NULL, &out, &out_n, &sp, &ns, &e) != SLM_OK) {
            fprintf(stderr, "%s: %s\n", path, e.msg);
            break;
        }
        free(out);
        free(sp);
    }
    double render_us = (now_us() - t0) / reps;
    const char *base = strrchr(path, '/');
    printf("%-40s parse %7.1f us  render %7.1f us  (%zu bytes of prompt)\n", base ? base + 1 : path, parse_us, render_us, out_n);
    jinja_free(t);
    free(src);
    return 0;
}

int main(int argc, char **argv) {
    cJSON *ctx = conversation();
    int rc = 0;
    if (argc > 1) {
        for (int i = 1; i < argc; i++) rc |= bench(argv[i], ctx);
    } else {
        const char *cache = getenv("STATELM_CACHE"), *home = getenv("HOME");
        static const char *const names[] = {"Qwen3.5-4B.jinja", "HuggingFaceTB-SmolLM3-3B.jinja", "LFM2.5-Instruct.jinja"};
        for (size_t i = 0; i < 3; i++) {
            char path[4096];
            if (cache) snprintf(path, sizeof path, "%s/llamacpp-ref/templates/%s", cache, names[i]);
            else snprintf(path, sizeof path, "%s/.cache/statelm/llamacpp-ref/templates/%s", home ? home : "", names[i]);
            rc |= bench(path, ctx);
        }
    }
    cJSON_Delete(ctx);
    return rc;
}
