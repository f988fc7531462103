/* safetensors.c — validated tensor directory of safetensors files (single file or sharded folder).
 * Owns: the st_set (tensor records sorted by name, shard maps and paths). Checks the 8-byte header
 * length, the JSON header (through hf_json_parse_at: UTF-8, syntax, duplicate keys), each entry's
 * dtype / shape / data_offsets, overlaps, and the sharded index (plain shard names, each tensor in
 * its named shard, no name in two shards). Does not convert dtypes, interpret names or check shapes
 * against an architecture (model/ does).
 * Reference: huggingface/safetensors README "Format"; dtype strings as written by safetensors 0.8. */
#include "format/safetensors.h"

#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "base/reader.h"
#include "format/hfconfig.h"

#define ST_MAX_DIMS 4
#define ST_NAME_FMT "%.200s" /* names in messages are cut so the message stays readable */

typedef struct dtype_info {
    const char *name; /* safetensors dtype string */
    uint32_t type;    /* slm_dtype id */
    uint32_t size;    /* bytes per element */
} dtype_info;

static const dtype_info k_dtypes[] = {
    {"F32", SLM_DTYPE_F32, 4}, {"F16", SLM_DTYPE_F16, 2}, {"BF16", SLM_DTYPE_BF16, 2}, {"F64", SLM_DTYPE_F64, 8},
    {"I8", SLM_DTYPE_I8, 1},   {"I16", SLM_DTYPE_I16, 2}, {"I32", SLM_DTYPE_I32, 4},   {"I64", SLM_DTYPE_I64, 8},
};

/* Safetensors dtypes that are valid in the format but that statelm does not read (besides F8_*). */
static const char *const k_refused[] = {"BOOL", "U8", "U16", "U32", "U64", "F4", "F6_E2M3", "F6_E3M2", "C64"};

bool st_dtype_known(uint32_t type) {
    for (size_t i = 0; i < sizeof k_dtypes / sizeof k_dtypes[0]; i++)
        if (k_dtypes[i].type == type) return true;
    return false;
}

static const char *image_name(const st_set *s, uint32_t shard) {
    if (s->shard_paths && shard < s->n_shards && s->shard_paths[shard]) return s->shard_paths[shard];
    return "safetensors image";
}

/* A non-negative integer below 2^53 (above it cJSON's double may already have rounded the text). */
static bool json_u53(const cJSON *v, uint64_t *out) {
    if (!cJSON_IsNumber(v)) return false;
    double d = v->valuedouble;
    if (!(d >= 0 && d < 0x1p53)) return false;
    uint64_t u = (uint64_t)d;
    if ((double)u != d) return false;
    *out = u;
    return true;
}

/* Short description of a JSON value for messages: the number itself, else its type. */
static const char *describe(const cJSON *v, char *buf, size_t cap) {
    if (cJSON_IsNumber(v)) {
        snprintf(buf, cap, "%.17g", v->valuedouble);
        return buf;
    }
    snprintf(buf, cap, "a%s %s", (cJSON_IsArray(v) || cJSON_IsObject(v)) ? "n" : "", hf_json_type_name(v));
    return buf;
}

/* Where one image's data section lies, for bounds and messages. */
typedef struct img_ctx {
    const char *what;        /* image name */
    const uint8_t *data_sec; /* (data_size) bytes after the header */
    uint64_t data_size;
    uint64_t data_base;      /* file offset of data_sec[0] = 8 + header length */
} img_ctx;

/* Byte range of one tensor inside the data section, for the overlap check. */
typedef struct span {
    uint64_t begin, end;
    uint64_t idx; /* into the image's new tensors */
} span;

static int cmp_span(const void *a, const void *b) {
    const span *x = a, *y = b;
    if (x->begin != y->begin) return x->begin < y->begin ? -1 : 1;
    if (x->end != y->end) return x->end < y->end ? -1 : 1;
    return 0;
}

static int cmp_tensor(const void *a, const void *b) {
    return strcmp(((const st_tensor *)a)->name, ((const st_tensor *)b)->name);
}

