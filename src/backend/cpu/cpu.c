/* cpu.c — the CPU backend object: thread pool, per-thread scratch, shared work buffer, the
 * instruction-set choice, and dispatch of each node to its fast kernel (kern_fast.c) when one
 * takes the node, else to its reference kernel (kern_ref.c). */
#include "backend/cpu/cpu.h"

#include <stdatomic.h>
#include <stdio.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <cpuid.h>
#endif
#if defined(__x86_64__) && defined(__linux__)
#include <sys/syscall.h>
#endif
#if defined(__aarch64__) && defined(__linux__)
#include <sys/auxv.h>
#ifndef HWCAP_ASIMDDP
#define HWCAP_ASIMDDP (1 << 20)
#endif
#ifndef HWCAP2_I8MM
#define HWCAP2_I8MM (1 << 13)
#endif
#endif

const char *cpu_isa_name(cpu_isa_level isa) {
    switch (isa) {
    case CPU_ISA_NEON: return "neon";
    case CPU_ISA_AVX2: return "avx2";
    case CPU_ISA_AVX2_VNNI: return "avxvnni";
    case CPU_ISA_AVX512: return "avx512";
    case CPU_ISA_AMX: return "amx";
    case CPU_ISA_I8MM: return "i8mm";
    default: return "generic";
    }
}

/* The CPU features the levels need, read on each query (a few cpuid instructions; backend creation
 * and the tests ask); each level checks its own, never assuming the levels nested. */
typedef struct cpu_features {
    bool avx2, fma, f16c, avx_os;                  /* avx_os: XCR0 has the XMM and YMM states */
    bool avx512f, avx512bw, avx512vl, avx512dq, avx512vnni, avx512_os; /* + opmask, ZMM states */
    bool avxvnni;
    bool amx_tile, amx_int8, amx_os;               /* amx_os: XCR0 has XTILECFG and XTILEDATA */
    bool dotprod, i8mm;
} cpu_features;

static cpu_features read_features(void) {
    cpu_features f = {0};
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
    unsigned int a = 0, b = 0, c = 0, d = 0;
    if (!__get_cpuid(1, &a, &b, &c, &d)) return f;
    bool osxsave = (c >> 27) & 1, avx = (c >> 28) & 1;
    f.fma = (c >> 12) & 1;
    f.f16c = (c >> 29) & 1;
    if (osxsave && avx) {
        unsigned int xlo = 0, xhi = 0;
        __asm__ volatile("xgetbv" : "=a"(xlo), "=d"(xhi) : "c"(0));
        f.avx_os = (xlo & 0x6u) == 0x6u;
        f.avx512_os = (xlo & 0xE6u) == 0xE6u;
        f.amx_os = ((xlo >> 17) & 3u) == 3u;
    }
    if (__get_cpuid_count(7, 0, &a, &b, &c, &d)) {
        f.avx2 = (b >> 5) & 1;
        f.avx512f = (b >> 16) & 1;
        f.avx512dq = (b >> 17) & 1;
        f.avx512bw = (b >> 30) & 1;
        f.avx512vl = (b >> 31) & 1;
        f.avx512vnni = (c >> 11) & 1;
        f.amx_tile = (d >> 24) & 1;
        f.amx_int8 = (d >> 25) & 1;
        unsigned int max_sub = a;
        if (max_sub >= 1 && __get_cpuid_count(7, 1, &a, &b, &c, &d)) f.avxvnni = (a >> 4) & 1;
    }
#elif defined(__aarch64__)
#if defined(__linux__)
    f.dotprod = (getauxval(AT_HWCAP) & HWCAP_ASIMDDP) != 0;
    f.i8mm = (getauxval(AT_HWCAP2) & HWCAP2_I8MM) != 0;
#else
    f.dotprod = true; /* Apple silicon and other ARMv8.4+ targets */
#if defined(__ARM_FEATURE_MATMUL_INT8)
    f.i8mm = true;    /* a build for a target with I8MM (Apple M2 and later) runs only there */
#endif
#endif
#endif
    return f;
}

/* The AMX tier's table: the AVX-512 one with kern_amx.c's packed matmul. Built here, in code
 * compiled without AVX-512 (a copy in kern_amx.c could use AVX-512 moves), as cpu_isa_missing asks
 * for it on every CPU. */
static cpu_isa amx_table;
static pthread_once_t amx_table_once = PTHREAD_ONCE_INIT;
static void amx_table_init(void) {
    amx_table = *cpu_isa_avx512();
    amx_table.level = CPU_ISA_AMX;
    amx_table.mm_quant_packed = cpu_amx_mm_quant_packed();
}

