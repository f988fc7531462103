/* test_graph.c — graph/ and compile/memplan: shape rules reject bad operands with the op named,
 * graph_verify catches a state read consumed after a later write, symbolic shapes bind per call,
 * and the memory plan never lets two live activations overlap. */
#include "testutil.h"

#include <string.h>

#include "compile/memplan.h"
#include "graph/graph.h"

static float dummy_weights[64 * 64];

static g_program *new_program(void) {
    g_program *p = NULL;
    assert_int_equal(graph_create(&al_default, &p), SLM_OK);
    return p;
}

static int32_t weight2(g_program *p, const char *name, int64_t ne0, int64_t ne1, int salt) {
    int64_t ne[4] = {ne0, ne1, 1, 1};
    slm_err e;
    err_clear(&e);
    /* distinct data pointers so weights are not deduplicated */
    return graph_add_weight(p, name, SLM_DTYPE_F32, 2, ne, dummy_weights + salt, (uint64_t)(ne0 * ne1 * 4), &e);
}

static void shape_errors_name_the_op(void **unused) {
    (void)unused;
    g_program *p = new_program();
    slm_err e;
    err_clear(&e);
    int32_t fn;
    assert_int_equal(graph_add_function(p, "prefill", true, 1, &fn, &e), SLM_OK);
    g_builder b;
    gb_init(&b, p, fn, &e);
    int32_t emb = weight2(p, "token_embd.weight", 16, 10, 0);
    int32_t wrong = weight2(p, "blk.0.attn_q.weight", 8, 16, 1); /* expects 8 inputs, gets 16 */
    int32_t x = gb_embed(&b, emb, gb_tokens(&b));
    assert_true(x >= 0);
    b.layer = 0;
    int32_t y = gb_matmul(&b, wrong, x);
    assert_int_equal(y, -1);
    assert_int_equal(b.status, SLM_ERR_SHAPE);
    assert_non_null(strstr(e.msg, "MATMUL"));
    assert_non_null(strstr(e.msg, "layer 0"));
    /* later calls are no-ops */
    assert_int_equal(gb_add(&b, x, x), -1);
    graph_destroy(p);
}

static void symbolic_shapes(void **unused) {
    (void)unused;
    g_program *p = new_program();
    slm_err e;
    err_clear(&e);
    int32_t fn;
    assert_int_equal(graph_add_function(p, "prefill", true, 1, &fn, &e), SLM_OK);
    int64_t sne[4] = {16, 2, 1, 1};
    int32_t st = graph_add_state(p, "conv", SLM_STATE_CONV, 0, SLM_DTYPE_F32, 2, sne, 1, &e);
    g_builder b;
    gb_init(&b, p, fn, &e);
    int32_t x = gb_embed(&b, weight2(p, "emb", 16, 10, 0), gb_tokens(&b)); /* (16, n) */
    int32_t xc = gb_concat(&b, gb_state_read(&b, st), x, 1);              /* (16, n + 2) */
    assert_true(xc >= 0);
    const g_tensor *t = &p->tensors[xc];
    assert_int_equal(g_ne(t, 1, 5), 7);
    assert_int_equal(g_ne(t, 0, 5), 16);
    int32_t tail = gb_slice(&b, xc, 1, gb_n(&b), g_const(2)); /* last 2 columns */
    assert_int_equal(g_ne(&p->tensors[tail], 1, 9), 2);
    int32_t last = gb_slice(&b, x, 1, g_n_plus(-1), g_const(1));
    assert_int_equal(g_ne(&p->tensors[last], 1, 9), 1);
    /* a reshape that would move the token axis inwards is refused */
    g_affine bad[4] = {gb_n(&b), g_const(16), g_const(1), g_const(1)};
    assert_int_equal(gb_reshape(&b, x, 2, bad), -1);
    assert_int_equal(b.status, SLM_ERR_SHAPE);
    graph_destroy(p);
}