static void shape_str(const uint64_t *dims, uint32_t n, char *buf, size_t cap) {
    size_t off = 0;
    off += (size_t)snprintf(buf, cap, "[");
    for (uint32_t i = 0; i < n && off < cap; i++)
        off += (size_t)snprintf(buf + off, cap - off, "%s%llu", i ? ", " : "", (unsigned long long)dims[i]);
    if (off < cap) snprintf(buf + off, cap - off, "]");
}

/* Validates entry `ent` (key = tensor name) and fills t (except name and shard) and *sp. */
static slm_status parse_entry(const img_ctx *x, const cJSON *ent, st_tensor *t, span *sp, slm_err *e) {
    const char *name = ent->string ? ent->string : "";
    char vb[64];
    if (!cJSON_IsObject(ent))
        return err_set(e, SLM_ERR_FORMAT, "%s: tensor \"" ST_NAME_FMT "\": entry is %s, expected an object", x->what,
                       name, describe(ent, vb, sizeof vb));

    /* dtype */
    const cJSON *dt = cJSON_GetObjectItemCaseSensitive(ent, "dtype");
    if (!dt)
        return err_set(e, SLM_ERR_FORMAT, "%s: tensor \"" ST_NAME_FMT "\": missing \"dtype\"", x->what, name);
    if (!cJSON_IsString(dt) || !dt->valuestring)
        return err_set(e, SLM_ERR_FORMAT, "%s: tensor \"" ST_NAME_FMT "\": \"dtype\" is %s, expected a string",
                       x->what, name, describe(dt, vb, sizeof vb));
    const dtype_info *di = NULL;
    for (size_t i = 0; i < sizeof k_dtypes / sizeof k_dtypes[0]; i++)
        if (strcmp(dt->valuestring, k_dtypes[i].name) == 0) di = &k_dtypes[i];
    if (!di) {
        bool refused = strncmp(dt->valuestring, "F8_", 3) == 0;
        for (size_t i = 0; i < sizeof k_refused / sizeof k_refused[0]; i++)
            if (strcmp(dt->valuestring, k_refused[i]) == 0) refused = true;
        if (refused)
            return err_set(e, SLM_ERR_UNSUPPORTED, "%s: tensor \"" ST_NAME_FMT "\": dtype \"%.40s\" is not supported",
                           x->what, name, dt->valuestring);
        return err_set(e, SLM_ERR_FORMAT, "%s: tensor \"" ST_NAME_FMT "\": unknown dtype \"%.40s\"", x->what, name,
                       dt->valuestring);
    }

    /* shape */
    const cJSON *sh = cJSON_GetObjectItemCaseSensitive(ent, "shape");
    if (!sh)
        return err_set(e, SLM_ERR_FORMAT, "%s: tensor \"" ST_NAME_FMT "\": missing \"shape\"", x->what, name);
    if (!cJSON_IsArray(sh))
        return err_set(e, SLM_ERR_FORMAT, "%s: tensor \"" ST_NAME_FMT "\": \"shape\" is %s, expected an array",
                       x->what, name, describe(sh, vb, sizeof vb));
    uint64_t dims[ST_MAX_DIMS] = {0};
    uint32_t n_dims = 0;
    for (const cJSON *d = sh->child; d; d = d->next) {
        if (n_dims == ST_MAX_DIMS) {
            uint64_t n = n_dims;
            for (; d; d = d->next) n++;
            return err_set(e, SLM_ERR_UNSUPPORTED, "%s: tensor \"" ST_NAME_FMT "\": \"shape\" has %llu dims, at most %d supported",
                           x->what, name, (unsigned long long)n, ST_MAX_DIMS);
        }
        if (!json_u53(d, &dims[n_dims]))
            return err_set(e, SLM_ERR_FORMAT,
                           "%s: tensor \"" ST_NAME_FMT "\": \"shape\"[%u] is %s, expected a non-negative integer below 2^53",
                           x->what, name, n_dims, describe(d, vb, sizeof vb));
        n_dims++;
    }
    char shs[128];
    shape_str(dims, n_dims, shs, sizeof shs);
    uint64_t n_elem = 1, n_bytes = 0;
    bool has_zero = false;
    for (uint32_t i = 0; i < n_dims; i++) has_zero |= dims[i] == 0;
    if (has_zero) n_elem = 0;
    for (uint32_t i = 0; i < n_dims && !has_zero; i++)
        if (!u64_mul_ok(n_elem, dims[i], &n_elem))
            return err_set(e, SLM_ERR_FORMAT, "%s: tensor \"" ST_NAME_FMT "\": element count of shape %s overflows 64 bits",
                           x->what, name, shs);
    if (!u64_mul_ok(n_elem, di->size, &n_bytes))
        return err_set(e, SLM_ERR_FORMAT, "%s: tensor \"" ST_NAME_FMT "\": byte size of %s shape %s overflows 64 bits",
                       x->what, name, di->name, shs);

    /* data_offsets */
    const cJSON *of = cJSON_GetObjectItemCaseSensitive(ent, "data_offsets");
    if (!of)
        return err_set(e, SLM_ERR_FORMAT, "%s: tensor \"" ST_NAME_FMT "\": missing \"data_offsets\"", x->what, name);
    if (!cJSON_IsArray(of))
        return err_set(e, SLM_ERR_FORMAT, "%s: tensor \"" ST_NAME_FMT "\": \"data_offsets\" is %s, expected an array",
                       x->what, name, describe(of, vb, sizeof vb));
    uint64_t n_of = 0, off[2] = {0, 0};
    for (const cJSON *d = of->child; d; d = d->next) {
        if (n_of < 2 && !json_u53(d, &off[n_of]))
            return err_set(e, SLM_ERR_FORMAT,
                           "%s: tensor \"" ST_NAME_FMT "\": \"data_offsets\"[%llu] is %s, expected a non-negative integer below 2^53",
                           x->what, name, (unsigned long long)n_of, describe(d, vb, sizeof vb));
        n_of++;
    }
    if (n_of != 2)
        return err_set(e, SLM_ERR_FORMAT, "%s: tensor \"" ST_NAME_FMT "\": \"data_offsets\" has %llu entries, expected 2",
                       x->what, name, (unsigned long long)n_of);
    uint64_t begin = off[0], end = off[1];
    if (begin > end)
        return err_set(e, SLM_ERR_FORMAT, "%s: tensor \"" ST_NAME_FMT "\": data_offsets [%llu, %llu] are reversed",
                       x->what, name, (unsigned long long)begin, (unsigned long long)end);
    if (end > x->data_size)
        return err_set(e, SLM_ERR_FORMAT,
                       "%s: tensor \"" ST_NAME_FMT "\": data_offsets [%llu, %llu] end past the data section "
                       "(%llu bytes at byte offset %llu): the tensor would end at byte offset %llu",
                       x->what, name, (unsigned long long)begin, (unsigned long long)end,
                       (unsigned long long)x->data_size, (unsigned long long)x->data_base,
                       (unsigned long long)(x->data_base + end));
    if (end - begin != n_bytes)
        return err_set(e, SLM_ERR_FORMAT,
                       "%s: tensor \"" ST_NAME_FMT "\": data_offsets [%llu, %llu] hold %llu bytes (at byte offset %llu) "
                       "but %s shape %s needs %llu",
                       x->what, name, (unsigned long long)begin, (unsigned long long)end,
                       (unsigned long long)(end - begin), (unsigned long long)(x->data_base + begin), di->name, shs,
                       (unsigned long long)n_bytes);

    t->type = di->type;
    t->n_dims = n_dims;
    for (int i = 0; i < 4; i++) t->ne[i] = 1;
    for (uint32_t i = 0; i < n_dims; i++) t->ne[i] = (int64_t)dims[n_dims - 1 - i];
    t->size_bytes = n_bytes;
    t->data = x->data_sec + begin;
    sp->begin = begin;
    sp->end = end;
    return SLM_OK;
}