const cpu_isa *cpu_isa_amx(void) {
    if (!cpu_isa_avx512() || !cpu_amx_mm_quant_packed()) return NULL;
    pthread_once(&amx_table_once, amx_table_init);
    return &amx_table;
}

static const cpu_isa *built_in(cpu_isa_level level) {
    switch (level) {
    case CPU_ISA_GENERIC: return cpu_isa_generic();
    case CPU_ISA_NEON: return cpu_isa_neon();
    case CPU_ISA_AVX2: return cpu_isa_avx2();
    case CPU_ISA_AVX2_VNNI: return cpu_isa_avx2_vnni();
    case CPU_ISA_AVX512: return cpu_isa_avx512();
    case CPU_ISA_AMX: return cpu_isa_amx();
    case CPU_ISA_I8MM: return cpu_isa_i8mm();
    default: return NULL;
    }
}

/* What the AVX2 kernels need (the AVX2_VNNI and AVX512 files use it all too), or NULL. */
static const char *avx2_missing(const cpu_features *f) {
    if (!f->avx2) return "AVX2";
    if (!f->fma) return "FMA";
    if (!f->f16c) return "F16C";
    if (!f->avx_os) return "OS support for the AVX registers";
    return NULL;
}

/* The OS's permission for this process to use the AMX tile data (Linux 5.16+: XTILEDATA is an
 * XSAVE feature a process must request before its threads touch a tile, else they get SIGILL).
 * Asked once per process; the answer is kept. Only asked when CPUID and XCR0 report AMX. */
static bool amx_permitted;
static pthread_once_t amx_perm_once = PTHREAD_ONCE_INIT;
static void amx_request_permission(void) {
#if defined(__x86_64__) && defined(__linux__) && defined(SYS_arch_prctl)
    const long arch_req_xcomp_perm = 0x1023, xfeature_xtiledata = 18;
    amx_permitted = syscall(SYS_arch_prctl, arch_req_xcomp_perm, xfeature_xtiledata) == 0;
#endif
}

/* The I8MM tier's table: the NEON one with kern_i8mm.c's packed matmul (built here for the reason
 * the AMX table is). */
static cpu_isa i8mm_table;
static pthread_once_t i8mm_table_once = PTHREAD_ONCE_INIT;
static void i8mm_table_init(void) {
    i8mm_table = *cpu_isa_neon();
    i8mm_table.level = CPU_ISA_I8MM;
    i8mm_table.mm_quant_packed = cpu_i8mm_mm_quant_packed();
}

const cpu_isa *cpu_isa_i8mm(void) {
    if (!cpu_isa_neon() || !cpu_i8mm_mm_quant_packed()) return NULL;
    pthread_once(&i8mm_table_once, i8mm_table_init);
    return &i8mm_table;
}

/* What the AVX-512 kernels need (the AMX file uses them all too), or NULL. */
static const char *avx512_missing(const cpu_features *f) {
    if (avx2_missing(f)) return avx2_missing(f);
    if (!f->avx512f) return "AVX-512F";
    if (!f->avx512bw) return "AVX-512BW";
    if (!f->avx512vl) return "AVX-512VL";
    if (!f->avx512dq) return "AVX-512DQ";
    if (!f->avx512vnni) return "AVX-512 VNNI";
    return f->avx512_os ? NULL : "OS support for the AVX-512 registers";
}

const char *cpu_isa_missing(cpu_isa_level level) {
    if (!built_in(level)) return "not built in";
    cpu_features f = read_features();
    switch (level) {
    case CPU_ISA_NEON: return f.dotprod ? NULL : "the dot-product extension";
    case CPU_ISA_I8MM: return !f.dotprod ? "the dot-product extension" : f.i8mm ? NULL : "I8MM (the int8 matrix multiply)";
    case CPU_ISA_AVX2: return avx2_missing(&f);
    case CPU_ISA_AVX2_VNNI: return avx2_missing(&f) ? avx2_missing(&f) : f.avxvnni ? NULL : "AVX-VNNI";
    case CPU_ISA_AVX512: return avx512_missing(&f);
    case CPU_ISA_AMX:
        if (avx512_missing(&f)) return avx512_missing(&f);
        if (!f.amx_tile) return "AMX-TILE";
        if (!f.amx_int8) return "AMX-INT8";
        if (!f.amx_os) return "OS support for the AMX tile registers";
        pthread_once(&amx_perm_once, amx_request_permission);
        return amx_permitted ? NULL : "the OS's permission for the AMX tile data (arch_prctl ARCH_REQ_XCOMP_PERM)";
    default: return NULL;
    }
}

