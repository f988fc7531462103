/* test_gguf.c — format/gguf: files written by gguf-py's GGUFWriter (the .gguf files in tests/data/gguf, made by
 * gen_gguf_golden.py together with golden.txt, the values the reader must return), the real
 * SmolLM2 model when fetched (smollm2_golden.txt, dumped by gguf-py's GGUFReader), truncation at
 * every length, typed getters, an allocation-failure sweep, a 200k-string vocabulary, and bad
 * input built byte by byte here — each case must fail with a message naming the field and its
 * byte offset. */
#include "testutil.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/dtype.h"
#include "base/half.h"
#include "base/reader.h"
#include "format/gguf.h"

typedef unsigned long long ull;

/* ---- small helpers ------------------------------------------------------------------------- */

static uint32_t crc32_bytes(const uint8_t *p, uint64_t n) {
    static uint32_t table[256];
    if (!table[1]) {
        for (uint32_t i = 0; i < 256; i++) {
            uint32_t c = i;
            for (int k = 0; k < 8; k++) c = (c & 1) ? 0xEDB88320u ^ (c >> 1) : c >> 1;
            table[i] = c;
        }
    }
    uint32_t c = 0xFFFFFFFFu;
    for (uint64_t i = 0; i < n; i++) c = table[(c ^ p[i]) & 0xFF] ^ (c >> 8);
    return c ^ 0xFFFFFFFFu;
}

typedef struct sbuf {
    char *p;
    size_t n, cap;
} sbuf;

static void sb_printf(sbuf *s, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void sb_printf(sbuf *s, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    int need = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    assert_true(need >= 0);
    if (s->n + (size_t)need + 1 > s->cap) {
        s->cap = (s->n + (size_t)need + 1) * 2;
        s->p = realloc(s->p, s->cap);
        assert_non_null(s->p);
    }
    va_start(ap, fmt);
    vsnprintf(s->p + s->n, (size_t)need + 1, fmt, ap);
    va_end(ap);
    s->n += (size_t)need;
}

static void render_bytes(sbuf *s, const char *p, uint64_t n) {
    sb_printf(s, "str:\"");
    for (uint64_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)p[i];
        if (c >= 0x21 && c <= 0x7E && c != '"' && c != '\\') sb_printf(s, "%c", c);
        else sb_printf(s, "\\x%02x", c);
    }
    sb_printf(s, "\"");
}

/* Renders one fixed-size element from its raw little-endian bytes (the test's own decoding). */
static void render_raw(sbuf *s, gguf_vtype t, const uint8_t *p) {
    uint64_t u;
    switch (t) {
    case GGUF_UINT8: sb_printf(s, "u8:%u", p[0]); break;
    case GGUF_INT8: sb_printf(s, "i8:%d", (int8_t)p[0]); break;
    case GGUF_UINT16: sb_printf(s, "u16:%u", ld_u16(p)); break;
    case GGUF_INT16: sb_printf(s, "i16:%d", (int16_t)ld_u16(p)); break;
    case GGUF_UINT32: sb_printf(s, "u32:%u", ld_u32(p)); break;
    case GGUF_INT32: sb_printf(s, "i32:%d", (int32_t)ld_u32(p)); break;
    case GGUF_FLOAT32: sb_printf(s, "f32:0x%08x", ld_u32(p)); break;
    case GGUF_BOOL: sb_printf(s, "bool:%u", p[0]); break;
    case GGUF_UINT64: sb_printf(s, "u64:%llu", (ull)ld_u64(p)); break;
    case GGUF_INT64: u = ld_u64(p); sb_printf(s, "i64:%lld", (long long)(int64_t)u); break;
    case GGUF_FLOAT64: sb_printf(s, "f64:0x%016llx", (ull)ld_u64(p)); break;
    default: fail_msg("not a fixed-size type: %d", t);
    }
}

static size_t raw_size(gguf_vtype t) {
    static const size_t sz[] = {1, 1, 2, 2, 4, 4, 4, 1, 0, 0, 8, 8, 8};
    return sz[t];
}

/* Canonical rendering shared with gen_gguf_golden.py's render(). */
static void render_value(sbuf *s, const gguf_value *v) {
    double f;
    uint64_t bits;
    switch (v->type) {
    case GGUF_UINT8: case GGUF_UINT16: case GGUF_UINT32: case GGUF_UINT64:
        sb_printf(s, "%s:%llu", gguf_vtype_name(v->type), (ull)v->v.u64);
        break;
    case GGUF_INT8: case GGUF_INT16: case GGUF_INT32: case GGUF_INT64:
        sb_printf(s, "%s:%lld", gguf_vtype_name(v->type), (long long)v->v.i64);
        break;
    case GGUF_FLOAT32: sb_printf(s, "f32:0x%08x", f32_bits((float)v->v.f64)); break;
    case GGUF_FLOAT64:
        f = v->v.f64;
        memcpy(&bits, &f, 8);
        sb_printf(s, "f64:0x%016llx", (ull)bits);
        break;
    case GGUF_BOOL: sb_printf(s, "bool:%d", v->v.b ? 1 : 0); break;
    case GGUF_STRING: render_bytes(s, v->v.str.ptr, v->v.str.len); break;
    case GGUF_ARRAY:
        sb_printf(s, "arr<%s>[", gguf_vtype_name(v->v.arr.elem_type));
        for (uint64_t i = 0; i < v->v.arr.n; i++) {
            if (i) sb_printf(s, ",");
            if (v->v.arr.elem_type == GGUF_STRING) render_bytes(s, v->v.arr.strs[i].ptr, v->v.arr.strs[i].len);
            else if (v->v.arr.elem_type == GGUF_ARRAY) render_value(s, &v->v.arr.items[i]);
            else render_raw(s, v->v.arr.elem_type, v->v.arr.raw + i * raw_size(v->v.arr.elem_type));
        }
        sb_printf(s, "]");
        break;
    default: fail_msg("bad value type %d", v->type);
    }
}

/* Parses an exact-size heap copy of img[0, n) so ASan sees any read past the end. */
static slm_status parse_copy(const uint8_t *img, size_t n, gguf_file *g, slm_err *e) {
    uint8_t *copy = malloc(n ? n : 1);
    assert_non_null(copy);
    if (n) memcpy(copy, img, n);
    slm_status st = gguf_parse(g, copy, n, NULL, e);
    /* A successful parse borrows the bytes; callers here only inspect the failure path. */
    if (st == SLM_OK) gguf_close(g);
    free(copy);
    return st;
}

/* Every prefix shorter than ok_from fails with a message giving a byte offset; longer ones
 * parse. step > 1 checks every step-th length plus every length within 64 bytes of ok_from. */
static void truncation_sweep(const uint8_t *img, size_t size, size_t ok_from, size_t step) {
    for (size_t len = 0; len <= size; len++) {
        bool near = len + 64 >= ok_from && len <= ok_from + 64;
        if (step > 1 && len % step != 0 && !near && len != size) continue;
        gguf_file g;
        slm_err e;
        slm_status st = parse_copy(img, len, &g, &e);
        if (len < ok_from) {
            if (st == SLM_OK) fail_msg("prefix of %zu bytes (of %zu) parsed", len, size);
            if (!strstr(e.msg, "byte offset")) fail_msg("prefix %zu: message without offset: %s", len, e.msg);
            assert_null(g.kv);
            assert_null(g.tensors);
        } else if (st != SLM_OK) {
            fail_msg("prefix of %zu bytes (ok from %zu) failed: %s", len, ok_from, e.msg);
        }
    }
}

