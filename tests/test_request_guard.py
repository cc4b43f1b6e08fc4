"""sglang_mux.request_guard: every rejected case with its status and message, the valid bodies
that must pass (SGLang's docs, the OpenAI SDK's shapes, the bench client's own), the fuzz's
cases (nothing reaches the scheduler that the guard should have stopped), speed, error_body."""
import json
import random
import time

import pytest

from bench import fuzz as F
from sglang_mux.request_guard import GUARDED_PATHS, Limits, Rejected, check, error_body

VOCAB, CTX = 128256, 131072
L = Limits(vocab_size=VOCAB, context_len=CTX)
G, C, H, A = "/generate", "/v1/completions", "/v1/chat/completions", "/abort_request"
JSON = "application/json"
USER = [{"role": "user", "content": "hi"}]


def j(obj) -> bytes:
    return json.dumps(obj).encode()


def gen(**kw) -> bytes:
    return j({"text": "hello", **kw})


def sp(**kw) -> bytes:
    return gen(sampling_params={"max_new_tokens": 4, **kw})


def comp(**kw) -> bytes:
    return j({"model": "m", "prompt": "hi", **kw})


def chat(**kw) -> bytes:
    return j({"model": "m", "messages": USER, **kw})


def msgs(*m) -> bytes:
    return j({"model": "m", "messages": list(m)})


def rejected(path, body, content_type=JSON, method="POST", limits=L) -> Rejected:
    with pytest.raises(Rejected) as e:
        check(method, path, content_type, body, limits)
    return e.value