bool cpu_isa_supported(cpu_isa_level level) { return cpu_isa_missing(level) == NULL; }

cpu_isa_level cpu_isa_detect(void) {
    const cpu_isa_level pref[] = {CPU_ISA_AMX, CPU_ISA_AVX512, CPU_ISA_AVX2_VNNI, CPU_ISA_AVX2, CPU_ISA_I8MM, CPU_ISA_NEON};
    for (size_t i = 0; i < sizeof pref / sizeof pref[0]; i++)
        if (cpu_isa_supported(pref[i])) return pref[i];
    return CPU_ISA_GENERIC;
}

bool cpu_avx512_keeps_ports(void) {
    static _Atomic int known; /* 0: not read yet; 1: false; 2: true (a racing first read writes the same) */
    int v = atomic_load_explicit(&known, memory_order_relaxed);
    if (v) return v == 2;
    bool amd = false;
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
    unsigned int a = 0, vendor[3] = {0};
    if (__get_cpuid(0, &a, &vendor[0], &vendor[2], &vendor[1])) amd = memcmp(vendor, "AuthenticAMD", 12) == 0;
#endif
    atomic_store_explicit(&known, amd ? 2 : 1, memory_order_relaxed);
    return amd;
}

const cpu_isa *cpu_isa_get(cpu_isa_level level) {
    return built_in(cpu_isa_supported(level) ? level : cpu_isa_detect());
}

static size_t cpu_scratch_need(backend *be, const g_node *nd, const be_view *out, const be_view *in) {
    cpu_backend *cb = (cpu_backend *)be;
    size_t ref = cpu_ref_scratch_bytes(nd, out, in);
    if (!cb->use_fast) return ref;
    const cpu_fast_kernel *k = cpu_fast_lookup(nd, out, in);
    if (!k) return ref;
    return k->scratch ? k->scratch(cb, nd, out, in) : 0;
}

static slm_status cpu_reserve(backend *be, size_t bytes, slm_err *e) {
    cpu_backend *cb = (cpu_backend *)be;
    if (bytes <= cb->scratch_bytes) return SLM_OK;
    bytes = (bytes + 63) & ~(size_t)63;
    for (int32_t t = 0; t < cb->n_threads; t++) {
        uint8_t *p = al_malloc_aligned(&cb->alloc, bytes);
        if (!p) return err_set(e, SLM_ERR_NOMEM, "out of memory for %zu bytes of kernel scratch", bytes);
        al_free_aligned(&cb->alloc, cb->scratch[t]);
        cb->scratch[t] = p;
    }
    cb->scratch_bytes = bytes;
    return SLM_OK;
}

void *cpu_work(cpu_backend *cb, size_t bytes, slm_err *e) {
    if (bytes <= cb->work_bytes) return cb->work;
    bytes = (bytes + 4095) & ~(size_t)4095;
    uint8_t *p = al_malloc_aligned(&cb->alloc, bytes);
    if (!p) {
        err_set(e, SLM_ERR_NOMEM, "out of memory for %zu bytes of kernel work space", bytes);
        return NULL;
    }
    al_free_aligned(&cb->alloc, cb->work);
    cb->work = p;
    cb->work_bytes = bytes;
    return cb->work;
}

/* ---- repacked weights ------------------------------------------------------------------------ */

void cpu_backend_set_repack(backend *be, bool on) { ((cpu_backend *)be)->repack = on; }

static slm_status weight_cache_create(const slm_allocator *a, cpu_weight_cache **out, slm_err *e) {
    *out = al_calloc(a, 1, sizeof **out);
    if (!*out) return err_set(e, SLM_ERR_NOMEM, "out of memory");
    (*out)->base.vt = &backend_vtable_cpu;
    (*out)->alloc = *a;
    pthread_mutex_init(&(*out)->mu, NULL);
    return SLM_OK;
}

static void weight_cache_destroy(cpu_weight_cache *c) {
    if (!c) return;
    for (int32_t i = 0; i < c->n_slabs; i++) al_free_aligned(&c->alloc, c->slabs[i].base);
    al_free(&c->alloc, c->slabs);
    al_free(&c->alloc, c->packs);
    pthread_mutex_destroy(&c->mu);
    slm_allocator a = c->alloc;
    al_free(&a, c);
}


static size_t pack_slot(const cpu_weight_cache *wc, const void *src) {
    uintptr_t h = (uintptr_t)src;
    h ^= h >> 17;
    h *= (uintptr_t)0x9E3779B97F4A7C15ull;
    return (size_t)(h >> 7) & (size_t)(wc->cap_packs - 1);
}