/* ---- golden manifests ---------------------------------------------------------------------- */

typedef struct manifest {
    char *text;
    char **lines;
    size_t n_lines;
} manifest;

static void manifest_load(manifest *m, const char *path) {
    size_t size = 0;
    m->text = (char *)tu_read_file(path, &size);
    assert_non_null(m->text);
    m->lines = NULL;
    m->n_lines = 0;
    size_t cap = 0;
    char *p = m->text;
    while (*p) {
        char *nl = strchr(p, '\n');
        if (nl) *nl = '\0';
        if (m->n_lines == cap) {
            cap = cap ? cap * 2 : 256;
            m->lines = realloc(m->lines, cap * sizeof *m->lines);
            assert_non_null(m->lines);
        }
        m->lines[m->n_lines++] = p;
        if (!nl) break;
        p = nl + 1;
    }
}

static void manifest_free(manifest *m) {
    free(m->lines);
    free(m->text);
}

/* Splits line (modified in place) into at most cap tokens; returns the count. */
static size_t split(char *line, char **tok, size_t cap) {
    size_t n = 0;
    char *save = NULL;
    for (char *t = strtok_r(line, " ", &save); t && n < cap; t = strtok_r(NULL, " ", &save)) tok[n++] = t;
    return n;
}

/* The tensor called name, or NULL (the library looks tensors up through its model's table). */
static const gguf_tensor *tensor_named(const gguf_file *g, const char *name) {
    for (uint64_t i = 0; i < g->n_tensors; i++)
        if (strcmp(g->tensors[i].name, name) == 0) return &g->tensors[i];
    return NULL;
}

/* Checks a tensor line; the tensor must come after the one at *index (file order), which it
 * becomes. */
static void check_tensor(const gguf_file *g, int64_t *index, char **tok, size_t n_tok) {
    /* tensor NAME TYPE N_DIMS NE0 NE1 NE2 NE3 OFFSET SIZE CRC32 N ROW... */
    assert_true(n_tok >= 12);
    const gguf_tensor *t = tensor_named(g, tok[1]);
    if (!t) fail_msg("tensor %s not found", tok[1]);
    assert_true(t - g->tensors > *index);
    *index = t - g->tensors;
    assert_string_equal(t->name, tok[1]);
    assert_int_equal(t->type, strtoul(tok[2], NULL, 10));
    assert_int_equal(t->n_dims, strtoul(tok[3], NULL, 10));
    for (int d = 0; d < 4; d++) assert_int_equal(t->ne[d], strtoll(tok[4 + d], NULL, 10));
    assert_int_equal(t->offset, strtoull(tok[8], NULL, 10));
    assert_int_equal(t->size_bytes, strtoull(tok[9], NULL, 10));
    assert_ptr_equal(t->data, g->map.data + g->data_start + t->offset);
    assert_int_equal(crc32_bytes(t->data, t->size_bytes), strtoul(tok[10], NULL, 16));
    size_t n_row = strtoul(tok[11], NULL, 10);
    assert_int_equal(n_tok, 12 + n_row);
    const dtype_traits *tr = dtype_traits_of(t->type);
    assert_non_null(tr);
    if (n_row == 0) {
        assert_false(tr->can_dequant);
        return;
    }
    assert_int_equal(n_row, t->ne[0]);
    float *row = malloc(n_row * sizeof(float));
    assert_non_null(row);
    assert_true(dequant_row(t->type, t->data, row, t->ne[0]));
    for (size_t i = 0; i < n_row; i++) {
        uint32_t want = (uint32_t)strtoul(tok[12 + i], NULL, 16);
        if (f32_bits(row[i]) != want)
            fail_msg("tensor %s element %zu: 0x%08x, gguf-py says 0x%08x", t->name, i, f32_bits(row[i]), want);
    }
    free(row);
}

/* Checks one "file" record (lines [*i, end]) against g. all_tensors: the record lists every
 * tensor (else a subset, in file order). */
static void check_file(const gguf_file *g, manifest *m, size_t *i, size_t size, bool all_tensors) {
    char *tok[4096 + 16];
    uint64_t kv_index = 0, n_tensor_lines = 0;
    int64_t tensor_index = -1;
    sbuf s = {NULL, 0, 0};
    for (; *i < m->n_lines; (*i)++) {
        char *line = m->lines[*i];
        if (strncmp(line, "end", 3) == 0) break;
        if (strncmp(line, "kv ", 3) == 0) {
            char *key = line + 3, *sp = strchr(key, ' ');
            assert_non_null(sp);
            *sp = '\0';
            assert_true(kv_index < g->n_kv);
            assert_string_equal(g->kv[kv_index].key, key);
            assert_ptr_equal(gguf_find(g, key), &g->kv[kv_index]);
            s.n = 0;
            render_value(&s, &g->kv[kv_index].value);
            if (strcmp(s.p, sp + 1) != 0) fail_msg("kv %s: read %.300s, expected %.300s", key, s.p, sp + 1);
            kv_index++;
            continue;
        }
        size_t n = split(line, tok, sizeof tok / sizeof tok[0]);
        if (strcmp(tok[0], "header") == 0) {
            assert_int_equal(n, 6);
            assert_int_equal(g->version, strtoul(tok[1], NULL, 10));
            assert_int_equal(g->alignment, strtoul(tok[2], NULL, 10));
            assert_int_equal(g->data_start, strtoull(tok[3], NULL, 10));
            assert_int_equal(g->n_kv, strtoull(tok[4], NULL, 10));
            assert_int_equal(g->n_tensors, strtoull(tok[5], NULL, 10));
        } else if (strcmp(tok[0], "arrlen") == 0) {
            assert_true(kv_index < g->n_kv);
            assert_string_equal(g->kv[kv_index].key, tok[1]);
            const gguf_value *arr = NULL;
            assert_int_equal(gguf_get_arr(g, tok[1], &arr, NULL), SLM_OK);
            assert_int_equal(arr->v.arr.n, strtoull(tok[2], NULL, 10));
            kv_index++;
        } else if (strcmp(tok[0], "arrelem") == 0) {
            const gguf_value *arr = NULL;
            assert_int_equal(gguf_get_arr(g, tok[1], &arr, NULL), SLM_OK);
            uint64_t idx = strtoull(tok[2], NULL, 10);
            assert_true(idx < arr->v.arr.n);
            s.n = 0;
            if (arr->v.arr.elem_type == GGUF_STRING) {
                gguf_str str;
                assert_true(gguf_arr_str(arr, idx, &str));
                render_bytes(&s, str.ptr, str.len);
            } else {
                assert_true(arr->v.arr.elem_type != GGUF_ARRAY);
                render_raw(&s, arr->v.arr.elem_type, arr->v.arr.raw + idx * raw_size(arr->v.arr.elem_type));
            }
            if (strcmp(s.p, tok[3]) != 0) fail_msg("%s[%llu]: read %s, expected %s", tok[1], (ull)idx, s.p, tok[3]);
        } else if (strcmp(tok[0], "tensor") == 0) {
            check_tensor(g, &tensor_index, tok, n);
            n_tensor_lines++;
        } else if (strcmp(tok[0], "trunc_ok_from") == 0) {
            size_t ok_from = strtoull(tok[1], NULL, 10);
            assert_true(ok_from <= size);
            truncation_sweep(g->map.data, size, ok_from, size <= 8192 ? 1 : 61);
        } else {
            fail_msg("unknown manifest line: %s", tok[0]);
        }
    }
    assert_int_equal(kv_index, g->n_kv);
    if (all_tensors) assert_int_equal(n_tensor_lines, g->n_tensors);
    else assert_true(n_tensor_lines > 0);
    free(s.p);
}