# (path, body, status, fragment of the message, param or ... when not asserted)
REJECTED = {
    # ---- the body as a whole
    "empty": (G, b"", 400, "the body is empty", None),
    "blank": (C, b"  \n ", 400, "the body is empty", None),
    "invalid_utf8": (G, b'{"text": "\xff\xfe"}', 400, "not UTF-8 (byte 10)", None),
    "truncated": (C, j({"prompt": "hello"})[:-3], 400, "not JSON: Unterminated string", None),
    "not_json": (H, b"{this is not json", 400,
                 "not JSON: Expecting property name enclosed in double quotes (line 1, column 2)", None),
    "nan": (G, b'{"text": "a", "sampling_params": {"temperature": NaN}}', 400, "holds NaN, which is not JSON", None),
    "infinity": (C, b'{"prompt": "a", "temperature": Infinity}', 400, "holds Infinity", None),
    "minus_infinity": (H, b'{"messages": [], "top_p": -Infinity}', 400, "holds -Infinity", None),
    "overflow_1e400": (G, b'{"text": "a", "sampling_params": {"temperature": 1e400}}', 400,
                       "1e400 overflows to infinity", None),
    "overflow_neg": (C, b'{"prompt": "a", "presence_penalty": -2e308}', 400, "overflows to infinity", None),
    "int_5000_digits": (G, b'{"text": "a", "rid": ' + b"9" * 5000 + b"}", 400, "not usable JSON", None),
    "nested_10000": (G, b'{"text": "a", "x": ' + b"[" * 10_000 + b"]" * 10_000 + b"}", 400,
                     "deeper than 32 levels", None),
    "open_100000": (C, b"[" * 100_000, 400, "deeper than 32 levels", None),
    "nested_33": (H, b"[" * 33 + b"]" * 33, 400, "deeper than 32 levels", None),
    "body_array": (H, b"[1, 2, 3]", 400, "the body must be a JSON object, got an array", None),
    "body_number": (H, b"42", 400, "must be a JSON object, got a number", None),
    "body_string": (H, b'"hello"', 400, "must be a JSON object, got a string", None),
    "body_null": (G, b"null", 400, "got null", None),
    "body_true": (A, b"true", 400, "got a boolean", None),
    # ---- /generate: the prompt
    "no_prompt": (G, j({"sampling_params": {"max_new_tokens": 4}}), 400, "give text or input_ids", "text"),
    "text_null": (G, j({"text": None}), 400, "give text or input_ids", "text"),
    "text_and_ids": (G, j({"text": "a", "input_ids": [1, 2]}), 400, "give text or input_ids, not both", "input_ids"),
    "ids_and_embeds": (G, j({"input_ids": [1], "input_embeds": [[0.5]]}), 400, "not both", "input_embeds"),
    "text_junk_list": (G, j({"text": [None, "a", 1]}), 400, "text[0] must be a non-empty string, got null", "text[0]"),
    "text_list_int": (G, j({"text": ["a", 1]}), 400, "text[1] must be a non-empty string, got 1", "text[1]"),
    "text_true": (G, j({"text": True}), 400, "text must be a string, or a list of 1 to 256 strings", "text"),
    "text_number": (G, j({"text": 3.5}), 400, "got 3.5", "text"),
    "text_object": (G, j({"text": {"a": 1}}), 400, 'got {"a": 1}', "text"),
    "text_empty_list": (G, j({"text": []}), 400, "got []", "text"),
    "text_empty": (G, j({"text": ""}), 400, "text must be a non-empty string", "text"),
    "text_batch_257": (G, j({"text": ["a"] * 257}), 400, "a list of 1 to 256 strings", "text"),
    "ids_negative": (G, j({"input_ids": [1, -7, 3]}), 400,
                     "input_ids[1] must be a token id, a whole number in [0, 128255], got -7", "input_ids[1]"),
    "ids_past_vocab": (G, j({"input_ids": [1, VOCAB]}), 400, "in [0, 128255], got 128256", "input_ids[1]"),
    "ids_far_past_vocab": (G, j({"input_ids": [1, VOCAB + 10 ** 6]}), 400, "got 1128256", "input_ids[1]"),
    "ids_batch_negative": (G, j({"input_ids": [[1, 2], [3, -1]]}), 400, "got -1", "input_ids[1][1]"),
    "ids_batch_past_vocab": (G, j({"input_ids": [[1], [5, 6, 7, 8, 9, VOCAB]]}), 400, "got 128256",
                             "input_ids[1][5]"),
    "ids_2_63": (G, j({"input_ids": [2 ** 63]}), 400, "got 9223372036854775808", "input_ids[0]"),
    "ids_float": (G, j({"input_ids": [1.5, 2.5]}), 400, "got 1.5", "input_ids[0]"),
    "ids_integral_float": (G, j({"input_ids": [1, 4.0]}), 400, "got 4.0", "input_ids[1]"),
    "ids_bool": (G, j({"input_ids": [1, True]}), 400, "got true", "input_ids[1]"),
    "ids_string": (G, j({"input_ids": ["a", "b"]}), 400, "got 'a'", "input_ids[0]"),
    "ids_nested": (G, j({"input_ids": [[1, [2]], {"x": 1}]}), 400, "got [2]", "input_ids[0][1]"),
    "ids_batch_row_object": (G, j({"input_ids": [[1], {"x": 1}]}), 400, "a non-empty list of token ids",
                             "input_ids[1]"),
    "ids_empty": (G, j({"input_ids": []}), 400, "a non-empty list of token ids", "input_ids"),
    "ids_empty_row": (G, j({"input_ids": [[1], []]}), 400, "input_ids[1] must be a non-empty list", "input_ids[1]"),
    "ids_object": (G, j({"input_ids": {"0": 1}}), 400, "a non-empty list of token ids", "input_ids"),
    "ids_past_context": (G, j({"input_ids": [1] * (CTX + 1)}), 400,
                         "input_ids holds 131073 tokens; give at most 131072", "input_ids"),
    "ids_batch_past_context": (G, j({"input_ids": [[1], [2] * (CTX + 64)]}), 400, "holds 131136 tokens",
                               "input_ids[1]"),
    "ids_batch_257": (G, j({"input_ids": [[1]] * 257}), 400, "holds 257 prompts; give at most 256", "input_ids"),
    "embeds_int_first": (G, j({"input_embeds": [[1, 0.5]]}), 400, "written with a decimal point", "input_embeds[0][0]"),
    "embeds_strings": (G, j({"input_embeds": [[0.5, "a"]]}), 400, "a non-empty list of numbers", "input_embeds[0]"),
    "embeds_flat": (G, j({"input_embeds": [0.5, 0.25]}), 400, "a non-empty list of numbers, got 0.5",
                    "input_embeds[0]"),
    "embeds_batch_junk": (G, j({"input_embeds": [[[0.5]], [[None]]]}), 400, "list of numbers", "input_embeds[1][0]"),
    # ---- /generate: sampling_params
    "max_new_tokens_string": (G, sp(max_new_tokens="ten"), 400,
                              "sampling_params.max_new_tokens must be a whole number in [0, 131072], got 'ten'",
                              "sampling_params.max_new_tokens"),
    "max_new_tokens_object": (G, sp(max_new_tokens={}), 400, "got {}", "sampling_params.max_new_tokens"),
    "max_new_tokens_list": (G, sp(max_new_tokens=[1]), 400, "got [1]", "sampling_params.max_new_tokens"),
    "max_new_tokens_bool_list": (G, sp(max_new_tokens=[True]), 400, "got [true]", "sampling_params.max_new_tokens"),
    "max_new_tokens_bool": (G, sp(max_new_tokens=True), 400, "got true", "sampling_params.max_new_tokens"),
    "max_new_tokens_negative": (G, sp(max_new_tokens=-5), 400, "got -5", "sampling_params.max_new_tokens"),
    "max_new_tokens_neg_half": (G, sp(max_new_tokens=-0.5), 400, "got -0.5", "sampling_params.max_new_tokens"),
    "max_new_tokens_4.0": (G, sp(max_new_tokens=4.0), 400, "whole number in [0, 131072], got 4.0",
                           "sampling_params.max_new_tokens"),
    "max_new_tokens_1e15": (G, sp(max_new_tokens=10 ** 15), 400, "got 1000000000000000",
                            "sampling_params.max_new_tokens"),
    "max_new_tokens_2_63": (G, sp(max_new_tokens=2 ** 63), 400, "got 9223372036854775808",
                            "sampling_params.max_new_tokens"),
    "max_new_tokens_past_context": (G, sp(max_new_tokens=CTX + 1), 400, "got 131073", "sampling_params.max_new_tokens"),
    "min_new_tokens_negative": (G, sp(min_new_tokens=-1), 400, "whole number in [0, 131072]",
                                "sampling_params.min_new_tokens"),
    "min_over_max_new_tokens": (G, sp(min_new_tokens=8), 400, "must be at most max_new_tokens (4), got 8",
                                "sampling_params.min_new_tokens"),
    "temperature_negative": (G, sp(temperature=-1.0), 400, "temperature must be a number in [0, 1000000], got -1.0",
                             "sampling_params.temperature"),
    "temperature_string": (G, sp(temperature="hot"), 400, "got 'hot'", "sampling_params.temperature"),
    "temperature_huge": (G, sp(temperature=1e39), 400, "got 1e+39", "sampling_params.temperature"),
    "top_p_zero": (G, sp(top_p=0.0), 400, "top_p must be a number in [1e-06, 1], got 0.0", "sampling_params.top_p"),
    "top_p_subnormal": (G, sp(top_p=1e-300), 400, "got 1e-300", "sampling_params.top_p"),
    "top_p_over_1": (G, sp(top_p=1.5), 400, "got 1.5", "sampling_params.top_p"),
    "top_k_zero": (G, sp(top_k=0), 400, "top_k must be -1 (the whole vocabulary) or a whole number in [1, 1073741824]",
                   "sampling_params.top_k"),
    "top_k_minus_2": (G, sp(top_k=-2), 400, "got -2", "sampling_params.top_k"),
    "top_k_past_int32": (G, sp(top_k=2 ** 31), 400, "got 2147483648", "sampling_params.top_k"),
    "min_p_over_1": (G, sp(min_p=2.0), 400, "min_p must be a number in [0, 1], got 2.0", "sampling_params.min_p"),
    "frequency_penalty_3": (G, sp(frequency_penalty=3), 400, "in [-2, 2], got 3", "sampling_params.frequency_penalty"),
    "presence_penalty_minus_3": (G, sp(presence_penalty=-3), 400, "got -3", "sampling_params.presence_penalty"),
    "repetition_penalty_negative": (G, sp(repetition_penalty=-1.0), 400, "in [1e-06, 2], got -1.0",
                                    "sampling_params.repetition_penalty"),
    "repetition_penalty_zero": (G, sp(repetition_penalty=0), 400, "got 0", "sampling_params.repetition_penalty"),
    "repetition_penalty_3": (G, sp(repetition_penalty=3), 400, "got 3", "sampling_params.repetition_penalty"),
    "n_zero": (G, sp(n=0), 400, "sampling_params.n must be a whole number in [1, 16], got 0", "sampling_params.n"),
    "n_17": (G, sp(n=17), 400, "got 17", "sampling_params.n"),
    "n_1e15": (G, sp(n=10 ** 15), 400, "got 1000000000000000", "sampling_params.n"),
    "n_2_63": (G, sp(n=2 ** 63), 400, "got 9223372036854775808", "sampling_params.n"),
    "n_true": (G, sp(n=True), 400, "got true", "sampling_params.n"),
    "stop_number": (G, sp(stop=5), 400, "sampling_params.stop must be a string or a list of strings, got 5",
                    "sampling_params.stop"),
    "stop_list_number": (G, sp(stop=["a", 1]), 400, "sampling_params.stop[1] must be a string, got 1",
                         "sampling_params.stop[1]"),
    "stop_token_ids_negative": (G, sp(stop_token_ids=[2, -1]), 400, "got -1", "sampling_params.stop_token_ids[1]"),
    "stop_token_ids_past_vocab": (G, sp(stop_token_ids=[VOCAB]), 400, "[0, 128255], got 128256",
                                  "sampling_params.stop_token_ids[0]"),
    "stop_token_ids_int": (G, sp(stop_token_ids=5), 400, "a list of token ids", "sampling_params.stop_token_ids"),
    "ignore_eos_string": (G, sp(ignore_eos="yes"), 400, "true or false, got 'yes'", "sampling_params.ignore_eos"),
    "skip_special_tokens_int": (G, sp(skip_special_tokens=1), 400, "got 1", "sampling_params.skip_special_tokens"),
    "no_stop_trim_null_str": (G, sp(no_stop_trim="null"), 400, "true or false", "sampling_params.no_stop_trim"),
    "regex_number": (G, sp(regex=5), 400, "sampling_params.regex must be a string", "sampling_params.regex"),
    "json_schema_object": (G, sp(json_schema={"type": "object"}), 400, "must be a string",
                           "sampling_params.json_schema"),
    "two_grammars": (G, sp(regex="a+", json_schema="{}"), 400, "give at most one of regex, json_schema, ebnf",
                     "sampling_params.json_schema"),
    "logit_bias_negative_key": (G, sp(logit_bias={"-5": 1.0}), 400, "key '-5' must be a token id",
                                "sampling_params.logit_bias"),
    "logit_bias_key_past_vocab": (G, sp(logit_bias={str(VOCAB): 1.0}), 400, "key '128256'",
                                  "sampling_params.logit_bias"),
    "logit_bias_key_word": (G, sp(logit_bias={"abc": 1.0}), 400, "written in decimal", "sampling_params.logit_bias"),
    "logit_bias_key_long": (G, sp(logit_bias={"9" * 5000: 1.0}), 400, "must be a token id",
                            "sampling_params.logit_bias"),
    "logit_bias_value_string": (G, sp(logit_bias={"5": "x"}), 400, "in [-100, 100], got 'x'",
                                "sampling_params.logit_bias.5"),
    "logit_bias_value_huge": (G, sp(logit_bias={"5": 1e38}), 400, "got 1e+38", "sampling_params.logit_bias.5"),
    "logit_bias_list": (G, sp(logit_bias=[1]), 400, "an object mapping token ids", "sampling_params.logit_bias"),
    "sampling_seed_past_int64": (G, sp(sampling_seed=2 ** 64), 400, "whole number in [-9223372036854775808",
                                 "sampling_params.sampling_seed"),
    "sampling_params_string": (G, gen(sampling_params="fast"), 400,
                               "sampling_params must be an object of sampling parameters, got 'fast'",
                               "sampling_params"),
    "sampling_params_list_single": (G, gen(sampling_params=[1, 2]), 400, "a list is for a batch", "sampling_params"),
    "sampling_params_list_short": (G, j({"text": ["a", "b"], "sampling_params": [{}]}), 400,
                                   "one value, or a list of 2 (one per prompt)", "sampling_params"),
    "sampling_params_list_junk": (G, j({"text": ["a", "b"], "sampling_params": [{}, 7]}), 400,
                                  "sampling_params[1] must be an object", "sampling_params[1]"),
    "sampling_params_batch_item": (G, j({"input_ids": [[1], [2]], "sampling_params": [{"n": 1}, {"top_k": 0}]}), 400,
                                   "got 0", "sampling_params[1].top_k"),
    # ---- /generate: the other fields
    "stream_string": (G, gen(stream="yes"), 400, "stream must be true or false", "stream"),
    "return_logprob_string": (G, gen(return_logprob="true"), 400, "got 'true'", "return_logprob"),
    "return_logprob_list_single": (G, gen(return_logprob=[True]), 400, "a list is for a batch", "return_logprob"),
    "return_logprob_list_length": (G, j({"text": ["a", "b"], "return_logprob": [True]}), 400,
                                   "a list of 2 (one per prompt)", "return_logprob"),
    "return_text_in_logprobs_int": (G, gen(return_text_in_logprobs=1), 400, "true or false",
                                    "return_text_in_logprobs"),
    "top_logprobs_num_129": (G, gen(top_logprobs_num=129), 400, "whole number in [0, 128], got 129",
                             "top_logprobs_num"),
    "top_logprobs_num_negative": (G, gen(top_logprobs_num=-1), 400, "got -1", "top_logprobs_num"),
    "logprob_start_len_minus_2": (G, gen(logprob_start_len=-2), 400, "in [-1, 131072], got -2", "logprob_start_len"),
    "token_ids_logprob_negative": (G, gen(token_ids_logprob=[1, -1]), 400, "got -1", "token_ids_logprob[1]"),
    "token_ids_logprob_past_vocab": (G, gen(token_ids_logprob=[VOCAB]), 400, "got 128256", "token_ids_logprob[0]"),
    "token_ids_logprob_batch": (G, j({"text": ["a", "b"], "token_ids_logprob": [[1], [VOCAB + 5]]}), 400,
                                "got 128261", "token_ids_logprob[1][0]"),
    "token_ids_logprob_string": (G, gen(token_ids_logprob="5"), 400, "a list of token ids", "token_ids_logprob"),
    "rid_number": (G, gen(rid=5), 400, "rid must be a string, got 5", "rid"),
    "rid_list_length": (G, j({"text": ["a", "b"], "rid": ["x"]}), 400, "a list of 2", "rid"),
    "lora_path_number": (G, gen(lora_path=5), 400, "lora_path must be a string", "lora_path"),
    "put_generate": (G, j({"input_ids": [-1]}), 400, "got -1", "input_ids[0]"),  # sent with PUT below
    # ---- /v1/completions
    "c_no_prompt": (C, j({"model": "m", "max_tokens": 4}), 400, "prompt is required", "prompt"),
    "c_prompt_null": (C, comp(prompt=None), 400, "prompt is required", "prompt"),
    "c_prompt_float": (C, comp(prompt=3.5), 400, "prompt must be a non-empty string, a list of strings", "prompt"),
    "c_prompt_object": (C, comp(prompt={"a": 1}), 400, 'got {"a": 1}', "prompt"),
    "c_prompt_nested_strings": (C, comp(prompt=[[["x"]]]), 400, 'got ["x"]', "prompt[0][0]"),
    "c_prompt_null_list": (C, comp(prompt=[None]), 400, "got [null]", "prompt"),
    "c_prompt_empty": (C, comp(prompt=""), 400, "prompt must be a non-empty string", "prompt"),
    "c_prompt_empty_list": (C, comp(prompt=[]), 400, "got []", "prompt"),
    "c_prompt_mixed": (C, comp(prompt=["a", 1]), 400, "prompt[1] must be a non-empty string", "prompt[1]"),
    "c_prompt_negative_id": (C, comp(prompt=[1, -1]), 400, "prompt[1] must be a token id", "prompt[1]"),
    "c_prompt_id_past_vocab": (C, comp(prompt=[VOCAB]), 400, "got 128256", "prompt[0]"),
    "c_prompt_batch_past_vocab": (C, comp(prompt=[[1], [2, VOCAB]]), 400, "got 128256", "prompt[1][1]"),
    "c_prompt_batch_negative": (C, comp(prompt=[[-3]]), 400, "got -3", "prompt[0][0]"),
    "c_prompt_past_context": (C, comp(prompt=[7] * (CTX + 1)), 400, "holds 131073 tokens", "prompt"),
    "c_max_tokens_string": (C, comp(max_tokens="ten"), 400,
                            "max_tokens must be a whole number in [1, 131072], got 'ten'",
                            "max_tokens"),
    "c_max_tokens_zero": (C, comp(max_tokens=0), 400, "got 0", "max_tokens"),
    "c_max_tokens_1e15": (C, comp(max_tokens=10 ** 15), 400, "got 1000000000000000", "max_tokens"),
    "c_max_tokens_2_63": (C, comp(max_tokens=2 ** 63), 400, "got 9223372036854775808", "max_tokens"),
    "c_max_tokens_list": (C, comp(max_tokens=[True]), 400, "got [true]", "max_tokens"),
    "c_min_over_max_tokens": (C, comp(max_tokens=4, min_tokens=5), 400, "min_tokens must be at most max_tokens (4)",
                              "min_tokens"),
    "c_temperature_negative": (C, comp(temperature=-2), 400, "got -2", "temperature"),
    "c_top_p_zero": (C, comp(top_p=0), 400, "got 0", "top_p"),
    "c_n_zero": (C, comp(n=0), 400, "n must be a whole number in [1, 16], got 0", "n"),
    "c_best_of_1e15": (C, comp(best_of=10 ** 15), 400, "best_of must be a whole number in [1, 16]", "best_of"),
    "c_logprobs_string": (C, comp(logprobs="many"), 400, "logprobs must be a whole number in [0, 20], got 'many'",
                          "logprobs"),
    "c_logprobs_21": (C, comp(logprobs=21), 400, "got 21", "logprobs"),
    "c_echo_string": (C, comp(echo="yes"), 400, "echo must be true or false", "echo"),
    "c_stream_int": (C, comp(stream=1), 400, "stream must be true or false, got 1", "stream"),
    "c_stream_options_string": (C, comp(stream_options="yes"), 400, "stream_options must be an object",
                                "stream_options"),
    "c_stop_number": (C, comp(stop=5), 400, "stop must be a string or a list of strings", "stop"),
    "c_seed_past_int64": (C, comp(seed=2 ** 64), 400, "seed must be a whole number", "seed"),
    "c_seed_float": (C, comp(seed=1.5), 400, "got 1.5", "seed"),
    "c_presence_penalty": (C, comp(presence_penalty=2.5), 400, "in [-2, 2], got 2.5", "presence_penalty"),
    "c_logit_bias_past_vocab": (C, comp(logit_bias={"999999": 1}), 400, "key '999999' must be a token id",
                                "logit_bias"),
    "c_user_number": (C, comp(user=5), 400, "user must be a string", "user"),
    "c_model_number": (C, comp(model=5), 400, "model must be a string", "model"),
    "c_top_k_zero": (C, comp(top_k=0), 400, "top_k must be -1", "top_k"),
    "c_min_p_negative": (C, comp(min_p=-0.1), 400, "min_p must be a number in [0, 1]", "min_p"),
    "c_repetition_penalty_zero": (C, comp(repetition_penalty=0), 400, "repetition_penalty", "repetition_penalty"),
    "c_regex_and_ebnf": (C, comp(regex="a", ebnf="b"), 400, "give at most one of regex, json_schema, ebnf", "ebnf"),
    "c_ignore_eos_string": (C, comp(ignore_eos="x"), 400, "ignore_eos must be true or false", "ignore_eos"),
    "c_stop_token_ids_past_vocab": (C, comp(stop_token_ids=[VOCAB]), 400, "got 128256", "stop_token_ids[0]"),
    "c_response_format_string": (C, comp(response_format="json"), 400, "response_format must be an object",
                                 "response_format"),
    # ---- /v1/chat/completions: messages
    "h_no_messages": (H, j({"model": "m", "max_tokens": 4}), 400, "messages is required", "messages"),
    "h_messages_string": (H, chat(messages="hi"), 400,
                          "messages must be a list of 1 to 10000 message objects, got 'hi'",
                          "messages"),
    "h_messages_object": (H, chat(messages={"role": "user"}), 400, 'got {"role": "user"}', "messages"),
    "h_messages_empty": (H, chat(messages=[]), 400, "got []", "messages"),
    "h_messages_10001": (H, chat(messages=USER * 10_001), 400, "a list of 1 to 10000", "messages"),
    "h_message_string": (H, chat(messages=["hi", 3]), 400, "messages[0] must be a message object", "messages[0]"),
    "h_no_role": (H, msgs({"content": "hi"}), 400, "messages[0].role must be one of 'system'", "messages[0].role"),
    "h_bad_role": (H, msgs({"role": "user", "content": "a"}, {"role": "wizard", "content": "hi"}), 400,
                   "got 'wizard'", "messages[1].role"),
    "h_user_capitalised": (H, msgs({"role": "User", "content": "hi"}), 400, "got 'User'", "messages[0].role"),
    "h_content_number": (H, msgs({"role": "user", "content": 12}), 400,
                         "messages[0].content must be a string or a list of content parts, got 12",
                         "messages[0].content"),
    "h_user_content_null": (H, msgs({"role": "user", "content": None}), 400,
                            "null only beside an assistant's tool_calls",
                            "messages[0].content"),
    "h_user_content_missing": (H, msgs({"role": "user"}), 400, "got null", "messages[0].content"),
    "h_system_content_null": (H, msgs({"role": "system", "content": None}, *USER), 400, "null only",
                              "messages[0].content"),
    "h_assistant_null_no_tools": (H, msgs(*USER, {"role": "assistant", "content": None}), 400, "null only",
                                  "messages[1].content"),
    "h_part_nonsense": (H, msgs({"role": "user", "content": [{"type": "nonsense", "x": {"y": [1]}}]}), 400,
                        "a part whose type is one of 'text', 'image_url'", "messages[0].content[0].type"),
    "h_part_not_object": (H, msgs({"role": "user", "content": ["hi"]}), 400, "got 'hi'", "messages[0].content[0]"),
    "h_text_part_no_text": (H, msgs({"role": "user", "content": [{"type": "text"}]}), 400,
                            "messages[0].content[0].text must be a string in a text part, got null",
                            "messages[0].content[0].text"),
    "h_text_part_number": (H, msgs({"role": "user", "content": [{"type": "text", "text": 5}]}), 400, "got 5",
                           "messages[0].content[0].text"),
    "h_name_number": (H, msgs({"role": "user", "content": "a", "name": 5}), 400, "messages[0].name must be a string",
                      "messages[0].name"),
    "h_tool_call_id_number": (H, msgs(*USER, {"role": "tool", "content": "x", "tool_call_id": 5}), 400,
                              "must be a string", "messages[1].tool_call_id"),
    "h_tool_calls_string": (H, msgs(*USER, {"role": "assistant", "content": None, "tool_calls": "x"}), 400,
                            "a list of tool calls", "messages[1].tool_calls"),
    "h_tool_calls_function_number": (H, msgs(*USER, {"role": "assistant", "content": "",
                                                     "tool_calls": [{"function": 5}]}),
                                     400, 'got {"function": 5}', "messages[1].tool_calls[0]"),
    # ---- /v1/chat/completions: the other fields
    "h_max_tokens_string": (H, chat(max_tokens="ten"), 400,
                            "max_tokens must be a whole number in [0, 131072], got 'ten'",
                            "max_tokens"),
    "h_max_tokens_negative": (H, chat(max_tokens=-5), 400, "got -5", "max_tokens"),
    "h_max_tokens_1e15": (H, chat(max_tokens=10 ** 15), 400, "got 1000000000000000", "max_tokens"),
    "h_max_tokens_2_63": (H, chat(max_tokens=2 ** 63), 400, "got 9223372036854775808", "max_tokens"),
    "h_max_tokens_object": (H, chat(max_tokens={"n": 1}), 400, 'got {"n": 1}', "max_tokens"),
    "h_max_completion_tokens": (H, chat(max_completion_tokens=-1), 400, "max_completion_tokens must be a whole number",
                                "max_completion_tokens"),
    "h_temperature_string": (H, chat(temperature="hot"), 400, "temperature must be a number", "temperature"),
    "h_top_p_negative": (H, chat(top_p=-0.1), 400, "got -0.1", "top_p"),
    "h_n_zero": (H, chat(n=0), 400, "got 0", "n"),
    "h_logprobs_string": (H, chat(logprobs="yes"), 400, "logprobs must be true or false", "logprobs"),
    "h_top_logprobs_21": (H, chat(logprobs=True, top_logprobs=21), 400,
                          "top_logprobs must be a whole number in [0, 20]",
                          "top_logprobs"),
    "h_stream_string": (H, chat(stream="true"), 400, "stream must be true or false", "stream"),
    "h_stream_options_string": (H, chat(stream=True, stream_options="yes"), 400, "stream_options must be an object",
                                "stream_options"),
    "h_include_usage_string": (H, chat(stream=True, stream_options={"include_usage": "yes"}), 400,
                               "stream_options.include_usage must be true or false", "stream_options.include_usage"),
    "h_tools_string": (H, chat(tools="x"), 400, "a list of tools", "tools"),
    "h_tools_function_number": (H, chat(tools=[{"type": "function", "function": 5}]), 400, "a list of tools",
                                "tools[0]"),
    "h_tools_no_name": (H, chat(tools=[{"type": "function", "function": {"description": "d"}}]), 400,
                        "a list of tools", "tools[0]"),
    "h_tool_choice_word": (H, chat(tool_choice="sometimes"), 400, "tool_choice must be 'none', 'auto', 'required'",
                           "tool_choice"),
    "h_tool_choice_number": (H, chat(tool_choice=5), 400, "got 5", "tool_choice"),
    "h_response_format_nope": (H, chat(response_format={"type": "nope"}), 400, "response_format.type must be one of",
                               "response_format.type"),
    "h_response_format_string": (H, chat(response_format="json"), 400, "response_format must be an object",
                                 "response_format"),
    "h_json_schema_missing": (H, chat(response_format={"type": "json_schema"}), 400,
                              "an object (with name and schema) when type is 'json_schema'",
                              "response_format.json_schema"),
    "h_parallel_tool_calls": (H, chat(parallel_tool_calls="yes"), 400, "true or false", "parallel_tool_calls"),
    "h_input_ids_past_vocab": (H, chat(input_ids=[1, VOCAB]), 400, "got 128256", "input_ids[1]"),
    "h_input_ids_negative": (H, chat(input_ids=[-1]), 400, "got -1", "input_ids[0]"),
    "h_seed_float": (H, chat(seed=1.5), 400, "seed must be a whole number", "seed"),
    "h_stop_list_number": (H, chat(stop=[1]), 400, "stop[0] must be a string", "stop[0]"),
    "h_logit_bias_value": (H, chat(logit_bias={"1": 101}), 400, "in [-100, 100], got 101", "logit_bias.1"),
    "h_overflow_1e999": (H, b'{"messages": [], "frequency_penalty": 1e999}', 400,
                                             "overflows to infinity", None),
    # ---- /abort_request
    "abort_empty": (A, j({}), 400, "give rid (the request to abort) or abort_all: true", "rid"),
    "abort_rid_number": (A, j({"rid": 5}), 400, "rid must be a string", "rid"),
    "abort_all_string": (A, j({"abort_all": "yes"}), 400, "abort_all must be true or false", "abort_all"),
    "abort_all_false": (A, j({"abort_all": False}), 400, "give rid", "rid"),
}


