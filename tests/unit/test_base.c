/* test_base.c — base/: status table, half/bf16 conversions, UTF-8, bounded reader, allocator. */
#include "testutil.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/alloc.h"
#include "base/buf.h"
#include "base/err.h"
#include "base/half.h"
#include "base/reader.h"
#include "base/utf8.h"

static void status_names(void **unused) {
    (void)unused;
    assert_string_equal(slm_status_name(SLM_OK), "SLM_OK");
    assert_string_equal(slm_status_name(SLM_ERR_FORMAT), "SLM_ERR_FORMAT");
    assert_string_equal(slm_status_name((slm_status)-999), "SLM_UNKNOWN_STATUS");
    assert_string_equal(slm_status_str(SLM_ERR_NOMEM), "out of memory");
}

static void err_keeps_innermost(void **unused) {
    (void)unused;
    slm_err e;
    err_clear(&e);
    assert_int_equal(err_set(&e, SLM_ERR_FORMAT, "inner %d", 1), SLM_ERR_FORMAT);
    err_set(&e, SLM_ERR_IO, "outer");
    assert_string_equal(e.msg, "inner 1");
    err_prefix(&e, "file.gguf: ");
    assert_string_equal(e.msg, "file.gguf: inner 1");
}

/* f16 round trip over every finite half value; known encodings from IEEE 754. */
static void half_conversions(void **unused) {
    (void)unused;
    assert_true(f16_to_f32(0x3C00) == 1.0f);
    assert_true(f16_to_f32(0xC000) == -2.0f);
    assert_true(f16_to_f32(0x7BFF) == 65504.0f);
    assert_true(f16_to_f32(0x0001) == ldexpf(1.0f, -24));
    assert_true(isinf(f16_to_f32(0x7C00)));
    assert_true(isnan(f16_to_f32(0x7E00)));
    for (uint32_t h = 0; h < 0x10000; h++) {
        if ((h & 0x7C00) == 0x7C00) continue;
        assert_int_equal(f32_to_f16(f16_to_f32((uint16_t)h)), h);
    }
    /* Round to nearest even at the midpoint between 1 and 1+2^-10. */
    assert_int_equal(f32_to_f16(1.0f + ldexpf(1.0f, -11)), 0x3C00);
    assert_int_equal(f32_to_f16(1.0f + 3 * ldexpf(1.0f, -11)), 0x3C02);
    assert_int_equal(f32_to_f16(1e6f), 0x7C00);
    assert_true(bf16_to_f32(0x3F80) == 1.0f);
    assert_int_equal(f32_to_bf16(1.0f), 0x3F80);
    assert_int_equal(f32_to_bf16(f32_from_bits(0x3F808000u)), 0x3F80); /* tie to even */
    assert_int_equal(f32_to_bf16(f32_from_bits(0x3F818000u)), 0x3F82);
}

static void utf8_rules(void **unused) {
    (void)unused;
    const uint8_t ok[] = "a\xC3\xA9\xE2\x82\xAC\xF0\x9F\x98\x80";
    assert_true(utf8_valid(ok, sizeof ok - 1));
    const uint8_t overlong[] = {0xC0, 0xAF};
    assert_false(utf8_valid(overlong, 2));
    const uint8_t surrogate[] = {0xED, 0xA0, 0x80};
    assert_false(utf8_valid(surrogate, 3));
    const uint8_t too_big[] = {0xF4, 0x90, 0x80, 0x80};
    assert_false(utf8_valid(too_big, 4));
    uint32_t cp;
    assert_int_equal(utf8_decode(ok + 6, 4, &cp), 4);
    assert_int_equal(cp, 0x1F600);
    /* complete prefix: a 4-byte emoji cut after 2 bytes */
    assert_int_equal(utf8_complete_prefix(ok, 8), 6);
    assert_int_equal(utf8_complete_prefix(ok, 10), 10);
    uint8_t enc[4];
    assert_int_equal(utf8_encode(0x20AC, enc), 3);
    assert_memory_equal(enc, "\xE2\x82\xAC", 3);
}

static void reader_bounds(void **unused) {
    (void)unused;
    const uint8_t data[] = {1, 0, 0, 0, 2, 0};
    slm_err e;
    err_clear(&e);
    rd r;
    rd_init(&r, data, sizeof data, &e);
    uint32_t v;
    assert_int_equal(rd_u32(&r, "first", &v), SLM_OK);
    assert_int_equal(v, 1);
    assert_int_equal(rd_u32(&r, "second", &v), SLM_ERR_FORMAT);
    assert_int_equal(r.pos, 4);
    assert_non_null(strstr(e.msg, "second"));
    assert_non_null(strstr(e.msg, "offset 4"));
}

