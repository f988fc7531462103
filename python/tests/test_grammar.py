"""Grammar-constrained sampling from Python: statelm.Grammar (GBNF, JSON Schema), Sampler(grammar=,
json_schema=) and generate(grammar=, json_schema=).

The expected values come from outside the grammar engine: the set of tokens a grammar allows at
its start is computed here over the whole vocabulary with Python string tests on each token's
bytes; generated texts are matched with Python `re` and JSON outputs validated with `jsonschema`.
Runs on the tiny llama (byte-level vocabulary) and on SmolLM2-135M-Instruct (49152 real tokens,
skipped when absent from the cache)."""
import json
import re

import pytest

import statelm
from conftest import tiny_path

# root: "yes" or "no", ", because ", 1 to 30 of [a-z ], "." — a finite language, so every
# generation ends with an end-of-generation token once the grammar is done.
GBNF = 'root ::= ("yes" | "no") ", because " [a-z ]{1,30} "."\n'
RE = re.compile(r"(yes|no), because [a-z ]{1,30}\.")
HEADS = (b"yes, because ", b"no, because ")


def may_start(b: bytes) -> bool:
    """Whether a token's bytes are a prefix of some string of GBNF's language (independently of
    the engine: plain string tests)."""
    if not b:
        return False
    for head in HEADS:
        if len(b) <= len(head):
            if head.startswith(b):
                return True
        elif b.startswith(head):
            rest = b[len(head):].decode("ascii", "replace")
            if re.fullmatch(r"[a-z ]{1,30}\.|[a-z ]{0,30}", rest):
                return True
    return False


@pytest.fixture(params=["tiny-llama", "smollm2"])
def model(request, models):
    return models["llama"] if request.param == "tiny-llama" else request.getfixturevalue("smollm2")


def test_mask_is_the_tokens_the_grammar_allows(model):
    """At the start, the tokens with probability > 0 are exactly those whose bytes begin a string
    of the language (sampling with every filter off: temperature 1, no top-k/top-p/min-p)."""
    with statelm.Session(model, n_ctx=64) as s:
        s.prefill(model.tokenize("Answer:", add_bos=True))
        smp = statelm.Sampler(temperature=1.0, top_k=0, top_p=1.0, min_p=0.0, grammar=GBNF)
        probs = smp.probs(s).tolist()
        got = {i for i, p in enumerate(probs) if p > 0}
        want = {i for i in range(model.n_vocab) if not model.is_eog(i) and may_start(model.token_bytes(i))}
        assert got == want and len(want) >= 2
        assert abs(sum(probs) - 1) < 1e-4


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_sampled_text_matches_grammar(model, seed):
    """Sampling at temperature 1.5 (far from the model's choice): every output is a string of the
    language, ended by an end-of-generation token once the grammar is done."""
    smp = statelm.Sampler(temperature=1.5, top_k=0, top_p=1.0, min_p=0.0, seed=seed, grammar=statelm.Grammar(GBNF))
    toks = list(model.generate("Is the sky blue? Answer:", 60, sampler=smp))
    text = "".join(t.text for t in toks)
    assert RE.fullmatch(text), text
    assert len(toks) < 60 and smp.can_end is True  # ended by EOG, not by max_tokens
    # generate() starts the grammar over: the same sampler gives another valid answer
    again = "".join(t.text for t in model.generate("Is grass green? Answer:", 60, sampler=smp))
    assert RE.fullmatch(again), again


def test_sample_accepts_and_refuses(models):
    m = models["llama"]
    with statelm.Session(m, n_ctx=64) as s:
        logits = s.prefill(m.tokenize("Q", add_bos=True))
        smp = statelm.Sampler(temperature=0, grammar='root ::= "ab"')
        assert smp.can_end is False and isinstance(smp.grammar, statelm.Grammar)
        a = smp.sample(s)
        assert m.token_bytes(a) == b"a"  # greedy among the allowed: only "a" (or "ab") may start
        with pytest.raises(statelm.InvalidArgumentError):
            smp.accept(m.tokenize("z", add_bos=False)[0])  # "z" cannot follow "a"
        smp.accept(m.tokenize("b", add_bos=False)[0])
        assert smp.can_end is True
        del logits
        smp.reset()
        assert smp.can_end is False
        assert statelm.Sampler().grammar is None and statelm.Sampler().can_end is None
        with pytest.raises(statelm.StateError):
            statelm.Sampler().accept(5)