@pytest.mark.parametrize("name", sorted(REJECTED))
def test_rejected(name):
    path, body, status, fragment, param = REJECTED[name]
    r = rejected(path, body, method="PUT" if name == "put_generate" else "POST")
    assert (r.status, r.param) == (status, param), r.message
    assert fragment in r.message
    assert "\n" not in r.message and len(r.message) < 240


@pytest.mark.parametrize("ct", ["text/plain", "application/x-www-form-urlencoded", "multipart/form-data; boundary=x",
                                "application/jsonl", "application/vnd.api+json", "json"])
@pytest.mark.parametrize("path", [G, C, H, A])
def test_a_content_type_other_than_json_gets_415(ct, path):
    r = rejected(path, gen(), content_type=ct)
    assert r.status == 415 and "send the body as JSON with Content-Type: application/json" in r.message
    assert repr(ct) in r.message


def test_an_oversized_body_gets_413_before_anything_else():
    small = Limits(vocab_size=VOCAB, context_len=CTX, max_body_bytes=1000)
    r = rejected(G, b"\xff" * 1001, content_type="text/plain", limits=small)  # not UTF-8, wrong type: size first
    assert r.status == 413 and r.message == "the body is 1001 bytes; send at most 1000 bytes" and r.param is None
    check("POST", G, JSON, gen(rid="x" * (1000 - len(gen(rid="")))), small)  # exactly at the limit passes
    r = rejected(C, b" " * ((32 << 20) + 1))  # the default limit, 32 MiB
    assert r.status == 413 and str(32 << 20) in r.message