static void golden_files(void **unused) {
    (void)unused;
    manifest m;
    manifest_load(&m, tu_data_path("gguf/golden.txt"));
    int n_files = 0;
    for (size_t i = 0; i < m.n_lines; i++) {
        if (strncmp(m.lines[i], "file ", 5) != 0) continue;
        char rel[256];
        snprintf(rel, sizeof rel, "gguf/%s", m.lines[i] + 5);
        gguf_file g;
        slm_err e;
        slm_status st = gguf_open(&g, tu_data_path(rel), NULL, &e);
        if (st) fail_msg("%s: %s", rel, e.msg);
        i++;
        check_file(&g, &m, &i, g.map.size, true);
        gguf_close(&g);
        n_files++;
    }
    assert_int_equal(n_files, 3);
    manifest_free(&m);
}

static void real_model(void **unused) {
    (void)unused;
    const char *cache = getenv("STATELM_CACHE");
    const char *home = getenv("HOME");
    char path[1024];
    if (cache) snprintf(path, sizeof path, "%s/models/SmolLM2-135M-Instruct.Q4_1.gguf", cache);
    else snprintf(path, sizeof path, "%s/.cache/statelm/models/SmolLM2-135M-Instruct.Q4_1.gguf", home ? home : "");
    if (!tu_file_exists(path)) {
        TU_SKIP("%s absent (run scripts/fetch-models.sh)", path);
        return;
    }
    manifest m;
    manifest_load(&m, tu_data_path("gguf/smollm2_golden.txt"));
    gguf_file g;
    slm_err e;
    slm_status st = gguf_open(&g, path, NULL, &e);
    if (st) fail_msg("%s: %s", path, e.msg);
    assert_true(strncmp(m.lines[0], "file ", 5) == 0);
    size_t i = 1;
    check_file(&g, &m, &i, g.map.size, false);
    /* Spot checks through the typed getters. */
    int64_t n_layer = 0;
    assert_int_equal(gguf_get_i64(&g, "llama.block_count", &n_layer, &e), SLM_OK);
    assert_int_equal(n_layer, 30);
    const gguf_value *tokens = NULL;
    assert_int_equal(gguf_get_arr(&g, "tokenizer.ggml.tokens", &tokens, &e), SLM_OK);
    assert_int_equal(tokens->v.arr.n, 49152);
    gguf_close(&g);
    manifest_free(&m);
}

/* ---- files from gguf-py: other versions and endianness ------------------------------------- */

static uint8_t *load_data(const char *rel, size_t *size) {
    uint8_t *buf = tu_read_file(tu_data_path(rel), size);
    if (!buf) fail_msg("cannot read %s", rel);
    return buf;
}

static void version2_and_big_endian(void **unused) {
    (void)unused;
    size_t size;
    uint8_t *buf = load_data("gguf/small.gguf", &size);
    buf[4] = 2; /* v2 has the same layout as v3 */
    gguf_file g;
    slm_err e;
    assert_int_equal(gguf_parse(&g, buf, size, NULL, &e), SLM_OK);
    assert_int_equal(g.version, 2);
    assert_int_equal(g.n_tensors, 3);
    gguf_close(&g);
    free(buf);

    buf = load_data("gguf/be.gguf", &size); /* GGUFWriter(endianess=BIG) */
    assert_int_equal(gguf_parse(&g, buf, size, NULL, &e), SLM_ERR_UNSUPPORTED);
    assert_non_null(strstr(e.msg, "big-endian"));
    assert_non_null(strstr(e.msg, "version at byte offset 4"));
    assert_null(g.kv);
    gguf_close(&g); /* safe after a failure */
    free(buf);

    /* gguf_open of a bad file: the message starts with the path. */
    buf = load_data("gguf/be.gguf", &size);
    char *tmp = tu_write_temp(buf, size, ".gguf");
    assert_non_null(tmp);
    assert_int_equal(gguf_open(&g, tmp, NULL, &e), SLM_ERR_UNSUPPORTED);
    assert_true(strncmp(e.msg, tmp, strlen(tmp)) == 0);
    assert_non_null(strstr(e.msg, "big-endian"));
    assert_null(g.map.data);
    gguf_close(&g);
    remove(tmp);
    free(tmp);
    free(buf);

    assert_int_equal(gguf_open(&g, "/nonexistent/x.gguf", NULL, &e), SLM_ERR_IO);
    assert_non_null(strstr(e.msg, "/nonexistent/x.gguf"));
    gguf_close(&g);
}

/* ---- typed getters ------------------------------------------------------------------------- */