/* Inserts e (no entry for e.src exists); false when the table cannot grow. Caller holds wc->mu. */
static bool pack_insert(cpu_weight_cache *wc, cpu_wpack e) {
    if (2 * (wc->n_packs + 1) > wc->cap_packs) {
        int32_t cap = wc->cap_packs ? 2 * wc->cap_packs : 64;
        cpu_wpack *t = al_calloc(&wc->alloc, (size_t)cap, sizeof *t), *old = wc->packs;
        if (!t) return false;
        int32_t old_cap = wc->cap_packs;
        wc->packs = t;
        wc->cap_packs = cap;
        wc->n_packs = 0;
        for (int32_t i = 0; i < old_cap; i++)
            if (old[i].src) pack_insert(wc, old[i]);
        al_free(&wc->alloc, old);
    }
    size_t i = pack_slot(wc, e.src);
    while (wc->packs[i].src) i = (i + 1) & (size_t)(wc->cap_packs - 1);
    wc->packs[i] = e;
    wc->n_packs++;
    return true;
}

/* bytes (a multiple of 64) from the last slab, or a new one; NULL when out of memory. Caller holds
 * wc->mu. */
static uint8_t *slab_take(cpu_weight_cache *wc, size_t bytes) {
    cpu_wpack_slab *last = wc->n_slabs ? &wc->slabs[wc->n_slabs - 1] : NULL;
    if (last && last->cap - last->used >= bytes) {
        uint8_t *p = last->base + last->used;
        last->used += bytes;
        return p;
    }
    if (wc->n_slabs == wc->cap_slabs) {
        int32_t cap = wc->cap_slabs ? 2 * wc->cap_slabs : 8;
        cpu_wpack_slab *t = al_realloc(&wc->alloc, wc->slabs, (size_t)wc->cap_slabs * sizeof *t, (size_t)cap * sizeof *t);
        if (!t) return NULL;
        wc->slabs = t;
        wc->cap_slabs = cap;
    }
    size_t cap = bytes > CPU_WPACK_SLAB_BYTES ? bytes : CPU_WPACK_SLAB_BYTES;
    cap = (cap + AL_HUGE_PAGE - 1) & ~(AL_HUGE_PAGE - 1);
    uint8_t *base = cap >= bytes ? al_malloc_large(&wc->alloc, cap) : NULL;
    if (!base) return NULL;
    wc->slabs[wc->n_slabs++] = (cpu_wpack_slab){base, bytes, cap};
    return base;
}

/* The matmuls read the repacked copy from now on: drop the pages of the file layout from the
 * process, so resident memory does not hold the weights twice — only inside the model's read-only
 * file mapping, where MADV_DONTNEED loses nothing (the pages stay in the page cache, and a later
 * read faults them back). Caller holds wc->mu. */
static bool releasable(const cpu_weight_cache *wc, const uint8_t *p, size_t bytes) {
    return wc->file_lo && p >= wc->file_lo && p + bytes <= wc->file_hi;
}

/* Drops the whole pages inside [p, p + bytes) from the process (a hint; failure changes nothing). */
static void drop_pages(const void *p, size_t bytes) {
    long page = sysconf(_SC_PAGESIZE);
    if (page <= 0) return;
    uintptr_t lo = ((uintptr_t)p + (uintptr_t)page - 1) & ~(uintptr_t)(page - 1);
    uintptr_t hi = ((uintptr_t)p + bytes) & ~(uintptr_t)(page - 1);
    if (hi > lo) (void)madvise((void *)lo, hi - lo, MADV_DONTNEED);
}

/* Repacking and copying run over the pool in row ranges of at most about PACK_TASK_BYTES of
 * source; with release set each task drops the source pages of its range as soon as it is done,
 * so a large matrix (a 143 MB output head) is never resident twice, which would set the process's
 * peak memory. */
#define PACK_TASK_BYTES ((size_t)4 << 20)
typedef struct repack_ctx {
    const cpu_isa *isa;
    uint32_t wt;
    const uint8_t *w;
    size_t row_bytes;
    int64_t m, k, ntiles, per_task;
    uint8_t *dst;
    bool release;
} repack_ctx;

static void repack_task(void *vctx, int64_t task, int32_t thread) {
    (void)thread;
    repack_ctx *c = vctx;
    int64_t t0 = task * c->per_task, t1 = t0 + c->per_task < c->ntiles ? t0 + c->per_task : c->ntiles;
    c->isa->repack_tiles(c->wt, c->w, c->row_bytes, c->m, c->k, t0, t1, c->dst);
    int64_t r1 = 16 * t1 < c->m ? 16 * t1 : c->m;
    if (c->release) drop_pages(c->w + (size_t)(16 * t0) * c->row_bytes, (size_t)(r1 - 16 * t0) * c->row_bytes);
}