def test_a_message_quotes_at_most_60_characters_of_the_value():
    r = rejected(G, sp(max_new_tokens="x" * 10_000))
    got = r.message.split("got ", 1)[1]
    assert got.startswith("'xxx") and got.endswith("…") and len(got) <= 60
    r = rejected(G, j({"input_ids": [[1, [list(range(1000))] * 50]]}))
    assert len(r.message.split("got ", 1)[1]) <= 60
    r = rejected(G, j({"text": {"k" * 500: {"a": {"b": {"c": 1}}}}}))
    assert len(r.message.split("got ", 1)[1]) <= 60


def test_whole_numbers_are_json_integers_everywhere():
    """4.0 is refused wherever a whole number is due (the body passes on unchanged, and SGLang's
    native path would keep the float); true/false likewise."""
    for path, body, param in [(G, sp(max_new_tokens=4.0), "sampling_params.max_new_tokens"),
                              (G, sp(n=1.0), "sampling_params.n"), (G, gen(top_logprobs_num=2.0), "top_logprobs_num"),
                              (G, j({"input_ids": [1.0]}), "input_ids[0]"), (C, comp(max_tokens=8.0), "max_tokens"),
                              (C, comp(prompt=[1, 2.0]), "prompt[1]"), (H, chat(max_tokens=8.0), "max_tokens"),
                              (H, chat(n=False), "n"),
                              (G, sp(stop_token_ids=[2.0]), "sampling_params.stop_token_ids[0]")]:
        r = rejected(path, body)
        assert r.param == param and ("whole number" in r.message or "token id" in r.message), r.message


