/* fuzz_grammar.c — libFuzzer target for the grammar layer: the first byte picks GBNF (even) or
 * JSON Schema (odd) for the rest of the input. A refusal must leave *out NULL with a message that
 * names the place ("grammar L:C: ..." or "json schema: ..."); an accepted grammar then runs a few
 * steps of masks and accepts on a small fixed vocabulary (ASCII letters and JSON punctuation, a
 * split UTF-8 character, a control token and its text, an end token), checking that every token the mask allows is accepted and
 * that the end is allowed exactly when slm_constraint_can_end says so.
 * Seed corpus: tests/data/corpus/grammar/ (llama.cpp's example grammars, schemas of the property
 * test corpus, and broken inputs). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "grammar/grammar.h"
#include "statelm.h"
#include "fuzz_check.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static const char *const k_tokens[] = {"a", "b", "x", "0", "1", "{", "}", "[", "]", "\"", ":", ",", " ", "\n",
                                       "true", "null", "\"a\"", "{\"", "\xc3", "\xa9", "\xc3\xa9", "-", ".", "e",
                                       "<|a|>" /* a control token (below) */, "<|a|>", "<", "|a|>"};
#define N_TOK (int32_t)(sizeof k_tokens / sizeof k_tokens[0] + 1)
#define CONTROL 24 /* k_tokens' control token, which only a token reference allows */

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 1 || size > 1 << 16) return 0;
    bool schema = data[0] & 1;
    const char *text = (const char *)data + 1;
    size_t len = size - 1;
    slm_grammar *g = (slm_grammar *)&size;
    char err[512] = "";
    slm_status st = schema ? slm_grammar_from_json_schema(text, len, &g, err, sizeof err)
                           : slm_grammar_create(text, len, NULL, &g, err, sizeof err);
    if (st != SLM_OK) {
        FUZZ_CHECK(g == NULL);
        FUZZ_CHECK(st == SLM_ERR_FORMAT || st == SLM_ERR_RANGE || st == SLM_ERR_UNSUPPORTED || st == SLM_ERR_NOMEM);
        FUZZ_CHECK(!strncmp(err, "grammar ", 8) || !strncmp(err, "json schema: ", 13));
        return 0;
    }
    FUZZ_CHECK(g != NULL);
    gv_token toks[N_TOK];
    for (int32_t i = 0; i + 1 < N_TOK; i++)
        toks[i] = (gv_token){(const uint8_t *)k_tokens[i], (uint32_t)strlen(k_tokens[i]), i == CONTROL ? GV_CONTROL : GV_TEXT};
    toks[N_TOK - 1] = (gv_token){NULL, 0, GV_EOG};
    slm_grammar_vocab *v = NULL;
    slm_constraint *c = NULL;
    if (gv_create(toks, N_TOK, NULL, &v) == SLM_OK && slm_constraint_create(g, v, &c) == SLM_OK) {
        uint32_t mask[(N_TOK + 31) / 32];
        uint32_t pick = 0;
        for (size_t i = 0; i < len && i < 64; i++) pick = pick * 31 + (uint8_t)text[i];
        for (int step = 0; step < 12; step++) {
            if (slm_constraint_mask(c, mask, N_TOK) != SLM_OK) break;
            FUZZ_CHECK(((mask[(N_TOK - 1) / 32] >> ((N_TOK - 1) % 32)) & 1) == slm_constraint_can_end(c));
            int32_t allowed[N_TOK], n = 0;
            for (int32_t t = 0; t < N_TOK; t++)
                if (mask[t / 32] >> (t % 32) & 1) allowed[n++] = t;
            if (!n) break;
            int32_t t = allowed[pick % (uint32_t)n];
            pick = pick * 1103515245u + 12345u;
            FUZZ_CHECK(slm_constraint_accept(c, t) == SLM_OK);
            if (t == N_TOK - 1) break;
        }
    }
    slm_constraint_destroy(c);
    slm_grammar_vocab_destroy(v);
    slm_grammar_destroy(g);
    return 0;
}