/* vtable cache_set_file_map: after repacking a matrix inside [data, data + size) (the model's
 * GGUF) the backend drops its pages from the process (MADV_DONTNEED; they stay in the page cache
 * and a later read faults them back). The token embeddings, when they are also the output head,
 * are then read by EMBED from the repacked copy. Weights elsewhere are left alone. */
static void weight_cache_set_file_map(be_model_cache *mc, const void *data, size_t size) {
    cpu_weight_cache *c = (cpu_weight_cache *)mc;
    pthread_mutex_lock(&c->mu);
    c->file_lo = data;
    c->file_hi = data ? (const uint8_t *)data + size : NULL;
    pthread_mutex_unlock(&c->mu);
}

typedef struct copy_ctx {
    const uint8_t *src;
    uint8_t *dst;
    size_t bytes, per_task;
    bool release;
} copy_ctx;

static void copy_task(void *vctx, int64_t task, int32_t thread) {
    (void)thread;
    copy_ctx *c = vctx;
    size_t o = (size_t)task * c->per_task, n = c->bytes - o < c->per_task ? c->bytes - o : c->per_task;
    memcpy(c->dst + o, c->src + o, n);
    if (c->release) drop_pages(c->src + o, n);
}

static bool is_float_type(uint32_t wt) { return wt == SLM_DTYPE_F32 || wt == SLM_DTYPE_F16 || wt == SLM_DTYPE_BF16; }

const uint8_t *cpu_wpack_find(cpu_backend *cb, uint32_t wt, const void *w, int64_t k, int64_t m) {
    cpu_weight_cache *wc = cb->wc;
    if (!wc) return NULL;
    const uint8_t *pk = NULL;
    pthread_mutex_lock(&wc->mu);
    if (wc->cap_packs) {
        for (size_t i = pack_slot(wc, w); wc->packs[i].src; i = (i + 1) & (size_t)(wc->cap_packs - 1)) {
            const cpu_wpack *e = &wc->packs[i];
            if (e->src != w) continue;
            if (e->isa == cb->isa && e->dtype == wt && e->k == k && e->m == m) pk = e->pk;
            break;
        }
    }
    pthread_mutex_unlock(&wc->mu);
    return pk;
}

/* Looks up (or, under the table's lock, builds over this backend's pool) the repacked copy. */
const uint8_t *cpu_wpack_get(cpu_backend *cb, uint32_t wt, const void *w, size_t row_bytes, int64_t k, int64_t m) {
    const cpu_isa *isa = cb->isa;
    cpu_weight_cache *wc = cb->wc;
    if (!cb->repack || !wc) return NULL;
    bool copy = is_float_type(wt);
    if (!copy && (!isa->repack_tiles || !isa->mm_quant_packed || !isa->tile_block_bytes || !isa->tile_group ||
                  !isa->tile_block_bytes(wt)))
        return NULL;
    pthread_mutex_lock(&wc->mu);
    /* float weights are copied only where the file pages can then be released: never held twice */
    size_t src_bytes = (size_t)m * row_bytes;
    if (copy && !releasable(wc, w, src_bytes)) {
        pthread_mutex_unlock(&wc->mu);
        return NULL;
    }
    if (wc->cap_packs) {
        size_t i = pack_slot(wc, w);
        for (; wc->packs[i].src; i = (i + 1) & (size_t)(wc->cap_packs - 1)) {
            cpu_wpack *e = &wc->packs[i];
            if (e->src != w) continue;
            const uint8_t *pk = e->isa == isa && e->dtype == wt && e->k == k && e->m == m ? e->pk : NULL;
            pthread_mutex_unlock(&wc->mu); /* another shape or ISA at this address: not ours to cache */
            return pk;
        }
    }
    cpu_wpack e = {w, isa, wt, k, m, NULL};
    int64_t ntiles = (m + 15) / 16;
    size_t bytes = 0;
    if (copy)
        bytes = src_bytes;
    else if (!size_mul_ok((size_t)ntiles * (size_t)(k / CPU_QK), isa->tile_block_bytes(wt), &bytes))
        bytes = SIZE_MAX;
    if (bytes < SIZE_MAX - 64) e.pk = slab_take(wc, (bytes + 63) & ~(size_t)63);
    if (e.pk && copy) {
        size_t per_task = bytes / (4 * (size_t)cb->n_threads) + 1;
        if (per_task > PACK_TASK_BYTES) per_task = PACK_TASK_BYTES;
        copy_ctx c = {w, e.pk, bytes, per_task, releasable(wc, w, src_bytes)};
        pool_run(cb->pool, (int64_t)((bytes + c.per_task - 1) / c.per_task), copy_task, &c);
    } else if (e.pk) {
        repack_ctx c = {isa, wt, w, row_bytes, m, k, ntiles, 0, e.pk, releasable(wc, w, src_bytes)};
        c.per_task = ntiles / (4 * cb->n_threads) + 1;
        int64_t cap = (int64_t)(PACK_TASK_BYTES / (16 * row_bytes)) + 1;
        if (c.per_task > cap) c.per_task = cap;
        pool_run(cb->pool, (ntiles + c.per_task - 1) / c.per_task, repack_task, &c);
    }
    if (!pack_insert(wc, e)) {
        if (e.pk) wc->slabs[wc->n_slabs - 1].used -= (bytes + 63) & ~(size_t)63; /* it was the last take */
        e.pk = NULL;
    }
    if (e.pk && releasable(wc, w, src_bytes)) drop_pages(w, src_bytes); /* pages at the ranges' edges */
    pthread_mutex_unlock(&wc->mu);
    return e.pk;
}

