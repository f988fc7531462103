#!/usr/bin/env python3
"""Golden data of tests/py/test_serve_toolcall_roundtrip.py: for each tool-call format, a real
template of that format (llama.cpp's models/templates, in $STATELM_CACHE/llamacpp-ref/templates),
a model's call text in it with the call llama.cpp's parser reads from it (tests/test-chat.cpp's
vectors, tests/data/toolcall/llamacpp-vectors.json; for llama3 and granite, which have no such
vector with a call, the text the template's own instructions ask for), and jinja2's rendering of the
round trip: the user's question, the assistant message with that call as an OpenAI client sends it
back, as the template sees it (its null content as "" and the arguments a dict, as llama-server and
statelm pass them to templates) and a tool message (with tool_call_id and name) answering it, with
add_generation_prompt, on SmolLM2's bos/eos texts.

jinja2 runs with transformers' settings (scripts/gen-jinja-golden.py's make_env) except two things
the server decides at run time, which the rendering marks for the test to fill in: the call's id
where the model wrote none (the server makes one: ID_MARK) and the date of strftime_now and of the
variables date_string and datetime, which llama-server and statelm's server pass to templates
(the server's clock: DATE_MARK + the format + DATE_MARK).

Writes tests/data/toolcall/roundtrip.json.
Usage: python3 scripts/gen-toolcall-roundtrip.py   (needs jinja2)
"""
import importlib.util
import json
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(HERE, "..", "tests", "data", "toolcall", "roundtrip.json")
ID_MARK = "call_@@ID@@"
DATE_MARK = "@@DATE@@"

spec = importlib.util.spec_from_file_location("gen_jinja_golden", os.path.join(HERE, "gen-jinja-golden.py"))
gjg = importlib.util.module_from_spec(spec)
spec.loader.exec_module(gjg)

SPECIAL = gjg.SPECIAL  # tests/test-chat.cpp special_function_tool
SPECIAL_OPT = gjg.SPECIAL_OPT
CALL = {"name": "special_function", "arguments": {"arg1": 1}}
V = "llama.cpp tests/test-chat.cpp:%d (tests/data/toolcall/llamacpp-vectors.json)"
CASES = [
    {"format": "hermes", "template": "Qwen-Qwen3-0.6B.jinja", "source": V % 3411,
     "text": '<tool_call>\n{"name": "special_function", "arguments": {"arg1": 1}}\n</tool_call>', "id": None},
    {"format": "qwen-xml", "template": "Qwen3.5-4B.jinja", "source": V % 3556,
     "text": "<tool_call>\n<function=special_function>\n<parameter=arg1>\n1\n</parameter>\n</function>\n</tool_call>",
     "id": None},
    {"format": "lfm2", "template": "LFM2.5-Instruct.jinja", "source": V % 2022,
     "text": "<|tool_call_start|>[special_function(arg1=1)]<|tool_call_end|>", "id": None},
    {"format": "llama3", "template": "meta-llama-Llama-3.1-8B-Instruct.jinja",
     "source": "the template's instructions ({\"name\": function name, \"parameters\": dictionary of argument name and its value})",
     "text": '{"name": "special_function", "parameters": {"arg1": 1}}', "id": None},
    {"format": "mistral", "template": "mistralai-Mistral-Nemo-Instruct-2407.jinja", "source": V % 5917,
     "text": '[TOOL_CALLS][{"name": "special_function", "arguments": {"arg1": 1}, "id": "123456789"}]', "id": "123456789"},
    {"format": "mistral-args", "template": "Mistral-Small-3.2-24B-Instruct-2506.jinja", "source": V % 6254,
     "text": '[TOOL_CALLS]special_function[CALL_ID]123456789[ARGS]{"arg1": 1}', "id": "123456789"},
    {"format": "granite", "template": "ibm-granite-granite-3.3-2B-Instruct.jinja",
     "source": "the template's instructions (<|tool_call|> followed by a JSON list of tools used)",
     "text": '<|tool_call|>[{"name": "special_function", "arguments": {"arg1": 1}}]', "id": None},
    {"format": "gpt-oss", "template": "openai-gpt-oss-120b.jinja", "source": V % 6478,
     "text": '<|channel|>commentary to=functions.special_function<|message|>{"arg1": 1}', "id": None},
]
# SmolLM2-135M-Instruct's vocabulary: bos and eos texts (ids 1 and 2)
BOS, EOS = "<|im_start|>", "<|im_end|>"
TOOLS = [SPECIAL, SPECIAL_OPT]
QUESTION = "Hey there! Call special_function with arg1 = 1."
RESULT = "Hello, world!"


def conversation(call_id):
    return [{"role": "user", "content": QUESTION},
            {"role": "assistant", "content": "",
             "tool_calls": [{"id": call_id, "type": "function", "function": CALL}]},
            {"role": "tool", "tool_call_id": call_id, "name": "special_function", "content": RESULT}]


def main():
    cache = os.environ.get("STATELM_CACHE", os.path.expanduser("~/.cache/statelm"))
    env = gjg.make_env()
    env.globals["strftime_now"] = lambda fmt: DATE_MARK + fmt + DATE_MARK
    out = []
    for case in CASES:
        path = os.path.join(cache, "llamacpp-ref", "templates", case["template"])
        if not os.path.exists(path):
            sys.exit("no %s (run scripts/fetch-models.sh)" % path)
        with open(path, encoding="utf-8") as f:
            tmpl = env.from_string(f.read())
        msgs = conversation(case["id"] or ID_MARK)
        prompt = tmpl.render(messages=json.loads(json.dumps(msgs)), tools=TOOLS, add_generation_prompt=True,
                             bos_token=BOS, eos_token=EOS, date_string=DATE_MARK + "%d %b %Y" + DATE_MARK,
                             datetime=DATE_MARK + "%b %d %Y" + DATE_MARK)
        out.append(dict(case, content="", calls=[dict(CALL, id=case["id"])], prompt=prompt))
    import jinja2
    with open(OUT, "w", encoding="utf-8") as f:
        json.dump({"generator": "scripts/gen-toolcall-roundtrip.py", "jinja2": jinja2.__version__,
                   "id_mark": ID_MARK, "date_mark": DATE_MARK, "tools": TOOLS, "question": QUESTION,
                   "result": RESULT, "cases": out}, f, ensure_ascii=False, indent=1)
        f.write("\n")
    print("%d cases, jinja2 %s" % (len(out), jinja2.__version__))


if __name__ == "__main__":
    main()