# ----------------------------------------------------------------------------- accepted
def _ids(n, seed=0):
    rng = random.Random(seed)
    return [rng.randrange(VOCAB) for _ in range(n)]


ACCEPTED = {
    # SGLang's docs (native API)
    "docs_generate": (G, {"text": "The capital of France is",
                          "sampling_params": {"max_new_tokens": 16, "temperature": 0}}),
    "docs_batch_text": (G, {"text": ["Hello, my name is", "The capital of France is"],
                            "sampling_params": [{"max_new_tokens": 16, "temperature": 0},
                                                {"max_new_tokens": 32, "temperature": 0.8, "top_p": 0.95}]}),
    "docs_batch_one_sampling": (G, {"text": ["a", "b", "c"], "sampling_params": {"max_new_tokens": 8, "n": 2}}),
    "docs_input_ids": (G, {"input_ids": [128000, 791, 6864, 315, 9822, 374], "sampling_params": {"max_new_tokens": 8}}),
    "docs_input_ids_batch": (G, {"input_ids": [[1, 2, 3], [0, VOCAB - 1]], "sampling_params": {"max_new_tokens": 8}}),
    "docs_stream": (G, {"text": "Once upon a time,", "sampling_params": {"max_new_tokens": 32, "temperature": 0},
                        "stream": True}),
    "docs_logprobs": (G, {"text": "Hi", "return_logprob": True, "logprob_start_len": 0, "top_logprobs_num": 5,
                          "token_ids_logprob": [1, 2], "return_text_in_logprobs": True,
                          "sampling_params": {"max_new_tokens": 4}}),
    "batch_logprob_lists": (G, {"text": ["a", "b"], "return_logprob": [True, False], "top_logprobs_num": [1, 128],
                                "logprob_start_len": [-1, 0], "token_ids_logprob": [[1], [2, 3]], "rid": ["r1", "r2"],
                                "lora_path": ["a", None]}),
    "all_sampling_fields": (G, {"text": "x", "rid": "abc", "lora_path": "adapter", "sampling_params": {
        "max_new_tokens": 0, "min_new_tokens": 0, "temperature": 1000000, "top_p": 1, "top_k": -1, "min_p": 0,
        "frequency_penalty": -2, "presence_penalty": 2, "repetition_penalty": 2, "n": 16, "stop": ["\n", "###"],
        "stop_token_ids": [0, VOCAB - 1], "stop_regex": "a+", "ignore_eos": False, "skip_special_tokens": True,
        "spaces_between_special_tokens": False, "no_stop_trim": True, "regex": "[a-z]+",
        "logit_bias": {"0": -100, "128255": 100.0},
        "sampling_seed": -(2 ** 63), "custom_params": {"k": 1}, "stream_interval": 4}}),
    "sampling_nulls": (G, {"text": "x", "sampling_params": {"max_new_tokens": None, "temperature": None, "stop": None,
                                                             "regex": None, "json_schema": None}, "stream": None}),
    "top_k_all": (G, {"text": "x", "sampling_params": {"top_k": 1 << 30, "json_schema": '{"type": "object"}'}}),
    "input_ids_at_context": (G, {"input_ids": [5] * CTX, "sampling_params": {"max_new_tokens": CTX}}),
    "input_embeds": (G, {"input_embeds": [[0.1, 2, -3.5], [1.0, 0.0, 0.0]]}),
    "input_embeds_batch": (G, {"input_embeds": [[[0.1, 0.2]], [[1, 2], [3, 4]]]}),
    "generate_unknown_fields": (G, {"text": "x", "image_data": "http://x/y.png", "custom_thing": {"a": [1, None]},
                                    "sampling_params": {"max_new_tokens": 4, "future_knob": "whatever"}}),
    # OpenAI SDK, completions
    "sdk_completions": (C, {"model": "default", "prompt": "Say this is a test", "max_tokens": 7, "temperature": 0}),
    "sdk_completions_full": (C, {"model": "m", "prompt": ["a", "b"], "max_tokens": 16, "temperature": 1.5, "top_p": 0.9,
                                 "n": 2, "best_of": 3, "logprobs": 5, "echo": True, "stop": ["\n"], "seed": 42,
                                 "presence_penalty": 0.5, "frequency_penalty": -0.5, "logit_bias": {"50256": -100},
                                 "user": "u", "suffix": "!", "stream": False}),
    "sdk_completions_stream": (C, {"model": "m", "prompt": "x", "stream": True,
                                   "stream_options": {"include_usage": True}}),
    "completions_token_prompt": (C, {"model": "m", "prompt": [1, 2, VOCAB - 1], "max_tokens": CTX}),
    "completions_token_batch": (C, {"model": "m", "prompt": [[1, 2], [0]], "max_tokens": 1}),
    "completions_sglang_extras": (C, {"model": "m", "prompt": "x", "top_k": 20, "min_p": 0.05, "min_tokens": 2,
                                      "max_tokens": 4, "repetition_penalty": 1.1, "regex": "\\d+", "ignore_eos": True,
                                      "stop_token_ids": [2], "no_stop_trim": False, "skip_special_tokens": False,
                                      "rid": "req-1", "lora_path": "a", "max_tokens_extra": 3,
                                      "response_format": {"type": "json_object"}}),
    "completions_nulls": (C, {"model": "m", "prompt": "x", "max_tokens": None, "stop": None, "logprobs": None,
                              "stream_options": None, "seed": None, "temperature": None}),
    # OpenAI SDK, chat
    "sdk_chat": (H, {"model": "m", "messages": [{"role": "system", "content": "You are helpful."},
                                                 {"role": "user", "content": "Hello!"}]}),
    "sdk_chat_parts": (H, {"model": "m", "messages": [{"role": "user", "content": [
        {"type": "text", "text": "What is in this image?"},
        {"type": "image_url", "image_url": {"url": "https://example.com/a.png", "detail": "low"}}]}],
        "max_completion_tokens": 300}),
    "sdk_chat_tools": (H, {"model": "m", "messages": [
        {"role": "developer", "content": "Use tools."},
        {"role": "user", "content": "Weather in Paris?", "name": "bob"},
        {"role": "assistant", "content": None, "tool_calls": [
            {"id": "call_1", "type": "function",
             "function": {"name": "get_weather", "arguments": "{\"city\": \"Paris\"}"}}]},
        {"role": "tool", "tool_call_id": "call_1", "content": "22C"},
        {"role": "tool", "tool_call_id": "call_2", "content": None}],
        "tools": [{"type": "function", "function": {"name": "get_weather", "description": "Get the weather",
                                                      "parameters": {"type": "object", "properties": {
                                                          "city": {"type": "string"}}, "required": ["city"]},
                                                      "strict": True}}],
        "tool_choice": "auto", "parallel_tool_calls": False}),
    "sdk_chat_tool_choice_object": (H, {"model": "m", "messages": USER, "tool_choice": {
        "type": "function", "function": {"name": "f"}}, "tools": [{"type": "function", "function": {"name": "f"}}]}),
    "sdk_chat_json_schema": (H, {"model": "m", "messages": USER, "response_format": {
        "type": "json_schema", "json_schema": {"name": "answer", "strict": True, "schema": {
            "type": "object", "properties": {"a": {"type": "integer"}}, "required": ["a"]}}}}),
    "sdk_chat_stream_usage": (H, {"model": "m", "messages": USER, "stream": True,
                                  "stream_options": {"include_usage": True}}),
    "sdk_chat_logprobs": (H, {"model": "m", "messages": USER, "logprobs": True, "top_logprobs": 20, "max_tokens": 0,
                              "temperature": 0.7, "top_p": 0.95, "n": 3, "stop": "\n", "seed": -1, "user": "u",
                              "presence_penalty": 2, "frequency_penalty": -2, "logit_bias": {"5": 3.5}}),
    "chat_sglang_extras": (H, {"model": "m", "messages": USER, "top_k": 5, "min_p": 0.1, "repetition_penalty": 1.05,
                               "regex": "a", "ebnf": None, "ignore_eos": True, "continue_final_message": False,
                               "chat_template_kwargs": {"enable_thinking": False}, "input_ids": [1, 2, 3],
                               "separate_reasoning": True, "reasoning_effort": "low", "stop_token_ids": [7]}),
    "chat_roles_sglang_takes": (H, {"model": "m", "messages": [
        {"role": "System", "content": "s"}, {"role": "latest_reminder", "content": "r"},
        {"role": "assistant", "content": [{"type": "thinking", "thinking": "hm"}, {"type": "text", "text": "ok"}]},
        {"role": "user", "content": []}, {"role": "function", "name": "f", "content": None}]}),
    "chat_unknown_fields": (H, {"model": "m", "messages": [{"role": "user", "content": "hi", "extra": 1}],
                                "metadata": {"k": "v"}, "store": False,
                                "json_schema": {"not": "a chat field"}}),  # SGLang's chat ignores it
    # /abort_request
    "abort_rid": (A, {"rid": "abc"}),
    "abort_all": (A, {"abort_all": True}),
    "abort_both": (A, {"rid": "", "abort_all": True}),
}