/* Kernel ids of select_kernel / be_call.kernel. */
enum { CPU_KERNEL_ANY = 0, CPU_KERNEL_REF = 1, CPU_KERNEL_FAST = 2 };

/* The tier that runs a quantised matmul of ncols columns on tiles (cpu_mm_pick), as plan names it:
 * the AMX tier's shapes without tile products say that they run its AVX-512 kernels. */
static const char *mm_tier_text(const cpu_backend *cb, uint32_t wt, int64_t ncols) {
    cpu_isa_level level = cpu_mm_pick(cb, wt, ncols)->level;
    if (level == CPU_ISA_AMX && !cpu_amx_tile_products(wt, ncols)) return "amx (avx512 kernels)";
    return cpu_isa_name(level);
}

static int32_t cpu_select_kernel(const backend *be, const g_node *nd, const be_view *out, const be_view *in, char *text,
                                 size_t cap) {
    const cpu_backend *cb = (const cpu_backend *)be;
    const char *op = g_op_name(nd->op);
    if (!cb->use_fast || !cpu_fast_lookup(nd, out, in)) {
        snprintf(text, cap, "ref %s", op);
        return CPU_KERNEL_REF;
    }
    const char *isa = cpu_isa_name(cb->isa->level);
    uint32_t wt = in[0].dtype;
    if (nd->op == G_OP_MATMUL && cpu_mm_is_quant(wt)) {
        bool tiles = cb->repack && cb->isa->repack_tiles && cb->isa->tile_block_bytes && cb->isa->tile_block_bytes(wt);
        /* on tiles, the tier picked for the function's columns (its largest call) */
        if (tiles) isa = mm_tier_text(cb, wt, in[1].ne[1] * in[1].ne[2] * in[1].ne[3]);
        snprintf(text, cap, "%s %s x 8-bit activations%s", isa, slm_dtype_name((slm_dtype)wt),
                 tiles ? ", 16-row tiles" : "");
    } else if (nd->op == G_OP_MATMUL || nd->op == G_OP_EMBED) {
        snprintf(text, cap, "%s %s %s", isa, op, slm_dtype_name((slm_dtype)wt));
    } else {
        snprintf(text, cap, "%s %s", isa, op);
    }
    return CPU_KERNEL_FAST;
}

static bool cpu_takes_matmul_group(const backend *be, int32_t n, const be_view *out, const be_view *in, char *text,
                                   size_t cap) {
    const cpu_backend *cb = (const cpu_backend *)be;
    if (!cb->use_fast || !cpu_matmul_group_takes(n, out, in)) return false;
    uint32_t wt = in[0].dtype;
    bool tiles = cb->repack && cb->isa->repack_tiles && cb->isa->tile_block_bytes && cb->isa->tile_block_bytes(wt);
    const char *isa = tiles ? mm_tier_text(cb, wt, in[1].ne[1] * in[1].ne[2] * in[1].ne[3]) : cpu_isa_name(cb->isa->level);
    snprintf(text, cap, "%s %d x %s, activations quantised once%s", isa, n,
             slm_dtype_name((slm_dtype)wt), tiles ? ", 16-row tiles" : "");
    return true;
}

static bool cpu_takes_conv_step(const backend *be, const be_view *out, const be_view *in, bool silu, char *text,
                                size_t cap) {
    const cpu_backend *cb = (const cpu_backend *)be;
    if (!cb->use_fast || !cpu_conv_step_takes(out, in)) return false;
    snprintf(text, cap, "%s conv step%s", cpu_isa_name(cb->isa->level), silu ? " + SILU" : "");
    return true;
}