static void getters(void **unused) {
    (void)unused;
    gguf_file g;
    slm_err e;
    assert_int_equal(gguf_open(&g, tu_data_path("gguf/meta.gguf"), NULL, &e), SLM_OK);
    int64_t i = 0;
    double f = 0;
    gguf_str s;
    const gguf_value *arr = NULL;

    assert_int_equal(gguf_get_i64(&g, "t.u8", &i, &e), SLM_OK);
    assert_int_equal(i, 200);
    assert_int_equal(gguf_get_i64(&g, "t.i8", &i, &e), SLM_OK);
    assert_int_equal(i, -100);
    assert_int_equal(gguf_get_i64(&g, "t.u32", &i, &e), SLM_OK);
    assert_int_equal(i, 4000000000LL);
    assert_int_equal(gguf_get_i64(&g, "t.i64", &i, &e), SLM_OK);
    assert_true(i == INT64_MIN);
    assert_int_equal(gguf_get_i64(&g, "t.bool_t", &i, &e), SLM_OK);
    assert_int_equal(i, 1);
    assert_int_equal(gguf_get_i64(&g, "general.alignment", &i, &e), SLM_OK);
    assert_int_equal(i, 64);
    /* u64 max does not fit in int64 */
    i = 5;
    err_clear(&e);
    assert_int_equal(gguf_get_i64(&g, "t.u64", &i, &e), SLM_ERR_FORMAT);
    assert_int_equal(i, 0);
    assert_non_null(strstr(e.msg, "t.u64"));
    assert_non_null(strstr(e.msg, "byte offset"));
    /* wrong type */
    err_clear(&e);
    assert_int_equal(gguf_get_i64(&g, "t.str", &i, &e), SLM_ERR_FORMAT);
    assert_non_null(strstr(e.msg, "t.str"));
    assert_non_null(strstr(e.msg, "string"));
    /* absent: NOT_FOUND and no message */
    err_clear(&e);
    assert_int_equal(gguf_get_i64(&g, "t.absent", &i, &e), SLM_ERR_NOT_FOUND);
    assert_string_equal(e.msg, "");
    assert_null(gguf_find(&g, "t.absent"));
    assert_null(tensor_named(&g, "absent"));

    assert_int_equal(gguf_get_f64(&g, "t.f32", &f, &e), SLM_OK);
    assert_true(f == (double)3.14159f);
    assert_int_equal(gguf_get_f64(&g, "t.f64", &f, &e), SLM_OK);
    assert_true(f == -2.718281828459045);
    assert_int_equal(gguf_get_f64(&g, "t.i16", &f, &e), SLM_OK);
    assert_true(f == -32768.0);
    assert_int_equal(gguf_get_f64(&g, "t.arr_f32", &f, &e), SLM_ERR_FORMAT);

    /* bools keep their type and read as the integers 0 and 1 */
    assert_int_equal(gguf_find(&g, "t.bool_f")->value.type, GGUF_BOOL);
    assert_false(gguf_find(&g, "t.bool_f")->value.v.b);
    assert_int_equal(gguf_get_i64(&g, "t.bool_f", &i, &e), SLM_OK);
    assert_int_equal(i, 0);

    assert_int_equal(gguf_get_str(&g, "general.architecture", &s, &e), SLM_OK);
    assert_int_equal(s.len, 4);
    assert_memory_equal(s.ptr, "test", 4);
    assert_int_equal(gguf_get_str(&g, "t.str_empty", &s, &e), SLM_OK);
    assert_int_equal(s.len, 0);
    err_clear(&e);
    assert_int_equal(gguf_get_str(&g, "t.u8", &s, &e), SLM_ERR_FORMAT);
    assert_null(s.ptr);

    /* arrays of every width through the element accessors */
    assert_int_equal(gguf_get_arr(&g, "t.arr_i8", &arr, &e), SLM_OK);
    assert_true(gguf_arr_i64(arr, 0, &i) && i == -128);
    assert_true(gguf_arr_i64(arr, 1, &i) && i == 127);
    assert_false(gguf_arr_i64(arr, 2, &i));
    assert_int_equal(gguf_get_arr(&g, "t.arr_u16", &arr, &e), SLM_OK);
    assert_true(gguf_arr_i64(arr, 1, &i) && i == 65535);
    assert_int_equal(gguf_get_arr(&g, "t.arr_u32", &arr, &e), SLM_OK);
    assert_true(gguf_arr_i64(arr, 0, &i) && i == 4294967295LL);
    assert_int_equal(gguf_get_arr(&g, "t.arr_u64", &arr, &e), SLM_OK);
    assert_false(gguf_arr_i64(arr, 0, &i)); /* 2^64-1 */
    assert_false(gguf_arr_i64(arr, 1, &i)); /* 2^63 */
    assert_true(gguf_arr_i64(arr, 2, &i) && i == 1);
    assert_int_equal(gguf_get_arr(&g, "t.arr_i64", &arr, &e), SLM_OK);
    assert_true(gguf_arr_i64(arr, 0, &i) && i == INT64_MIN);
    assert_true(gguf_arr_f64(arr, 1, &f) && f == 9223372036854775807.0);
    assert_int_equal(gguf_get_arr(&g, "t.arr_bool", &arr, &e), SLM_OK);
    assert_true(gguf_arr_i64(arr, 0, &i) && i == 1);
    assert_true(gguf_arr_i64(arr, 1, &i) && i == 0);
    assert_int_equal(gguf_get_arr(&g, "t.arr_f32", &arr, &e), SLM_OK);
    assert_true(gguf_arr_f64(arr, 1, &f) && f == (double)-1.25e-3f);
    assert_false(gguf_arr_i64(arr, 0, &i));
    assert_false(gguf_arr_str(arr, 0, &s));
    assert_int_equal(gguf_get_arr(&g, "t.arr_f64", &arr, &e), SLM_OK);
    assert_true(gguf_arr_f64(arr, 0, &f) && f == 1.0 / 3.0);
    assert_false(gguf_arr_f64(arr, 2, &f));
    assert_int_equal(gguf_get_arr(&g, "tokenizer.ggml.tokens", &arr, &e), SLM_OK);
    assert_int_equal(arr->v.arr.n, 2000);
    assert_true(gguf_arr_str(arr, 1999, &s));
    assert_int_equal(s.len, strlen("tok1999_\xc3\xa9\xc3\xa9\xc3\xa9"));
    assert_memory_equal(s.ptr, "tok1999_\xc3\xa9\xc3\xa9\xc3\xa9", s.len);
    assert_false(gguf_arr_str(arr, 2000, &s));
    assert_false(gguf_arr_i64(arr, 0, &i));
    assert_int_equal(gguf_get_arr(&g, "t.nested2", &arr, &e), SLM_OK);
    assert_int_equal(arr->v.arr.elem_type, GGUF_ARRAY);
    assert_int_equal(arr->v.arr.n, 3);
    assert_true(gguf_arr_i64(&arr->v.arr.items[0], 1, &i) && i == -2);
    assert_false(gguf_arr_i64(arr, 0, &i));
    err_clear(&e);
    assert_int_equal(gguf_get_arr(&g, "t.u8", &arr, &e), SLM_ERR_FORMAT);
    assert_null(arr);
    assert_false(gguf_arr_i64(NULL, 0, &i));
    gguf_close(&g);
}

/* ---- allocation failures ------------------------------------------------------------------- */

static void allocation_failure_sweep(void **unused) {
    (void)unused;
    const char *files[] = {"gguf/meta.gguf", "gguf/small.gguf"};
    for (size_t k = 0; k < 2; k++) {
        size_t size;
        uint8_t *buf = load_data(files[k], &size);
        int n = 0;
        for (;; n++) {
            tu_failing f = tu_failing_at(n);
            f.keep_failing = true;
            slm_allocator a = tu_failing_allocator(&f);
            gguf_file g;
            slm_err e;
            slm_status st = gguf_parse(&g, buf, size, &a, &e);
            if (st == SLM_OK) {
                gguf_close(&g);
                assert_int_equal(f.n_live, 0);
                break;
            }
            if (st != SLM_ERR_NOMEM) fail_msg("%s: failing allocation %d gave %s: %s", files[k], n,
                                              slm_status_name(st), e.msg);
            assert_int_equal(f.n_live, 0);
            assert_null(g.kv);
            gguf_close(&g);
        }
        assert_true(n > 3);
        free(buf);
    }
}

/* ---- GGUF image builder for hand-made inputs ----------------------------------------------- */

typedef struct img {
    uint8_t *p;
    size_t n, cap;
} img;

static size_t put(img *b, const void *src, size_t n) {
    if (b->n + n > b->cap) {
        b->cap = (b->n + n) * 2 + 64;
        b->p = realloc(b->p, b->cap);
        assert_non_null(b->p);
    }
    size_t at = b->n;
    if (n) memcpy(b->p + at, src, n);
    b->n += n;
    return at;
}
static size_t put_u8(img *b, uint8_t v) { return put(b, &v, 1); }
static size_t put_u32(img *b, uint32_t v) {
    uint8_t x[4] = {(uint8_t)v, (uint8_t)(v >> 8), (uint8_t)(v >> 16), (uint8_t)(v >> 24)};
    return put(b, x, 4);
}
static size_t put_u64(img *b, uint64_t v) {
    size_t at = put_u32(b, (uint32_t)v);
    put_u32(b, (uint32_t)(v >> 32));
    return at;
}
/* gguf_string from n bytes; returns the offset of the length field. */
static size_t put_strn(img *b, const void *s, size_t n) {
    size_t at = put_u64(b, n);
    put(b, s, n);
    return at;
}
static size_t put_str(img *b, const char *s) { return put_strn(b, s, strlen(s)); }
static void put_zeros(img *b, size_t n) {
    for (size_t i = 0; i < n; i++) put_u8(b, 0);
}
static void pad_to(img *b, size_t align) {
    while (b->n % align) put_u8(b, 0);
}
static void header(img *b, uint32_t version, uint64_t n_tensors, uint64_t n_kv) {
    b->n = 0;
    put(b, "GGUF", 4);
    put_u32(b, version);
    put_u64(b, n_tensors);
    put_u64(b, n_kv);
}
/* Key and value type; returns the offset where the value starts. */
static size_t kv_begin(img *b, const char *key, uint32_t type) {
    put_str(b, key);
    put_u32(b, type);
    return b->n;
}