/* "__metadata__": null or an object whose values are all strings. */
static slm_status check_metadata(const char *what, const cJSON *m, slm_err *e) {
    char vb[64];
    if (cJSON_IsNull(m)) return SLM_OK;
    if (!cJSON_IsObject(m))
        return err_set(e, SLM_ERR_FORMAT, "%s: \"__metadata__\" is %s, expected an object of strings", what,
                       describe(m, vb, sizeof vb));
    for (const cJSON *c = m->child; c; c = c->next)
        if (!cJSON_IsString(c))
            return err_set(e, SLM_ERR_FORMAT, "%s: \"__metadata__\" key \"" ST_NAME_FMT "\" is %s, expected a string",
                           what, c->string ? c->string : "", describe(c, vb, sizeof vb));
    return SLM_OK;
}

slm_status st_parse_image(st_set *s, const void *data, size_t size, uint32_t shard, slm_err *e) {
    if (!s || (!data && size)) return err_set(e, SLM_ERR_INVALID_ARG, "st_parse_image: NULL set or data");
    const char *what = image_name(s, shard);
    if (size < 8)
        return err_set(e, SLM_ERR_FORMAT,
                       "%s: file is %zu bytes, too short for the 8-byte header length at byte offset 0", what, size);
    rd r;
    rd_init(&r, data, size, e);
    uint64_t hlen = 0;
    slm_status st = rd_u64(&r, "header length", &hlen);
    if (st != SLM_OK) return st;
    if (hlen > ST_MAX_HEADER_BYTES)
        return err_set(e, SLM_ERR_FORMAT, "%s: header length %llu at byte offset 0 is over the limit of %u bytes", what,
                       (unsigned long long)hlen, ST_MAX_HEADER_BYTES);
    if (hlen > rd_left(&r))
        return err_set(e, SLM_ERR_FORMAT,
                       "%s: header length %llu at byte offset 0 runs past the end of the file (%zu bytes after byte offset 8)",
                       what, (unsigned long long)hlen, rd_left(&r));
    const uint8_t *hdr = NULL;
    st = rd_bytes(&r, "JSON header", (size_t)hlen, &hdr);
    if (st != SLM_OK) return st;
    img_ctx x = {what, hdr + hlen, rd_left(&r), 8 + hlen};

    cJSON *root = NULL;
    st_tensor *nt = NULL, *merged = NULL;
    span *sp = NULL;
    uint64_t n_new = 0;
    char hwhat[600];
    snprintf(hwhat, sizeof hwhat, "%.500s header", what);
    st = hf_json_parse_at((const char *)hdr, (size_t)hlen, hwhat, 8, ST_MAX_HEADER_BYTES, &root, e);
    if (st != SLM_OK) goto fail;
    if (!cJSON_IsObject(root)) {
        char vb[64];
        st = err_set(e, SLM_ERR_FORMAT, "%s: header (byte offset 8) is %s, expected a JSON object", what,
                     describe(root, vb, sizeof vb));
        goto fail;
    }
    uint64_t count = 0;
    for (const cJSON *c = root->child; c; c = c->next)
        if (!c->string || strcmp(c->string, "__metadata__") != 0) count++;
    if (count > ST_MAX_TENSORS - s->n_tensors) {
        st = err_set(e, SLM_ERR_FORMAT, "%s: %llu tensors, over the limit of %u in one set", what,
                     (unsigned long long)(count + s->n_tensors), ST_MAX_TENSORS);
        goto fail;
    }
    nt = al_calloc(&s->alloc, (size_t)count, sizeof *nt);
    sp = al_calloc(&s->alloc, (size_t)count, sizeof *sp);
    if (!nt || !sp) {
        st = err_set(e, SLM_ERR_NOMEM, "%s: out of memory for %llu tensor records", what, (unsigned long long)count);
        goto fail;
    }
    for (const cJSON *c = root->child; c; c = c->next) {
        const char *key = c->string ? c->string : "";
        if (strcmp(key, "__metadata__") == 0) {
            st = check_metadata(what, c, e);
            if (st != SLM_OK) goto fail;
            continue;
        }
        st_tensor *t = &nt[n_new];
        t->name = al_strdup(&s->alloc, key);
        if (!t->name) {
            st = err_set(e, SLM_ERR_NOMEM, "%s: out of memory for tensor names", what);
            goto fail;
        }
        n_new++;
        t->shard = shard;
        st = parse_entry(&x, c, t, &sp[n_new - 1], e);
        if (st != SLM_OK) goto fail;
        sp[n_new - 1].idx = n_new - 1;
    }

    /* Overlaps: empty tensors occupy no bytes; sorted by begin, a neighbour check suffices. */
    uint64_t n_sp = 0;
    for (uint64_t i = 0; i < n_new; i++)
        if (sp[i].end > sp[i].begin) sp[n_sp++] = sp[i];
    qsort(sp, (size_t)n_sp, sizeof *sp, cmp_span);
    for (uint64_t i = 1; i < n_sp; i++) {
        const span *p = &sp[i - 1], *q = &sp[i];
        if (q->begin >= p->end) continue;
        st = err_set(e, SLM_ERR_FORMAT,
                     "%s: tensors \"" ST_NAME_FMT "\" (data_offsets [%llu, %llu]) and \"" ST_NAME_FMT
                     "\" (data_offsets [%llu, %llu]) overlap at byte offset %llu",
                     what, nt[p->idx].name, (unsigned long long)p->begin, (unsigned long long)p->end, nt[q->idx].name,
                     (unsigned long long)q->begin, (unsigned long long)q->end,
                     (unsigned long long)(x.data_base + q->begin));
        goto fail;
    }

    /* Merge into s, sorted by name; a name already present (another shard) is refused. */
    uint64_t total = s->n_tensors + n_new;
    merged = al_array(&s->alloc, (size_t)total, sizeof *merged);
    if (!merged) {
        st = err_set(e, SLM_ERR_NOMEM, "%s: out of memory for %llu tensor records", what, (unsigned long long)total);
        goto fail;
    }
    if (s->n_tensors) memcpy(merged, s->tensors, (size_t)s->n_tensors * sizeof *merged);
    if (n_new) memcpy(merged + s->n_tensors, nt, (size_t)n_new * sizeof *merged);
    qsort(merged, (size_t)total, sizeof *merged, cmp_tensor);
    for (uint64_t i = 1; i < total; i++) {
        if (strcmp(merged[i - 1].name, merged[i].name) != 0) continue;
        st = err_set(e, SLM_ERR_FORMAT, "tensor \"" ST_NAME_FMT "\" appears twice: in %s and in %s", merged[i].name,
                     image_name(s, merged[i - 1].shard), image_name(s, merged[i].shard));
        goto fail;
    }
    al_free(&s->alloc, s->tensors);
    s->tensors = merged;
    s->n_tensors = total;
    al_free(&s->alloc, nt);
    al_free(&s->alloc, sp);
    cJSON_Delete(root);
    return SLM_OK;

fail:
    al_free(&s->alloc, merged);
    for (uint64_t i = 0; i < n_new; i++) al_free(&s->alloc, nt[i].name);
    al_free(&s->alloc, nt);
    al_free(&s->alloc, sp);
    cJSON_Delete(root);
    return st;
}