static void verify_catches_stale_state_view(void **unused) {
    (void)unused;
    g_program *p = new_program();
    slm_err e;
    err_clear(&e);
    int32_t fn;
    assert_int_equal(graph_add_function(p, "decode", false, 1, &fn, &e), SLM_OK);
    int64_t sne[4] = {16, 1, 1, 1};
    int32_t st = graph_add_state(p, "s", SLM_STATE_RECURRENT, 0, SLM_DTYPE_F32, 2, sne, -1, &e);
    g_builder b;
    gb_init(&b, p, fn, &e);
    int32_t x = gb_embed(&b, weight2(p, "emb", 16, 10, 0), gb_tokens(&b)); /* (16, n) */
    x = gb_slice(&b, x, 1, g_n_plus(-1), g_const(1));                       /* (16, 1) */
    int32_t view = gb_state_read(&b, st);
    g_affine origin[4] = {g_const(0), g_const(0), g_const(0), g_const(0)};
    gb_state_write(&b, st, x, origin);
    int32_t y = gb_add(&b, x, view); /* consumes the view after the write: stale */
    assert_true(y >= 0);
    gb_set_logits(&b, y);
    assert_int_equal(b.status, SLM_OK);
    assert_int_equal(graph_verify(p, &e), SLM_ERR_SHAPE);
    assert_non_null(strstr(e.msg, "later write"));
    graph_destroy(p);
}

/* A chain with branches: the plan must keep every pair of simultaneously live tensors apart. */
static void memplan_no_overlap(void **unused) {
    (void)unused;
    g_program *p = new_program();
    slm_err e;
    err_clear(&e);
    int32_t fn;
    assert_int_equal(graph_add_function(p, "prefill", true, 1, &fn, &e), SLM_OK);
    g_builder b;
    gb_init(&b, p, fn, &e);
    int32_t w = weight2(p, "w", 16, 16, 0);
    int32_t x = gb_embed(&b, weight2(p, "emb", 16, 10, 1), gb_tokens(&b));
    int32_t acc = x;
    for (int i = 0; i < 6; i++) {
        int32_t a = gb_matmul(&b, w, acc);
        int32_t c = gb_unary(&b, G_OP_SILU, a);
        int32_t d = gb_mul(&b, a, c);
        acc = gb_add(&b, acc, d);
    }
    gb_set_logits(&b, gb_slice(&b, acc, 1, g_n_plus(-1), g_const(1)));
    assert_int_equal(b.status, SLM_OK);
    assert_int_equal(graph_verify(p, &e), SLM_OK);
    memplan mp;
    memset(&mp, 0, sizeof mp);
    for (int64_t n = 1; n <= 33; n += 8) {
        assert_int_equal(memplan_build(p, fn, n, NULL, NULL, NULL, &mp, &e), SLM_OK);
        const g_function *f = &p->functions[fn];
        /* lifetime by node index */
        int32_t first[256], last[256];
        for (int32_t t = 0; t < p->n_tensors; t++) first[t] = last[t] = -1;
        for (int32_t i = 0; i < f->n_nodes; i++) {
            const g_node *nd = &p->nodes[f->nodes[i]];
            for (int k = 0; k < nd->n_out; k++) first[nd->out[k]] = last[nd->out[k]] = i;
            for (int k = 0; k < nd->n_in; k++) last[nd->in[k]] = i;
        }
        last[f->logits] = f->n_nodes;
        first[f->tokens] = 0;
        last[f->tokens] = f->n_nodes;
        for (int32_t a = 0; a < p->n_tensors; a++) {
            if (mp.offset[a] == MEMPLAN_NONE) continue;
            size_t a_end = mp.offset[a] + memplan_tensor_bytes(&p->tensors[a], n);
            assert_true(a_end <= mp.arena_bytes);
            for (int32_t c = a + 1; c < p->n_tensors; c++) {
                if (mp.offset[c] == MEMPLAN_NONE) continue;
                bool overlap_time = first[a] <= last[c] && first[c] <= last[a];
                size_t c_end = mp.offset[c] + memplan_tensor_bytes(&p->tensors[c], n);
                bool overlap_mem = mp.offset[a] < c_end && mp.offset[c] < a_end;
                assert_false(overlap_time && overlap_mem);
            }
        }
    }
    /* reuse: the arena is smaller than the sum of all activations */
    size_t sum = 0;
    for (int32_t t = 0; t < p->n_tensors; t++)
        if (mp.offset[t] != MEMPLAN_NONE) sum += memplan_tensor_bytes(&p->tensors[t], 33);
    assert_true(mp.arena_bytes < sum);
    memplan_free(p, &mp);
    graph_destroy(p);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(shape_errors_name_the_op),
        cmocka_unit_test(symbolic_shapes),
        cmocka_unit_test(verify_catches_stale_state_view),
        cmocka_unit_test(memplan_no_overlap),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