def test_json_schema_generation(smollm2):
    """generate(json_schema=...) on a chat prompt: the text parses and validates with jsonschema."""
    jsonschema = pytest.importorskip("jsonschema")
    schemas = [
        {"type": "object", "properties": {"name": {"type": "string", "maxLength": 20},
                                          "age": {"type": "integer", "minimum": 0, "maximum": 150}},
         "required": ["name", "age"], "additionalProperties": False},
        {"type": "array", "items": {"type": "string", "enum": ["red", "green", "blue"]}, "minItems": 1,
         "maxItems": 3},
        {"type": "object", "properties": {"ok": {"type": "boolean"}, "score": {"type": "number"}},
         "required": ["ok"]},
    ]
    for schema in schemas:
        ids = smollm2.chat_template([{"role": "user", "content": "Reply in JSON: " + json.dumps(schema)}],
                                    tokenize=True)
        text = smollm2.generate(ids, 120, stream=False, json_schema=schema)
        jsonschema.validate(json.loads(text), schema)
        for seed in (4, 5):
            smp = statelm.Sampler(temperature=1.0, seed=seed, json_schema=json.dumps(schema))
            text = smollm2.generate(ids, 120, stream=False, sampler=smp)
            jsonschema.validate(json.loads(text), schema)


def test_lookup_with_grammar_decodes_plainly(models):
    m = models["llama"]
    g = statelm.Grammar('root ::= [a-e]{3,8} "."')
    plain = m.generate([1, 89, 95], 20, stream=False, grammar=g)
    assert re.fullmatch(r"[a-e]{3,8}\.", plain)
    assert m.generate([1, 89, 95], 20, stream=False, grammar=g, lookup=True) == plain


def test_bad_grammars_and_arguments(models):
    m = models["llama"]
    with pytest.raises(statelm.FormatError, match="grammar 1:"):
        statelm.Grammar("root ::= (")
    with pytest.raises(statelm.StatelmError, match="root"):
        statelm.Grammar('start ::= "a"')
    statelm.Grammar('start ::= "a"', root="start")
    with pytest.raises(statelm.FormatError):
        statelm.Grammar.from_json_schema("{not json")
    with pytest.raises(statelm.StatelmError, match="colour"):
        statelm.Grammar.from_json_schema({"type": "string", "colour": 1}, strict=True)
    statelm.Grammar.from_json_schema({"type": "string", "colour": 1})  # an annotation without strict
    with pytest.raises(TypeError):
        statelm.Sampler(grammar=3)
    with pytest.raises(ValueError):
        statelm.Sampler(grammar='root ::= "a"', json_schema={"type": "object"})
    with pytest.raises(ValueError):
        m.generate([1], 4, sampler=statelm.Sampler(), grammar='root ::= "a"')
    with statelm.Session(m, n_ctx=32) as s:
        s.prefill([1, 89])
        with pytest.raises(statelm.UnsupportedError, match="grammar"):
            statelm.Spec(s, sampler=statelm.Sampler(grammar='root ::= "a"'))


def test_sampler_bound_to_one_model_mid_generation(models):
    a, b = models["llama"], models["qwen3"]
    smp = statelm.Sampler(temperature=0, grammar='root ::= [a-z]{2,4}')
    with statelm.Session(a, n_ctx=32) as sa, statelm.Session(b, n_ctx=32) as sb:
        sa.prefill([1, 89])
        sb.prefill([1, 89])
        smp.sample(sa)
        with pytest.raises(statelm.InvalidArgumentError, match="reset"):
            smp.sample(sb)
        smp.reset()
        assert 0 <= smp.sample(sb) < b.n_vocab