const st_tensor *st_find(const st_set *s, const char *name) {
    if (!s || !name || !s->tensors) return NULL;
    uint64_t lo = 0, hi = s->n_tensors;
    while (lo < hi) {
        uint64_t mid = lo + (hi - lo) / 2;
        int c = strcmp(s->tensors[mid].name, name);
        if (c == 0) return &s->tensors[mid];
        if (c < 0) lo = mid + 1;
        else hi = mid;
    }
    return NULL;
}

void st_close(st_set *s) {
    if (!s) return;
    slm_allocator a = s->alloc;
    for (uint64_t i = 0; i < s->n_tensors && s->tensors; i++) al_free(&a, s->tensors[i].name);
    al_free(&a, s->tensors);
    for (uint32_t i = 0; i < s->n_shards; i++) {
        if (s->maps) fmap_close(&s->maps[i]);
        if (s->shard_paths) al_free(&a, s->shard_paths[i]);
    }
    al_free(&a, s->maps);
    al_free(&a, s->shard_paths);
    memset(s, 0, sizeof *s);
}

/* ---- folders ---- */

static char *path_join(const slm_allocator *a, const char *dir, const char *name) {
    size_t dl = strlen(dir), nl = strlen(name), total;
    if (!size_add_ok(dl, nl, &total) || !size_add_ok(total, 2, &total)) return NULL;
    char *p = al_malloc(a, total);
    if (!p) return NULL;
    memcpy(p, dir, dl);
    p[dl] = '/';
    memcpy(p + dl + 1, name, nl);
    p[dl + 1 + nl] = '\0';
    return p;
}