@pytest.mark.parametrize("name", sorted(ACCEPTED))
def test_accepted(name):
    path, body = ACCEPTED[name]
    check("POST", path, JSON, j(body), L)


@pytest.mark.parametrize("ct", [None, "", "application/json", "application/json; charset=utf-8",
                                "Application/JSON;charset=UTF-8", " application/json "])
def test_json_content_types_pass(ct):
    check("POST", G, ct, gen(), L)


def test_put_generate_is_guarded_and_other_methods_and_paths_pass():
    check("PUT", G, JSON, gen(), L)
    assert rejected(G, b"[]", method="put").status == 400
    junk = b"\xff{not json"
    for method, path in [("GET", "/health"), ("POST", "/flush_cache"), ("GET", G), ("GET", C), ("PUT", C),
                         ("POST", "/v1/models"), ("POST", "/generate/"), ("POST", "/v1/embeddings"),
                         ("POST", "/health_generate")]:
        check(method, path, "text/plain", junk, L)
    assert GUARDED_PATHS == {G, C, H, A}


def test_nesting_up_to_max_depth_passes():
    deep = b'{"text": "a", "x": ' + b"[" * 31 + b"]" * 31 + b"}"  # 32 levels with the body
    check("POST", G, JSON, deep, L)
    assert rejected(G, deep.replace(b"[", b"[[", 1).replace(b"]", b"]]", 1)).message.endswith("deeper than 32 levels")
    # brackets inside strings are text, not nesting
    check("POST", G, JSON, j({"text": "[" * 1000 + '\\"{' * 100}), L)