static slm_status cpu_exec(backend *be, const g_node *nd, const be_view *out, const be_view *in, const be_call *call,
                           slm_err *e) {
    cpu_backend *cb = (cpu_backend *)be;
    if (call->kernel != CPU_KERNEL_REF && cb->use_fast) {
        const cpu_fast_kernel *k = cpu_fast_lookup(nd, out, in);
        if (k) return k->run(cb, nd, out, in, call, e);
    }
    if (call->kernel == CPU_KERNEL_FAST)
        return err_set(e, SLM_ERR_BACKEND, "cpu: the planned %s kernel does not take these operands",
                       g_op_name(nd->op));
    cpu_kernel_fn fn = cpu_ref_kernels[nd->op];
    if (!fn) return err_set(e, SLM_ERR_UNSUPPORTED, "cpu: no kernel for %s", g_op_name(nd->op));
    return fn(cb, nd, out, in, call, e);
}

static slm_status cpu_exec_matmul_group(backend *be, int32_t n, const be_view *out, const be_view *in, slm_err *e) {
    cpu_backend *cb = (cpu_backend *)be;
    if (!cb->use_fast) return SLM_ERR_UNSUPPORTED;
    return cpu_matmul_group(cb, n, out, in, e);
}

static slm_status cpu_exec_conv_step(backend *be, const be_view *out, const be_view *in, bool silu, slm_err *e) {
    cpu_backend *cb = (cpu_backend *)be;
    if (!cb->use_fast) return SLM_ERR_UNSUPPORTED;
    return cpu_conv_step(cb, out, in, silu, e);
}

static void cpu_destroy(backend *be) {
    cpu_backend *cb = (cpu_backend *)be;
    if (!cb) return;
    slm_allocator a = cb->alloc;
    pool_destroy(cb->pool);
    for (int32_t t = 0; cb->scratch && t < cb->n_threads; t++) al_free_aligned(&a, cb->scratch[t]);
    al_free_aligned(&a, cb->work);
    weight_cache_destroy(cb->own_wc);
    al_free(&a, cb->scratch);
    al_free(&a, cb);
}

const char *cpu_backend_kernels(const backend *be) {
    const cpu_backend *cb = (const cpu_backend *)be;
    return cb->use_fast ? cpu_isa_name(cb->isa->level) : "ref";
}


slm_status cpu_backend_create_with(const slm_allocator *a, int32_t n_threads, bool use_fast, cpu_isa_level isa,
                                   backend **out, slm_err *e) {
    *out = NULL;
    if (n_threads < 1) n_threads = 1;
    cpu_backend *cb = al_calloc(a, 1, sizeof *cb);
    if (!cb) return err_set(e, SLM_ERR_NOMEM, "out of memory");
    cb->base.vt = &backend_vtable_cpu;
    cb->alloc = *a;
    cb->n_threads = n_threads;
    cb->use_fast = use_fast;
    cb->repack = true;
    const char *missing = use_fast ? cpu_isa_missing(isa) : NULL;
    if (missing) {
        al_free(a, cb);
        return err_set(e, SLM_ERR_UNSUPPORTED, "cpu: the %s kernels cannot run here: %s%s", cpu_isa_name(isa),
                       strcmp(missing, "not built in") ? "this CPU lacks " : "", missing);
    }
    cb->isa = cpu_isa_get(isa);
    cpu_mm_picks_fill(cb->isa, false, cb->mm_pick);
    cb->scratch = al_calloc(a, (size_t)n_threads, sizeof(uint8_t *));
    if (!cb->scratch) {
        al_free(a, cb);
        return err_set(e, SLM_ERR_NOMEM, "out of memory");
    }
    slm_status st = pool_create(a, n_threads, &cb->pool, e);
    if (!st) st = weight_cache_create(a, &cb->own_wc, e);
    if (st) {
        cpu_destroy(&cb->base);
        return st;
    }
    cb->wc = cb->own_wc;
    *out = &cb->base;
    return SLM_OK;
}

/* kernels: "ref" | "generic" | "neon" | "i8mm" | "avx2" | "avxvnni" | "avx512" | "amx" | "auto" (NULL and "" mean
 * "auto": the best level this CPU has). A named level the build or the CPU lacks is refused (never
 * run, never replaced by another); so is a value not in that list. */