static bool plain_name(const char *n) {
    return n[0] != '\0' && !strchr(n, '/') && strcmp(n, ".") != 0 && strcmp(n, "..") != 0;
}

static int cmp_cstr(const void *a, const void *b) { return strcmp(*(const char *const *)a, *(const char *const *)b); }

/* Maps and parses dir/names[i] as shard i, for the n sorted, distinct names. */
static slm_status open_shards(st_set *s, const char *dir, const char *const *names, uint32_t n, slm_err *e) {
    s->maps = al_calloc(&s->alloc, n, sizeof *s->maps);
    s->shard_paths = al_calloc(&s->alloc, n, sizeof *s->shard_paths);
    if (!s->maps || !s->shard_paths) return err_set(e, SLM_ERR_NOMEM, "%s: out of memory for %u shards", dir, n);
    s->n_shards = n;
    for (uint32_t i = 0; i < n; i++) {
        s->shard_paths[i] = path_join(&s->alloc, dir, names[i]);
        if (!s->shard_paths[i]) return err_set(e, SLM_ERR_NOMEM, "%s: out of memory for shard paths", dir);
        slm_status st = fmap_open(&s->maps[i], s->shard_paths[i], e);
        if (st != SLM_OK) return st;
        st = st_parse_image(s, s->maps[i].data, s->maps[i].size, i, e);
        if (st != SLM_OK) return st;
    }
    return SLM_OK;
}