typedef struct ti_at {
    size_t info, n_dims, dims[5], type, offset;
} ti_at;

static ti_at put_tinfo(img *b, const char *name, uint32_t n_dims, const uint64_t *dims, uint32_t type, uint64_t off) {
    ti_at at;
    memset(&at, 0, sizeof at);
    at.info = put_str(b, name);
    at.n_dims = put_u32(b, n_dims);
    for (uint32_t i = 0; i < n_dims && i < 5; i++) at.dims[i] = put_u64(b, dims[i]);
    at.type = put_u32(b, type);
    at.offset = put_u64(b, off);
    return at;
}

/* One kv (general.architecture) and one tensor; data_bytes zeros after 32-byte padding. */
static ti_at one_tensor(img *b, uint32_t n_dims, const uint64_t *dims, uint32_t type, uint64_t off, size_t data_bytes) {
    header(b, 3, 1, 1);
    kv_begin(b, "general.architecture", GGUF_STRING);
    put_str(b, "x");
    ti_at at = put_tinfo(b, "t", n_dims, dims, type, off);
    pad_to(b, 32);
    put_zeros(b, data_bytes);
    return at;
}

static void expect_fail_(const img *b, slm_status want, const char *needle, long long at, int line) {
    gguf_file g;
    slm_err e;
    slm_status st = parse_copy(b->p, b->n, &g, &e);
    char off[64];
    snprintf(off, sizeof off, "byte offset %lld", at);
    if (st != want || !strstr(e.msg, needle) || (at >= 0 && !strstr(e.msg, off)))
        fail_msg("line %d: got %s \"%s\"; wanted %s with \"%s\" and \"%s\"", line, slm_status_name(st), e.msg,
                 slm_status_name(want), needle, at >= 0 ? off : "");
    assert_null(g.kv);
    assert_null(g.tensors);
    assert_int_equal(g.n_kv, 0);
}
#define expect_fail(b, want, needle, at) expect_fail_((b), (want), (needle), (long long)(at), __LINE__)

static void expect_ok_(const img *b, gguf_file *g, uint8_t **copy, int line) {
    slm_err e;
    *copy = malloc(b->n);
    assert_non_null(*copy);
    memcpy(*copy, b->p, b->n);
    slm_status st = gguf_parse(g, *copy, b->n, NULL, &e);
    if (st) fail_msg("line %d: %s", line, e.msg);
}
#define expect_ok(b, g, copy) expect_ok_((b), (g), (copy), __LINE__)

/* ---- bad input: header --------------------------------------------------------------------- */

static void bad_header(void **unused) {
    (void)unused;
    img b = {0};
    gguf_file g;
    uint8_t *copy;

    header(&b, 3, 0, 0);
    expect_ok(&b, &g, &copy); /* header only: no kv, no tensors */
    assert_int_equal(g.data_start, 32);
    assert_int_equal(g.alignment, 32);
    gguf_close(&g);
    free(copy);

    header(&b, 3, 0, 0);
    memcpy(b.p, "GGML", 4);
    expect_fail(&b, SLM_ERR_FORMAT, "magic", 0);
    b.n = 0;
    expect_fail(&b, SLM_ERR_FORMAT, "magic", 0);
    header(&b, 1, 0, 0);
    expect_fail(&b, SLM_ERR_UNSUPPORTED, "v1", 4);
    header(&b, 4, 0, 0);
    expect_fail(&b, SLM_ERR_UNSUPPORTED, "version", 4);
    header(&b, 0, 0, 0);
    expect_fail(&b, SLM_ERR_UNSUPPORTED, "version", 4);
    header(&b, 0x03000000u, 0, 0); /* v3 written big-endian */
    expect_fail(&b, SLM_ERR_UNSUPPORTED, "big-endian", 4);
    header(&b, 3, 1ull << 62, 0);
    expect_fail(&b, SLM_ERR_FORMAT, "tensor_count", 8);
    header(&b, 3, GGUF_MAX_TENSORS + 1ull, 0);
    expect_fail(&b, SLM_ERR_FORMAT, "tensor_count", 8);
    header(&b, 3, 0, 1ull << 62);
    expect_fail(&b, SLM_ERR_FORMAT, "metadata_kv_count", 16);
    header(&b, 3, 0, UINT64_MAX);
    expect_fail(&b, SLM_ERR_FORMAT, "metadata_kv_count", 16);
    header(&b, 3, 0, 1000); /* under the cap, but no room for 1000 kvs */
    put_zeros(&b, 200);
    expect_fail(&b, SLM_ERR_FORMAT, "metadata_kv_count", 16);
    header(&b, 3, 100, 0);
    put_zeros(&b, 200);
    expect_fail(&b, SLM_ERR_FORMAT, "tensor_count", 8);
    free(b.p);
}

/* ---- bad input: key/values ----------------------------------------------------------------- */