static void alloc_overflow(void **unused) {
    (void)unused;
    assert_null(al_array(&al_default, SIZE_MAX / 2, 4));
    assert_null(al_calloc(&al_default, SIZE_MAX, SIZE_MAX));
    char *s = al_strndup(&al_default, "abcdef", 3);
    assert_string_equal(s, "abc");
    al_free(&al_default, s);
}

/* A hook allocator that counts live blocks and hands out addresses 16 bytes past a line. */
typedef struct counting_heap {
    int live;
} counting_heap;

static void *counting_alloc(void *user, size_t size) {
    ((counting_heap *)user)->live++;
    uint8_t *p = malloc(size + 80);
    if (!p) return NULL;
    uint8_t *q = (uint8_t *)(((uintptr_t)p + 63) & ~(uintptr_t)63) + 16;
    memcpy(q - 16, &p, sizeof p);
    return q;
}

static void counting_free(void *user, void *q) {
    ((counting_heap *)user)->live--;
    void *p;
    memcpy(&p, (uint8_t *)q - 16, sizeof p);
    free(p);
}

static void alloc_aligned(void **unused) {
    (void)unused;
    counting_heap heap = {0};
    slm_allocator a = {counting_alloc, counting_free, &heap};
    for (size_t size = 0; size < 300; size += 37) {
        uint8_t *p = al_malloc_aligned(&a, size);
        uint8_t *z = al_calloc_aligned(&a, size);
        assert_non_null(p);
        assert_non_null(z);
        assert_int_equal((uintptr_t)p % AL_ALIGN, 0);
        assert_int_equal((uintptr_t)z % AL_ALIGN, 0);
        for (size_t i = 0; i < size; i++) assert_int_equal(z[i], 0);
        memset(p, 0xAB, size);
        al_free_aligned(&a, p);
        al_free_aligned(&a, z);
    }
    /* large blocks start on a huge-page boundary (small ones as al_malloc_aligned) */
    uint8_t *big = al_malloc_large(&a, 3 * AL_HUGE_PAGE + 5), *small = al_malloc_large(&a, 1000);
    assert_non_null(big);
    assert_non_null(small);
    assert_int_equal((uintptr_t)big % AL_HUGE_PAGE, 0);
    assert_int_equal((uintptr_t)small % AL_ALIGN, 0);
    memset(big, 1, 3 * AL_HUGE_PAGE + 5);
    al_free_aligned(&a, big);
    al_free_aligned(&a, small);
    assert_int_equal(heap.live, 0);
    al_free_aligned(&a, NULL);
    assert_null(al_malloc_aligned(&al_default, SIZE_MAX - 8));
}

/* The buffer's contents must equal what libc's snprintf (or a memcpy) builds; p[n] == '\0' always. */
static void check_buf(const buf *b, const char *want, size_t n_want) {
    assert_false(b->oom);
    assert_int_equal(b->n, n_want);
    assert_non_null(b->p);
    assert_true(b->n < b->cap);
    assert_memory_equal(b->p, want, n_want);
    assert_int_equal(b->p[b->n], '\0');
}

static void buf_appends(void **unused) {
    (void)unused;
    tu_failing f = tu_failing_at(-1);
    slm_allocator a = tu_failing_allocator(&f);
    buf b = buf_make(&a);
    assert_null(b.p);
    buf_puts(&b, "ab");
    buf_putc(&b, 'c');
    buf_put(&b, "d\0e", 3); /* bytes, an embedded NUL included */
    buf_put(&b, NULL, 0);
    buf_puts(&b, "");
    check_buf(&b, "abcd\0e", 6);
    /* growth past the first block keeps every byte */
    char want[5000];
    memcpy(want, "abcd\0e", 6);
    for (size_t i = 6; i < sizeof want; i++) {
        char c = (char)('a' + i % 26);
        buf_putc(&b, c);
        want[i] = c;
    }
    check_buf(&b, want, sizeof want);
    buf_free(&b);
    assert_null(b.p);
    assert_int_equal(b.n, 0);
    assert_int_equal(f.n_live, 0);
    buf_free(&b); /* twice is harmless */
    buf d = buf_make(NULL); /* malloc/free */
    buf_puts(&d, "x");
    check_buf(&d, "x", 1);
    buf_free(&d);
}

static void buf_printf_growth(void **unused) {
    (void)unused;
    tu_failing f = tu_failing_at(-1);
    slm_allocator a = tu_failing_allocator(&f);
    buf b = buf_make(&a);
    char want[4096], big[1200];
    memset(big, 'q', sizeof big - 1);
    big[sizeof big - 1] = '\0';
    int n = 0;
    buf_printf(&b, "%d|%s|", 42, "short"); /* fits the 256-byte stack buffer */
    n += snprintf(want + n, sizeof want - (size_t)n, "%d|%s|", 42, "short");
    check_buf(&b, want, (size_t)n);
    buf_printf(&b, "[%s]%x", big, 0xbeefu); /* 1205 bytes: formatted straight into the buffer */
    n += snprintf(want + n, sizeof want - (size_t)n, "[%s]%x", big, 0xbeefu);
    check_buf(&b, want, (size_t)n);
    for (int len = 250; len <= 260; len++) { /* around the stack buffer's size */
        buf_printf(&b, "%.*s%c", len, big, '!');
        n += snprintf(want + n, sizeof want - (size_t)n, "%.*s%c", len, big, '!');
        check_buf(&b, want, (size_t)n);
    }
    assert_true((size_t)n < sizeof want);
    buf_free(&b);
    assert_int_equal(f.n_live, 0);
}