/* The sharded case: dir/model.safetensors.index.json already read into text. */
static slm_status open_index(st_set *s, const char *dir, const char *ipath, const char *text, size_t len, slm_err *e) {
    cJSON *root = NULL;
    const char **names = NULL;
    char vb[64];
    slm_status st = hf_json_parse(text, len, ipath, &root, e);
    if (st != SLM_OK) goto done;
    if (!cJSON_IsObject(root)) {
        st = err_set(e, SLM_ERR_FORMAT, "%s: top-level JSON value is %s, expected an object", ipath,
                     describe(root, vb, sizeof vb));
        goto done;
    }
    const cJSON *wm = NULL;
    st = hf_get_object(root, "weight_map", &wm, e);
    if (st == SLM_ERR_NOT_FOUND) st = err_set(e, SLM_ERR_FORMAT, "%s: missing \"weight_map\"", ipath);
    else if (st != SLM_OK) err_prefix(e, "%s: ", ipath);
    if (st != SLM_OK) goto done;
    uint64_t n_map = 0;
    for (const cJSON *c = wm->child; c; c = c->next) {
        if (!cJSON_IsString(c) || !c->valuestring) {
            st = err_set(e, SLM_ERR_FORMAT, "%s: weight_map[\"" ST_NAME_FMT "\"] is %s, expected a shard file name",
                         ipath, c->string ? c->string : "", describe(c, vb, sizeof vb));
            goto done;
        }
        if (!plain_name(c->valuestring)) {
            st = err_set(e, SLM_ERR_FORMAT,
                         "%s: weight_map[\"" ST_NAME_FMT "\"] names shard \"" ST_NAME_FMT
                         "\", which is not a plain file name inside the folder",
                         ipath, c->string ? c->string : "", c->valuestring);
            goto done;
        }
        n_map++;
    }
    if (n_map == 0) {
        st = err_set(e, SLM_ERR_FORMAT, "%s: \"weight_map\" is empty", ipath);
        goto done;
    }
    if (n_map > ST_MAX_TENSORS) {
        st = err_set(e, SLM_ERR_FORMAT, "%s: weight_map lists %llu tensors, over the limit of %u", ipath,
                     (unsigned long long)n_map, ST_MAX_TENSORS);
        goto done;
    }
    names = al_array(&s->alloc, (size_t)n_map, sizeof *names);
    if (!names) {
        st = err_set(e, SLM_ERR_NOMEM, "%s: out of memory", ipath);
        goto done;
    }
    size_t n_names = 0;
    for (const cJSON *c = wm->child; c; c = c->next) names[n_names++] = c->valuestring;
    qsort(names, n_names, sizeof *names, cmp_cstr);
    size_t n_uniq = 0;
    for (size_t i = 0; i < n_names; i++)
        if (n_uniq == 0 || strcmp(names[n_uniq - 1], names[i]) != 0) names[n_uniq++] = names[i];
    if (n_uniq > ST_MAX_SHARDS) {
        st = err_set(e, SLM_ERR_FORMAT, "%s: %zu shards, over the limit of %u", ipath, n_uniq, ST_MAX_SHARDS);
        goto done;
    }
    st = open_shards(s, dir, names, (uint32_t)n_uniq, e);
    if (st != SLM_OK) {
        err_prefix(e, "%s: ", ipath);
        goto done;
    }
    for (const cJSON *c = wm->child; c; c = c->next) {
        const char **hit = bsearch(&c->valuestring, names, n_uniq, sizeof *names, cmp_cstr);
        uint32_t want = hit ? (uint32_t)(hit - names) : 0;
        const st_tensor *t = st_find(s, c->string ? c->string : "");
        if (!t || t->shard != want) {
            st = err_set(e, SLM_ERR_FORMAT, "%s: tensor \"" ST_NAME_FMT "\" is mapped to shard \"" ST_NAME_FMT
                         "\" but that shard has no such tensor%s%s",
                         ipath, c->string ? c->string : "", c->valuestring, t ? "; it is in " : "",
                         t ? image_name(s, t->shard) : "");
            goto done;
        }
    }
done:
    al_free(&s->alloc, names);
    cJSON_Delete(root);
    return st;
}