static void bad_kv(void **unused) {
    (void)unused;
    img b = {0};
    size_t at;

    header(&b, 3, 0, 1);
    at = put_u64(&b, 0); /* empty key */
    put_u32(&b, GGUF_UINT8);
    put_u8(&b, 1);
    put_zeros(&b, 8);
    expect_fail(&b, SLM_ERR_FORMAT, "key length", at);

    header(&b, 3, 0, 1);
    at = put_u64(&b, 1ull << 63);
    put_zeros(&b, 16);
    expect_fail(&b, SLM_ERR_FORMAT, "key length", at);

    header(&b, 3, 0, 1);
    at = put_u64(&b, GGUF_MAX_KEY_LEN + 1ull);
    put_zeros(&b, 16);
    expect_fail(&b, SLM_ERR_FORMAT, "key length", at);

    header(&b, 3, 0, 1);
    at = put_strn(&b, "a\xC3(", 3); /* invalid UTF-8 */
    put_u32(&b, GGUF_UINT8);
    put_u8(&b, 1);
    expect_fail(&b, SLM_ERR_FORMAT, "UTF-8", at + 8);

    header(&b, 3, 0, 1);
    at = put_strn(&b, "\xC0\xAF", 2); /* overlong '/' */
    put_u32(&b, GGUF_UINT8);
    put_u8(&b, 1);
    expect_fail(&b, SLM_ERR_FORMAT, "UTF-8", at + 8);

    header(&b, 3, 0, 1);
    at = put_strn(&b, "\xED\xA0\x80", 3); /* surrogate */
    put_u32(&b, GGUF_UINT8);
    put_u8(&b, 1);
    expect_fail(&b, SLM_ERR_FORMAT, "UTF-8", at + 8);

    header(&b, 3, 0, 1);
    at = put_strn(&b, "a\0b", 3);
    put_u32(&b, GGUF_UINT8);
    put_u8(&b, 1);
    expect_fail(&b, SLM_ERR_FORMAT, "NUL", at + 8);

    header(&b, 3, 0, 1);
    put_str(&b, "k");
    at = put_u32(&b, 13);
    put_zeros(&b, 16);
    expect_fail(&b, SLM_ERR_FORMAT, "value type", at);

    header(&b, 3, 0, 2); /* duplicate key */
    kv_begin(&b, "k.a", GGUF_UINT8);
    put_u8(&b, 1);
    at = b.n;
    kv_begin(&b, "k.a", GGUF_INT32);
    put_u32(&b, 2);
    expect_fail(&b, SLM_ERR_FORMAT, "duplicate key", at);

    /* A long duplicate key is cut short in the message. */
    char longkey[201];
    memset(longkey, 'k', 200);
    longkey[200] = '\0';
    header(&b, 3, 0, 2);
    kv_begin(&b, longkey, GGUF_UINT8);
    put_u8(&b, 1);
    at = b.n;
    kv_begin(&b, longkey, GGUF_UINT8);
    put_u8(&b, 1);
    expect_fail(&b, SLM_ERR_FORMAT, "kkkkk...': key at byte offset", at);

    /* strings */
    header(&b, 3, 0, 1);
    at = kv_begin(&b, "k", GGUF_STRING);
    put_u64(&b, 1ull << 62);
    put_zeros(&b, 16);
    expect_fail(&b, SLM_ERR_FORMAT, "string value length", at);

    header(&b, 3, 0, 1);
    at = kv_begin(&b, "k", GGUF_STRING);
    put_u64(&b, 17); /* one byte more than is left */
    put_zeros(&b, 16);
    expect_fail(&b, SLM_ERR_FORMAT, "truncated: string value", at + 8);

    /* bools */
    header(&b, 3, 0, 1);
    at = kv_begin(&b, "k", GGUF_BOOL);
    put_u8(&b, 2);
    expect_fail(&b, SLM_ERR_FORMAT, "bool value", at);
    header(&b, 3, 0, 1);
    at = kv_begin(&b, "k", GGUF_BOOL);
    put_u8(&b, 0xFF);
    expect_fail(&b, SLM_ERR_FORMAT, "bool value", at);
    header(&b, 3, 0, 1);
    at = kv_begin(&b, "k", GGUF_ARRAY);
    put_u32(&b, GGUF_BOOL);
    put_u64(&b, 3);
    put_u8(&b, 1);
    put_u8(&b, 2);
    put_u8(&b, 0);
    expect_fail(&b, SLM_ERR_FORMAT, "bool array element 1", at + 12 + 1);

    /* arrays: counts, element types */
    const uint32_t elem[] = {GGUF_UINT32, GGUF_FLOAT64, GGUF_STRING, GGUF_ARRAY};
    for (size_t k = 0; k < 4; k++) {
        header(&b, 3, 0, 1);
        at = kv_begin(&b, "k", GGUF_ARRAY);
        put_u32(&b, elem[k]);
        put_u64(&b, 1ull << 61);
        put_zeros(&b, 64);
        expect_fail(&b, SLM_ERR_FORMAT, "array count", at + 4);
        header(&b, 3, 0, 1);
        at = kv_begin(&b, "k", GGUF_ARRAY);
        put_u32(&b, elem[k]);
        put_u64(&b, UINT64_MAX);
        expect_fail(&b, SLM_ERR_FORMAT, "array count", at + 4);
    }
    header(&b, 3, 0, 1);
    at = kv_begin(&b, "k", GGUF_ARRAY);
    put_u32(&b, 13);
    put_u64(&b, 1);
    put_zeros(&b, 8);
    expect_fail(&b, SLM_ERR_FORMAT, "array element type", at);

    header(&b, 3, 0, 1); /* string array element with an absurd length */
    at = kv_begin(&b, "k", GGUF_ARRAY);
    put_u32(&b, GGUF_STRING);
    put_u64(&b, 2);
    put_str(&b, "ok");
    size_t at2 = put_u64(&b, 1ull << 62);
    put_zeros(&b, 8);
    expect_fail(&b, SLM_ERR_FORMAT, "array string length", at2);

    free(b.p);
}

/* Array nested `depth` levels deep (the innermost a u8 array with one element). */
static size_t nested_image(img *b, int depth) {
    header(b, 3, 0, 1);
    kv_begin(b, "k", GGUF_ARRAY);
    size_t deepest_type_at = 0;
    for (int d = 1; d < depth; d++) {
        deepest_type_at = put_u32(b, GGUF_ARRAY);
        put_u64(b, 1);
    }
    put_u32(b, GGUF_UINT8);
    put_u64(b, 1);
    put_u8(b, 7);
    return deepest_type_at;
}

static void nesting_and_empty_arrays(void **unused) {
    (void)unused;
    img b = {0};
    gguf_file g;
    uint8_t *copy;

    nested_image(&b, GGUF_MAX_ARRAY_DEPTH);
    expect_ok(&b, &g, &copy);
    const gguf_value *v = &g.kv[0].value;
    for (int d = 1; d < GGUF_MAX_ARRAY_DEPTH; d++) {
        assert_int_equal(v->v.arr.elem_type, GGUF_ARRAY);
        assert_int_equal(v->v.arr.n, 1);
        v = &v->v.arr.items[0];
    }
    int64_t x = 0;
    assert_true(gguf_arr_i64(v, 0, &x));
    assert_int_equal(x, 7);
    gguf_close(&g);
    free(copy);

    size_t at = nested_image(&b, GGUF_MAX_ARRAY_DEPTH + 1);
    expect_fail(&b, SLM_ERR_FORMAT, "nested deeper", at);
    at = nested_image(&b, 1000);
    (void)at;
    expect_fail(&b, SLM_ERR_FORMAT, "nested deeper", -1);

    /* Empty arrays of each kind (GGUFWriter cannot write them; the format allows them). */
    header(&b, 3, 0, 4);
    kv_begin(&b, "e.u8", GGUF_ARRAY);
    put_u32(&b, GGUF_UINT8);
    put_u64(&b, 0);
    kv_begin(&b, "e.str", GGUF_ARRAY);
    put_u32(&b, GGUF_STRING);
    put_u64(&b, 0);
    kv_begin(&b, "e.arr", GGUF_ARRAY);
    put_u32(&b, GGUF_ARRAY);
    put_u64(&b, 0);
    kv_begin(&b, "e.nested", GGUF_ARRAY); /* [[]] */
    put_u32(&b, GGUF_ARRAY);
    put_u64(&b, 1);
    put_u32(&b, GGUF_INT32);
    put_u64(&b, 0);
    expect_ok(&b, &g, &copy);
    assert_int_equal(g.n_kv, 4);
    for (int k = 0; k < 3; k++) assert_int_equal(g.kv[k].value.v.arr.n, 0);
    assert_int_equal(g.kv[3].value.v.arr.n, 1);
    assert_int_equal(g.kv[3].value.v.arr.items[0].v.arr.n, 0);
    assert_int_equal(g.kv[3].value.v.arr.items[0].v.arr.elem_type, GGUF_INT32);
    gguf_str s;
    assert_false(gguf_arr_str(&g.kv[1].value, 0, &s));
    gguf_close(&g);
    free(copy);
    free(b.p);
}

/* ---- bad input: general.alignment ---------------------------------------------------------- */