static void buf_truncate_take(void **unused) {
    (void)unused;
    tu_failing f = tu_failing_at(-1);
    slm_allocator a = tu_failing_allocator(&f);
    buf b = buf_make(&a);
    buf_truncate(&b, 0); /* empty: nothing to do */
    assert_null(b.p);
    buf_puts(&b, "hello, world");
    buf_truncate(&b, 5);
    check_buf(&b, "hello", 5);
    buf_truncate(&b, 99); /* past the end: unchanged */
    check_buf(&b, "hello", 5);
    buf_puts(&b, "!");
    check_buf(&b, "hello!", 6);
    char *s = buf_take(&b);
    assert_string_equal(s, "hello!");
    assert_null(b.p);
    assert_int_equal(b.n, 0);
    assert_int_equal(b.cap, 0);
    al_free(&a, s);
    char *e = buf_take(&b); /* an empty buffer hands out "" */
    assert_non_null(e);
    assert_string_equal(e, "");
    al_free(&a, e);
    buf_puts(&b, "again"); /* usable after take */
    check_buf(&b, "again", 5);
    buf_free(&b);
    assert_int_equal(f.n_live, 0);
}

/* Fails allocation k = 0, 1, ... of a run that builds a 3 KiB text: from the failure on every append
 * is a no-op although the allocator would succeed again (sticky), the contents never change after
 * it, take returns NULL and frees everything; the run with no failure gives the whole text. */
static void buf_oom_sticky(void **unused) {
    (void)unused;
    char line[64];
    bool done = false;
    for (long k = 0; k < 100 && !done; k++) {
        tu_failing f = tu_failing_at(k);
        slm_allocator a = tu_failing_allocator(&f);
        buf b = buf_make(&a);
        char want[4096];
        size_t n = 0;
        bool failed = false;
        for (int i = 0; i < 100; i++) {
            int len = snprintf(line, sizeof line, "line %d of the text;", i);
            if (i % 3 == 0) buf_printf(&b, "line %d of the text;", i);
            else buf_put(&b, line, (size_t)len);
            if (!failed && b.oom) {
                failed = true;
                assert_int_equal(f.n_refused, 1);
                assert_int_equal(f.n_alloc, k + 1);
            }
            if (!failed) {
                memcpy(want + n, line, (size_t)len);
                n += (size_t)len;
                check_buf(&b, want, n);
            } else {
                assert_true(b.oom);
                assert_true(b.n <= n); /* nothing appended after the failure */
            }
        }
        buf_putc(&b, 'x');
        if (failed) assert_false(buf_reserve(&b, 1));
        char *s = buf_take(&b);
        if (failed) {
            assert_null(s);
            assert_int_equal(f.n_alloc, k + 1); /* a sticky buffer asked for nothing after the failure */
        } else {
            want[n++] = 'x';
            want[n] = '\0';
            assert_non_null(s);
            assert_string_equal(s, want);
            al_free(&a, s);
            done = true;
        }
        assert_null(b.p);
        assert_false(b.oom); /* reusable */
        assert_int_equal(f.n_live, 0);
    }
    assert_true(done);
    /* a size that overflows fails without asking the allocator */
    tu_failing f = tu_failing_at(-1);
    slm_allocator a = tu_failing_allocator(&f);
    buf b = buf_make(&a);
    buf_puts(&b, "ab");
    long n_alloc = f.n_alloc;
    assert_false(buf_reserve(&b, SIZE_MAX));
    assert_true(b.oom);
    assert_int_equal(f.n_alloc, n_alloc);
    buf_printf(&b, "%d", 1);
    assert_null(buf_take(&b));
    assert_int_equal(f.n_live, 0);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(status_names), cmocka_unit_test(err_keeps_innermost), cmocka_unit_test(half_conversions),
        cmocka_unit_test(utf8_rules),   cmocka_unit_test(reader_bounds),       cmocka_unit_test(alloc_overflow),
        cmocka_unit_test(alloc_aligned),
        cmocka_unit_test(buf_appends),  cmocka_unit_test(buf_printf_growth),   cmocka_unit_test(buf_truncate_take),
        cmocka_unit_test(buf_oom_sticky),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
