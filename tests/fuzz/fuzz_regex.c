/* fuzz_regex.c — libFuzzer target for the regex compiler (src/grammar/regex.c): the input is a
 * pattern. A refusal must be one of the documented statuses with a message "regex ..." and leave
 * the output buffer as it was; an accepted pattern must give GBNF that gr_parse accepts, and a few
 * random walks of its grammar (byte by byte through the matcher) must derive only valid JSON string
 * contents: no raw control character, quote or backslash, and only the escapes \" \\ \b \f \n \r \t
 * and \u00xx (lower-case hex) for a control character.
 * Seed corpus: tests/data/corpus/regex/ (JSONSchemaBench patterns, edge cases, refused ones). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/buf.h"
#include "grammar/grammar.h"
#include "grammar/matcher.h"
#include "grammar/regex.h"
#include "fuzz_check.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* True when s[0, n) is valid JSON string contents in the canonical spelling (above). */
static bool json_contents(const uint8_t *s, size_t n) {
    for (size_t i = 0; i < n; i++) {
        if (s[i] < 0x20 || s[i] == '"') return false;
        if (s[i] != '\\') continue;
        if (++i >= n) return false;
        if (strchr("\"\\bfnrt", s[i])) continue;
        if (s[i] != 'u' || i + 4 >= n || memcmp(s + i + 1, "00", 2)) return false;
        uint8_t h = s[i + 3], l = s[i + 4];
        if (!(h == '0' || h == '1') || !((l >= '0' && l <= '9') || (l >= 'a' && l <= 'f'))) return false;
        i += 4;
    }
    return true;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size > 1 << 12) return 0;
    buf out = buf_make(NULL);
    buf_puts(&out, "x ::= \"\"\n");
    slm_err e;
    err_clear(&e);
    slm_status st = gr_regex_to_gbnf((const char *)data, size, "r", &out, &e);
    if (st != SLM_OK) {
        FUZZ_CHECK(st == SLM_ERR_INVALID_ARG || st == SLM_ERR_UNSUPPORTED || st == SLM_ERR_RANGE || st == SLM_ERR_NOMEM);
        FUZZ_CHECK(!strncmp(e.msg, "regex", 5));
        FUZZ_CHECK(out.n == 9 && !strcmp(out.p, "x ::= \"\"\n"));
        buf_free(&out);
        return 0;
    }
    gr_grammar *g = NULL;
    st = gr_parse(out.p, out.n, "r", NULL, &g, &e);
    if (st != SLM_OK) fprintf(stderr, "GBNF refused: %s\n%s", e.msg, out.p);
    FUZZ_CHECK(st == SLM_OK);
    uint32_t seed = 2166136261u;
    for (size_t i = 0; i < size; i++) seed = (seed ^ data[i]) * 16777619u;
    gm m;
    gm_init(&m, g, NULL);
    for (int walk = 0; walk < 4; walk++) {
        uint8_t s[64];
        size_t n = 0;
        int32_t d = gm_start(&m);
        while (d >= 0 && n < sizeof s) {
            seed = seed * 1103515245u + 12345u;
            if (gm_can_end(&m, d) && (seed >> 16) % 4 == 0) break;
            int32_t next[256], k = 0;
            uint8_t bytes[256];
            for (int b = 0; b < 256; b++) {
                int32_t t = gm_step(&m, d, (uint8_t)b);
                FUZZ_CHECK(t != GM_NOMEM);
                if (t >= 0) {
                    bytes[k] = (uint8_t)b;
                    next[k++] = t;
                }
            }
            FUZZ_CHECK(k > 0 || gm_can_end(&m, d)); /* every live state can continue or end */
            if (!k) break;
            seed = seed * 1103515245u + 12345u;
            int pick = (int)((seed >> 16) % (uint32_t)k);
            s[n++] = bytes[pick];
            d = next[pick];
        }
        if (d >= 0 && gm_can_end(&m, d)) FUZZ_CHECK(json_contents(s, n));
    }
    gm_deinit(&m);
    gr_free(g);
    buf_free(&out);
    return 0;
}