static void alignment(void **unused) {
    (void)unused;
    img b = {0};
    gguf_file g;
    uint8_t *copy;
    size_t at;

    const uint32_t bad_u32[] = {0, 4, 12, 33, GGUF_MAX_ALIGNMENT + 8, 1u << 31};
    for (size_t k = 0; k < sizeof bad_u32 / sizeof bad_u32[0]; k++) {
        header(&b, 3, 0, 1);
        at = kv_begin(&b, "general.alignment", GGUF_UINT32);
        put_u32(&b, bad_u32[k]);
        expect_fail(&b, SLM_ERR_FORMAT, "general.alignment", at);
    }
    header(&b, 3, 0, 1);
    at = kv_begin(&b, "general.alignment", GGUF_INT32);
    put_u32(&b, (uint32_t)-32);
    expect_fail(&b, SLM_ERR_FORMAT, "general.alignment", at);
    header(&b, 3, 0, 1);
    at = kv_begin(&b, "general.alignment", GGUF_UINT64);
    put_u64(&b, (1ull << 32) + 32);
    expect_fail(&b, SLM_ERR_FORMAT, "general.alignment", at);
    header(&b, 3, 0, 1);
    at = kv_begin(&b, "general.alignment", GGUF_STRING);
    put_str(&b, "32");
    expect_fail(&b, SLM_ERR_FORMAT, "general.alignment", at);
    header(&b, 3, 0, 1);
    at = kv_begin(&b, "general.alignment", GGUF_FLOAT32);
    put_u32(&b, 0x42000000); /* 32.0f */
    expect_fail(&b, SLM_ERR_FORMAT, "general.alignment", at);

    /* Alignment 8 (any integer width): data_start and offsets follow it. */
    const uint64_t dims[1] = {2};
    header(&b, 3, 2, 1);
    kv_begin(&b, "general.alignment", GGUF_UINT16);
    put(&b, "\x08\x00", 2);
    put_tinfo(&b, "a", 1, dims, SLM_DTYPE_F32, 0);
    put_tinfo(&b, "b", 1, dims, SLM_DTYPE_F32, 8);
    size_t end_info = b.n;
    pad_to(&b, 8);
    put_zeros(&b, 16);
    expect_ok(&b, &g, &copy);
    assert_int_equal(g.alignment, 8);
    assert_int_equal(g.data_start, (end_info + 7) / 8 * 8);
    assert_int_equal(g.tensors[1].offset, 8);
    gguf_close(&g);
    free(copy);

    /* With alignment 64 an offset of 32 is misaligned. */
    header(&b, 3, 1, 1);
    kv_begin(&b, "general.alignment", GGUF_UINT32);
    put_u32(&b, 64);
    ti_at t = put_tinfo(&b, "a", 1, dims, SLM_DTYPE_F32, 32);
    pad_to(&b, 64);
    put_zeros(&b, 64);
    expect_fail(&b, SLM_ERR_FORMAT, "tensor data offset", t.offset);
    free(b.p);
}

/* ---- bad input: tensor infos --------------------------------------------------------------- */

static void bad_tensor_info(void **unused) {
    (void)unused;
    img b = {0};
    ti_at t;
    uint64_t d1[1] = {8};

    uint64_t d5[5] = {1, 1, 1, 1, 1};
    t = one_tensor(&b, 0, d5, SLM_DTYPE_F32, 0, 32);
    expect_fail(&b, SLM_ERR_FORMAT, "n_dims", t.n_dims);
    t = one_tensor(&b, 5, d5, SLM_DTYPE_F32, 0, 32);
    expect_fail(&b, SLM_ERR_FORMAT, "n_dims", t.n_dims);
    t = one_tensor(&b, 0xFFFFFFFFu, d5, SLM_DTYPE_F32, 0, 32);
    expect_fail(&b, SLM_ERR_FORMAT, "n_dims", t.n_dims);

    uint64_t dz[2] = {8, 0};
    t = one_tensor(&b, 2, dz, SLM_DTYPE_F32, 0, 32);
    expect_fail(&b, SLM_ERR_FORMAT, "dims[1]", t.dims[1]);
    uint64_t dov[2] = {1ull << 32, 1ull << 32}; /* 2^64 elements */
    t = one_tensor(&b, 2, dov, SLM_DTYPE_F32, 0, 32);
    expect_fail(&b, SLM_ERR_FORMAT, "overflow", t.dims[1]);
    uint64_t dov2[4] = {1ull << 20, 1ull << 20, 1ull << 20, 1ull << 4}; /* 2^64 */
    t = one_tensor(&b, 4, dov2, SLM_DTYPE_F32, 0, 32);
    expect_fail(&b, SLM_ERR_FORMAT, "dims[3]", t.dims[3]);
    uint64_t d63[2] = {1ull << 32, 1ull << 31}; /* 2^63 > INT64_MAX */
    t = one_tensor(&b, 2, d63, SLM_DTYPE_I8, 0, 32);
    expect_fail(&b, SLM_ERR_FORMAT, "dims[1]", t.dims[1]);
    uint64_t dbig[1] = {1ull << 63};
    t = one_tensor(&b, 1, dbig, SLM_DTYPE_I8, 0, 32);
    expect_fail(&b, SLM_ERR_FORMAT, "dims[0]", t.dims[0]);
    uint64_t dbytes[2] = {1ull << 61, 2}; /* 2^62 f64 elements = 2^65 bytes */
    t = one_tensor(&b, 2, dbytes, SLM_DTYPE_F64, 0, 32);
    expect_fail(&b, SLM_ERR_FORMAT, "overflows", t.type);

    uint64_t dq[2] = {128, 2};
    t = one_tensor(&b, 2, dq, SLM_DTYPE_Q4_K, 0, 4096);
    expect_fail(&b, SLM_ERR_FORMAT, "block size", t.dims[0]);
    uint64_t dq8[1] = {31};
    t = one_tensor(&b, 1, dq8, SLM_DTYPE_Q8_0, 0, 64);
    expect_fail(&b, SLM_ERR_FORMAT, "dims[0]", t.dims[0]);

    const uint32_t unknown[] = {4, 5, 16, 20, 23, 29, 31, 34, 39, 40, 41, 1000, 0xFFFFFFFFu};
    for (size_t k = 0; k < sizeof unknown / sizeof unknown[0]; k++) {
        uint64_t d256[1] = {256};
        t = one_tensor(&b, 1, d256, unknown[k], 0, 1024);
        expect_fail(&b, SLM_ERR_UNSUPPORTED, "tensor type", t.type);
    }

    t = one_tensor(&b, 1, d1, SLM_DTYPE_F32, 8, 64);
    expect_fail(&b, SLM_ERR_FORMAT, "tensor data offset", t.offset);
    t = one_tensor(&b, 1, d1, SLM_DTYPE_F32, 1, 64);
    expect_fail(&b, SLM_ERR_FORMAT, "alignment", t.offset);

    /* names */
    header(&b, 3, 1, 0);
    size_t at = put_u64(&b, 0);
    put_zeros(&b, 40);
    expect_fail(&b, SLM_ERR_FORMAT, "tensor name length", at);
    char longname[GGUF_MAX_NAME_LEN + 2];
    memset(longname, 'n', sizeof longname - 1);
    longname[sizeof longname - 1] = '\0';
    header(&b, 3, 1, 0);
    t = put_tinfo(&b, longname, 1, d1, SLM_DTYPE_F32, 0);
    pad_to(&b, 32);
    put_zeros(&b, 32);
    expect_fail(&b, SLM_ERR_FORMAT, "tensor name length", t.info);
    header(&b, 3, 1, 0);
    t = put_tinfo(&b, "bad\xFFname", 1, d1, SLM_DTYPE_F32, 0);
    pad_to(&b, 32);
    put_zeros(&b, 32);
    expect_fail(&b, SLM_ERR_FORMAT, "UTF-8", t.info + 8);

    header(&b, 3, 2, 0); /* duplicate names */
    put_tinfo(&b, "w", 1, d1, SLM_DTYPE_F32, 0);
    t = put_tinfo(&b, "w", 1, d1, SLM_DTYPE_F32, 32);
    pad_to(&b, 32);
    put_zeros(&b, 64);
    expect_fail(&b, SLM_ERR_FORMAT, "duplicate tensor name", t.info);

    /* Two tensors' info truncated in the middle of the second one's dims. */
    header(&b, 3, 2, 0);
    put_tinfo(&b, "a.long.name.so.that.the.count.check.passes", 1, d1, SLM_DTYPE_F32, 0);
    put_str(&b, "b");
    put_u32(&b, 2);
    at = put_u64(&b, 8);
    put_zeros(&b, 4);
    expect_fail(&b, SLM_ERR_FORMAT, "truncated: dims", at + 8);
    free(b.p);
}