slm_status cpu_backend_create(const slm_allocator *a, int32_t n_threads, const char *kernels, backend **out,
                              slm_err *e) {
    bool use_fast = true;
    cpu_isa_level isa = cpu_isa_detect();
    if (kernels) {
        if (!strcmp(kernels, "ref")) use_fast = false;
        else if (!strcmp(kernels, "generic")) isa = CPU_ISA_GENERIC;
        else if (!strcmp(kernels, "neon")) isa = CPU_ISA_NEON;
        else if (!strcmp(kernels, "i8mm")) isa = CPU_ISA_I8MM;
        else if (!strcmp(kernels, "avx2")) isa = CPU_ISA_AVX2;
        else if (!strcmp(kernels, "avxvnni")) isa = CPU_ISA_AVX2_VNNI;
        else if (!strcmp(kernels, "avx512")) isa = CPU_ISA_AVX512;
        else if (!strcmp(kernels, "amx")) isa = CPU_ISA_AMX;
        else if (*kernels && strcmp(kernels, "auto")) {
            *out = NULL;
            return err_set(e, SLM_ERR_INVALID_ARG,
                           "kernels=%s is not a kernel tier: ref, generic, neon, i8mm, avx2, avxvnni, avx512, amx or auto",
                           kernels);
        }
    }
    const char *missing = use_fast ? cpu_isa_missing(isa) : NULL;
    if (missing) {
        *out = NULL;
        return err_set(e, SLM_ERR_UNSUPPORTED, "kernels=%s: the %s kernels cannot run here: %s%s",
                       kernels ? kernels : "", cpu_isa_name(isa), strcmp(missing, "not built in") ? "this CPU lacks " : "",
                       missing);
    }
    slm_status st = cpu_backend_create_with(a, n_threads, use_fast, isa, out, e);
    if (st == SLM_OK && (!kernels || !*kernels || !strcmp(kernels, "auto"))) { /* the faster tier per shape */
        cpu_backend *cb = (cpu_backend *)*out;
        cpu_mm_picks_fill(cb->isa, true, cb->mm_pick);
    }
    return st;
}

static void cpu_run_tasks(backend *be, int64_t n_tasks, void (*fn)(void *ctx, int64_t task, int32_t thread), void *ctx) {
    pool_run(((cpu_backend *)be)->pool, n_tasks, fn, ctx);
}

static slm_status cpu_create_serial(backend *be, const slm_allocator *a, backend **out, slm_err *e) {
    const cpu_backend *cb = (const cpu_backend *)be;
    slm_status st = cpu_backend_create_with(a, 1, cb->use_fast, cb->isa->level, out, e);
    if (st) return st;
    cpu_backend *serial = (cpu_backend *)*out;
    serial->repack = cb->repack;
    serial->wc = cb->wc;
    memcpy(serial->mm_pick, cb->mm_pick, sizeof serial->mm_pick);
    return SLM_OK;
}

/* ---- the vtable ------------------------------------------------------------------------------- */

static slm_status cpu_create(const slm_allocator *a, const backend_params *p, backend **out, slm_err *e) {
    slm_status st = cpu_backend_create(a, p->n_threads, p->kernels, out, e);
    if (st == SLM_OK && p->no_repack) cpu_backend_set_repack(*out, false);
    return st;
}

static slm_status cpu_cache_create(const slm_allocator *a, be_model_cache **out, slm_err *e) {
    cpu_weight_cache *c = NULL;
    slm_status st = weight_cache_create(a, &c, e);
    *out = c ? &c->base : NULL;
    return st;
}

static void cpu_cache_destroy(be_model_cache *c) { weight_cache_destroy((cpu_weight_cache *)c); }

static void cpu_use_cache(backend *be, be_model_cache *c) { ((cpu_backend *)be)->wc = (cpu_weight_cache *)c; }

const backend_vtable backend_vtable_cpu = {
    .name = "cpu",
    .create = cpu_create,
    .scratch_bytes = cpu_scratch_need,
    .exec = cpu_exec,
    .exec_matmul_group = cpu_exec_matmul_group,
    .exec_conv_step = cpu_exec_conv_step,
    .select_kernel = cpu_select_kernel,
    .takes_matmul_group = cpu_takes_matmul_group,
    .takes_conv_step = cpu_takes_conv_step,
    .run_tasks = cpu_run_tasks,
    .create_serial = cpu_create_serial,
    .reserve_scratch = cpu_reserve,
    .kernels = cpu_backend_kernels,
    .cache_create = cpu_cache_create,
    .cache_destroy = cpu_cache_destroy,
    .cache_set_file_map = weight_cache_set_file_map,
    .use_cache = cpu_use_cache,
    .destroy = cpu_destroy,
};