def test_the_bench_clients_bodies_pass():
    """What bench/client.py and bench/fuzz.py's valid_cases send, byte for byte."""
    for case in F.valid_cases() + F.valid_cases("llama"):
        check("POST", case.path, "application/json", case.body, L)
    # bench/client.py _generate: numpy ids .tolist(), stream, greedy, ignore_eos
    check("POST", G, "application/json", json.dumps({
        "input_ids": _ids(8000), "stream": True,
        "sampling_params": {"max_new_tokens": 256, "temperature": 0, "ignore_eos": True}}).encode(), L)
    # bench/client.py _chat: a multi-turn session (the assistant's answer may be "")
    messages = [{"role": "system", "content": "You are a helpful assistant."}, {"role": "user", "content": "Hi"},
                {"role": "assistant", "content": ""}, {"role": "user", "content": "Again"}]
    check("POST", H, "application/json", json.dumps({
        "model": "default", "messages": messages, "max_tokens": 128, "temperature": 0, "ignore_eos": True,
        "stream": True, "stream_options": {"include_usage": True, "continuous_usage_stats": True}}).encode(), L)


# ----------------------------------------------------------------------------- properties
# Fuzz cases the guard passes, with why they are valid: this 8 MiB text is under the 32 MiB body
# limit, and a text prompt's token count needs the tokenizer (SGLang refuses one past the context
# with a 400 of its own). With a lower body limit it is a 413 (below).
FUZZ_VALID = {"generate:oversized_body": "8 MiB of text, under max_body_bytes; its length in tokens is SGLang's"}