/* ---- bad input: tensor data placement ------------------------------------------------------ */

static void bad_tensor_data(void **unused) {
    (void)unused;
    img b = {0};
    gguf_file g;
    uint8_t *copy;
    uint64_t d64[1] = {64}, d16[1] = {16}, d8[1] = {8};

    one_tensor(&b, 1, d64, SLM_DTYPE_F32, 0, 255); /* needs 256 bytes */
    size_t data_start = b.n - 255;
    expect_fail(&b, SLM_ERR_FORMAT, "outside", data_start);
    put_u8(&b, 0);
    expect_ok(&b, &g, &copy);
    assert_int_equal(g.data_start, data_start);
    assert_ptr_equal(g.tensors[0].data, copy + data_start);
    gguf_close(&g);
    free(copy);

    one_tensor(&b, 1, d8, SLM_DTYPE_F32, 1ull << 63, 32); /* offset + size would wrap if unchecked */
    expect_fail(&b, SLM_ERR_FORMAT, "outside", -1);
    one_tensor(&b, 1, d8, SLM_DTYPE_F32, UINT64_MAX - 31, 32);
    expect_fail(&b, SLM_ERR_FORMAT, "outside", -1);

    /* Info ends exactly at the file end: data_start lies past it. */
    header(&b, 3, 1, 0);
    put_tinfo(&b, "t", 1, d8, SLM_DTYPE_F32, 0);
    expect_fail(&b, SLM_ERR_FORMAT, "outside", -1);

    header(&b, 3, 2, 0); /* t = [0, 64), u = [32, 64) */
    put_tinfo(&b, "t", 1, d16, SLM_DTYPE_F32, 0);
    ti_at u = put_tinfo(&b, "u", 1, d8, SLM_DTYPE_F32, 32);
    pad_to(&b, 32);
    data_start = b.n;
    put_zeros(&b, 64);
    expect_fail(&b, SLM_ERR_FORMAT, "overlaps tensor 't'", data_start + 32);
    assert_true(u.info > 0);

    header(&b, 3, 3, 0); /* same offset, listed out of order */
    put_tinfo(&b, "c", 1, d8, SLM_DTYPE_F32, 64);
    put_tinfo(&b, "a", 1, d8, SLM_DTYPE_F32, 0);
    put_tinfo(&b, "b", 1, d8, SLM_DTYPE_F32, 64);
    pad_to(&b, 32);
    put_zeros(&b, 96);
    expect_fail(&b, SLM_ERR_FORMAT, "overlaps", -1);

    header(&b, 3, 3, 0); /* out of order but disjoint, with a gap: fine */
    put_tinfo(&b, "c", 1, d8, SLM_DTYPE_F32, 96);
    put_tinfo(&b, "a", 1, d8, SLM_DTYPE_F32, 0);
    put_tinfo(&b, "b", 1, d8, SLM_DTYPE_F32, 32);
    pad_to(&b, 32);
    data_start = b.n;
    put_zeros(&b, 128);
    expect_ok(&b, &g, &copy);
    assert_int_equal(g.n_tensors, 3);
    assert_ptr_equal(tensor_named(&g, "c")->data, copy + data_start + 96);
    gguf_close(&g);
    free(copy);
    truncation_sweep(b.p, b.n, b.n, 1); /* ends exactly at c's last byte: every prefix fails */
    free(b.p);
}

/* ---- a tokenizer-sized string array -------------------------------------------------------- */

static void large_string_array(void **unused) {
    (void)unused;
    enum { N = 200000 };
    img b = {0};
    header(&b, 3, 0, 2);
    kv_begin(&b, "tokenizer.ggml.tokens", GGUF_ARRAY);
    put_u32(&b, GGUF_STRING);
    put_u64(&b, N);
    char tok[32];
    for (int i = 0; i < N; i++) {
        int n = snprintf(tok, sizeof tok, "t%d", i);
        put_strn(&b, tok, (size_t)n);
    }
    kv_begin(&b, "tokenizer.ggml.token_type", GGUF_ARRAY);
    put_u32(&b, GGUF_INT32);
    put_u64(&b, N);
    for (int i = 0; i < N; i++) put_u32(&b, (uint32_t)(i % 7));
    gguf_file g;
    uint8_t *copy;
    struct timespec t0, t1;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t0);
    expect_ok(&b, &g, &copy);
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t1);
    double secs = (double)(t1.tv_sec - t0.tv_sec) + 1e-9 * (double)(t1.tv_nsec - t0.tv_nsec);
    /* Linear work takes milliseconds of CPU (even under ASan); anything quadratic in N would take
     * minutes. The parser's own CPU time, not the wall clock: other processes on a loaded machine
     * do not count. */
    assert_true(secs < 5.0);
    const gguf_value *arr;
    assert_int_equal(gguf_get_arr(&g, "tokenizer.ggml.tokens", &arr, NULL), SLM_OK);
    assert_int_equal(arr->v.arr.n, N);
    gguf_str s;
    assert_true(gguf_arr_str(arr, N - 1, &s));
    assert_int_equal(s.len, 7);
    assert_memory_equal(s.ptr, "t199999", 7);
    int64_t ty;
    assert_int_equal(gguf_get_arr(&g, "tokenizer.ggml.token_type", &arr, NULL), SLM_OK);
    assert_true(gguf_arr_i64(arr, 123456, &ty));
    assert_int_equal(ty, 123456 % 7);
    gguf_close(&g);
    free(copy);
    free(b.p);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(golden_files),
        cmocka_unit_test(real_model),
        cmocka_unit_test(version2_and_big_endian),
        cmocka_unit_test(getters),
        cmocka_unit_test(allocation_failure_sweep),
        cmocka_unit_test(bad_header),
        cmocka_unit_test(bad_kv),
        cmocka_unit_test(nesting_and_empty_arrays),
        cmocka_unit_test(alignment),
        cmocka_unit_test(bad_tensor_info),
        cmocka_unit_test(bad_tensor_data),
        cmocka_unit_test(large_string_array),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
