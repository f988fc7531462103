/* safetensors.h — safetensors reader: single model.safetensors or a sharded set listed by
 * model.safetensors.index.json. Tensors are views into read-only memory maps (F32, F16, BF16; other
 * dtypes are listed but flagged unsupported for compute). The 8-byte header length, the JSON header
 * (parsed with cJSON), dtypes, shapes and data offsets are all validated: offsets must lie inside the
 * shard's data section, match dtype x shape, and not overlap. Errors name the field and the byte
 * offset (or the JSON key). Does not interpret architectures or rename tensors (model/ does). */
#ifndef SLM_FORMAT_SAFETENSORS_H
#define SLM_FORMAT_SAFETENSORS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/alloc.h"
#include "base/err.h"
#include "base/fmap.h"

#define ST_MAX_HEADER_BYTES (100u << 20) /* 100 MiB, as the safetensors format itself caps it */
#define ST_MAX_SHARDS 1024u
#define ST_MAX_TENSORS (1u << 20)

typedef struct st_tensor {
    char *name;           /* NUL-terminated copy of the safetensors key */
    uint32_t type;        /* slm_dtype id: F32, F16, BF16, I8/I16/I32/I64, F64; see st_dtype_known */
    uint32_t n_dims;      /* 0..4 as stored (0 = scalar) */
    int64_t ne[4];        /* ggml order (reverse of the safetensors shape); unused dims are 1 */
    uint64_t size_bytes;
    const uint8_t *data;  /* into the shard's map */
    uint32_t shard;       /* index into st_set.shard_paths */
} st_tensor;

typedef struct st_set {
    slm_allocator alloc;
    uint32_t n_shards;
    fmap *maps;           /* (n_shards) owned maps (zeroed when parsed from memory) */
    char **shard_paths;   /* (n_shards) */
    uint64_t n_tensors;
    st_tensor *tensors;
} st_set;

/* Parses one safetensors image held in memory as shard `shard` of s (appending its tensors).
 * data stays borrowed. s must have been zero-initialised or filled by earlier calls. */
slm_status st_parse_image(st_set *s, const void *data, size_t size, uint32_t shard, slm_err *e);
/* Opens dir/model.safetensors, or every shard named by dir/model.safetensors.index.json
 * (weight_map values), checking that every tensor the index names is found in its shard and that
 * no tensor name appears twice. */
slm_status st_open_dir(st_set *s, const char *dir, const slm_allocator *a, slm_err *e);
void st_close(st_set *s);
const st_tensor *st_find(const st_set *s, const char *name);

#endif