def test_every_fuzz_case_is_rejected_with_a_4xx_or_argued_valid():
    """What the fuzz sends, as it sends it (method, content type, body): a malformed generation
    request is refused with a 4xx unless argued valid above; an admin case or a valid stream, if
    refused at all, gets a 4xx too (never a 5xx)."""
    cases = F.cases(seed=0, context_len=CTX, vocab=VOCAB, big_mb=8)
    assert len(cases) >= 80 and set(FUZZ_VALID) <= {c.name for c in cases}
    passed = []
    for c in cases:
        try:
            check(c.method, c.path, c.content_type, c.body, L)
            if c.expect == "4xx":
                passed.append(c.name)
        except Rejected as r:
            assert 400 <= r.status < 500 and r.message, c.name
    assert sorted(passed) == sorted(FUZZ_VALID)
    big = next(c for c in cases if c.name == "generate:oversized_body")
    r = rejected(G, big.body, limits=Limits(vocab_size=VOCAB, context_len=CTX, max_body_bytes=4 << 20))
    assert r.status == 413


def test_no_out_of_range_token_id_ever_passes():
    """Random prompts and batches with ids drawn around the vocabulary's edges, in every place an
    id can go: the guard passes a body exactly when every id lies in [0, vocab)."""
    rng = random.Random(7)
    small = Limits(vocab_size=1000, context_len=64)
    edge = [-(2 ** 63), -1, 0, 1, 500, 998, 999, 1000, 1001, 2 ** 63]

    def ids():
        return [rng.choice(edge) if rng.random() < 0.05 else rng.randrange(1000) for _ in range(rng.randrange(1, 20))]

    for _ in range(600):
        rows = [ids() for _ in range(rng.randrange(1, 4))]
        flat = rows[0]
        where = rng.randrange(7)
        if where == 0:
            path, body, used = G, {"input_ids": flat}, flat
        elif where == 1:
            path, body, used = G, {"input_ids": rows}, sum(rows, [])
        elif where == 2:
            path, body, used = G, {"text": "a", "sampling_params": {"stop_token_ids": flat}}, flat
        elif where == 3:
            path, body, used = G, {"text": ["a"] * len(rows), "token_ids_logprob": rows}, sum(rows, [])
        elif where == 4:
            path, body, used = C, {"prompt": rows if rng.random() < 0.5 else flat}, None
            used = sum(rows, []) if type(body["prompt"][0]) is list else flat
        elif where == 5:
            path, body, used = H, {"messages": USER, "logit_bias": {str(t): 1 for t in flat}}, flat
        else:
            path, body, used = H, {"messages": USER, "input_ids": flat}, flat
        ok = all(0 <= t < 1000 for t in used)
        try:
            check("POST", path, JSON, j(body), small)
            assert ok, body
        except Rejected as r:
            assert not ok and r.status == 400 and "token id" in r.message, (body, r.message)


# ----------------------------------------------------------------------------- speed, error_body, Limits
def test_a_131072_id_body_checks_fast():
    """Measured on the development machine (2 cores): ~18 ms per check (json.loads ~9 ms, the id
    scan ~7 ms). The bound is generous: it catches a quadratic step, not a slow machine."""
    ids = _ids(CTX)
    body = json.dumps({"input_ids": ids, "stream": True,
                       "sampling_params": {"max_new_tokens": 16, "temperature": 0, "ignore_eos": True}}).encode()
    best = float("inf")
    for _ in range(5):
        t0 = time.perf_counter()
        check("POST", G, JSON, body, L)
        best = min(best, time.perf_counter() - t0)
    assert best < 0.5, f"{best * 1e3:.1f} ms"
    ids[-1] = VOCAB  # the last id: the per-id loop runs to the end
    t0 = time.perf_counter()
    assert rejected(G, j({"input_ids": ids})).param == f"input_ids[{CTX - 1}]"
    assert time.perf_counter() - t0 < 0.5
    t0 = time.perf_counter()
    assert rejected(G, b"[" * 100_000).status == 400
    assert time.perf_counter() - t0 < 0.5


@pytest.mark.parametrize("r,type_", [(Rejected(400, "x must be y, got 'z'", "x"), "BadRequestError"),
                                     (Rejected(413, "the body is 9 bytes; send at most 8 bytes"),
                                      "PayloadTooLargeError"),
                                     (Rejected(415, "send the body as JSON"), "UnsupportedMediaTypeError")])
def test_error_body_round_trips(r, type_):
    d = json.loads(error_body(r))
    assert d == {"object": "error", "message": r.message, "type": type_, "param": r.param, "code": r.status}


def test_error_body_of_a_real_rejection():
    r = rejected(G, j({"input_ids": [1, -7]}))
    d = json.loads(error_body(r))
    assert d["code"] == 400 and d["param"] == "input_ids[1]" and d["type"] == "BadRequestError"
    assert d["message"] == "input_ids[1] must be a token id, a whole number in [0, 128255], got -7"


@pytest.mark.parametrize("kw", [{"vocab_size": 0, "context_len": 8}, {"vocab_size": 8, "context_len": -1},
                                {"vocab_size": 8, "context_len": 8, "max_depth": 2.5},
                                {"vocab_size": True, "context_len": 8}])
def test_limits_refuse_non_positive_or_non_integer_bounds(kw):
    with pytest.raises(ValueError, match="must be a whole number > 0"):
        Limits(**kw)