slm_status st_open_dir(st_set *s, const char *dir, const slm_allocator *a, slm_err *e) {
    if (!s) return err_set(e, SLM_ERR_INVALID_ARG, "st_open_dir: NULL set");
    memset(s, 0, sizeof *s);
    s->alloc = a ? *a : al_default;
    if (!dir) return err_set(e, SLM_ERR_INVALID_ARG, "st_open_dir: NULL folder");
    slm_status st = SLM_OK;
    char *single = path_join(&s->alloc, dir, "model.safetensors");
    char *ipath = path_join(&s->alloc, dir, "model.safetensors.index.json");
    char *text = NULL;
    if (!single || !ipath) {
        st = err_set(e, SLM_ERR_NOMEM, "%s: out of memory for paths", dir);
        goto done;
    }
    struct stat sb;
    if (stat(single, &sb) == 0) {
        static const char *const one[] = {"model.safetensors"};
        st = open_shards(s, dir, one, 1, e);
        goto done;
    }
    size_t len = 0;
    slm_err local;
    err_clear(&local);
    st = file_read_all(ipath, HF_MAX_JSON_BYTES, &text, &len, &local);
    if (st == SLM_ERR_NOT_FOUND) {
        st = err_set(e, SLM_ERR_NOT_FOUND, "%s: no model.safetensors or model.safetensors.index.json", dir);
        goto done;
    }
    if (st != SLM_OK) {
        err_set(e, st, "%s", local.msg);
        goto done;
    }
    st = open_index(s, dir, ipath, text, len, e);
done:
    free(text);
    al_free(&s->alloc, single);
    al_free(&s->alloc, ipath);
    if (st != SLM_OK) st_close(s);
    return st;
}
