"""A small, offline, Llama-3-style byte-level BPE tokenizer for tests and random-weight checkpoints.

The GPU host has no hub access, so no real tokenizer can be downloaded. ``build_tokenizer`` trains a
byte-level BPE (every byte is in the base alphabet, so ANY text round-trips) on a deterministic
English corpus generated here, and writes a HuggingFace tokenizer dir that
``transformers.AutoTokenizer.from_pretrained`` loads as ``PreTrainedTokenizerFast``. The result is
committed under ``sglang_mux/data/tokenizer/`` (``tokenizer_dir()``); regenerate with
``python -m sglang_mux.testing.tokenizer_fixture [out_dir]``.

Special tokens take the first ids (stable whatever the vocab size)::

    0 <|begin_of_text|>  (bos)      3 <|start_header_id|>
    1 <|end_of_text|>               4 <|end_header_id|>
    2 <|eot_id|>         (eos: chat turns end with it, as in Llama-3 Instruct)
"""

from __future__ import annotations

import json
import random
import sys
from pathlib import Path

SPECIAL_TOKENS = [
    "<|begin_of_text|>",
    "<|end_of_text|>",
    "<|eot_id|>",
    "<|start_header_id|>",
    "<|end_header_id|>",
]
BOS, EOS = "<|begin_of_text|>", "<|eot_id|>"
SPECIAL_TOKEN_IDS = {tok: i for i, tok in enumerate(SPECIAL_TOKENS)}
DEFAULT_VOCAB_SIZE = 4096
# Larger than any context we serve; SGLang takes the context length from config.json anyway.
MODEL_MAX_LENGTH = 1 << 20

# Llama-3's pre-tokenizer split (tiktoken cl100k-style), so token counts behave like the real thing.
_SPLIT_REGEX = (
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*"
    r"|\s*[\r\n]+|\s+(?!\S)|\s+"
)

# Llama-3 Instruct's template: bos, then one header/content/eot block per message.
CHAT_TEMPLATE = (
    "{{- bos_token }}"
    "{%- for message in messages %}"
    "{{- '<|start_header_id|>' + message['role'] + '<|end_header_id|>\\n\\n'"
    " + message['content'] | trim + '<|eot_id|>' }}"
    "{%- endfor %}"
    "{%- if add_generation_prompt %}"
    "{{- '<|start_header_id|>assistant<|end_header_id|>\\n\\n' }}"
    "{%- endif %}"
)

# ---- deterministic corpus ------------------------------------------------------------------------
_WORDS = """
the of and to a in is it you that he was for on are with as I his they be at one have this from or
had by not word but what some we can out other were all there when up use your how said an each she
which do their time if will way about many then them write would like so these her long make thing
see him two has look more day could go come did number sound no most people my over know water than
call first who may down side been now find any new work part take get place made live where after
back little only round man year came show every good me give our under name very through just form
sentence great think say help low line differ turn cause much mean before move right boy old too same
tell does set three want air well also play small end put home read hand port large spell add even
land here must big high such follow act why ask men change went light kind off need house picture try
us again animal point mother world near build self earth father head stand own page should country
found answer school grow study still learn plant cover food sun four between state keep eye never
last let thought city tree cross farm hard start might story saw far sea draw left late run while
press close night real life few north open seem together next white children begin got walk example
ease paper group always music those both mark often letter until mile river car feet care second book
carry took science eat room friend began idea fish mountain stop once base hear horse cut sure watch
color face wood main enough plain girl usual young ready above ever red list though feel talk bird
soon body dog family direct pose leave song measure door product black short numeral class wind
question happen complete ship area half rock order fire south problem piece told knew pass since top
whole king space heard best hour better true during hundred five remember step early hold west ground
interest reach fast verb sing listen six table travel less morning ten simple several vowel toward war
lay against pattern slow center love person money serve appear road map rain rule govern pull cold
notice voice unit power town fine certain fly fall lead cry dark machine note wait plan figure star
box noun field rest correct able pound done beauty drive stood contain front teach week final gave
green quick develop ocean warm free minute strong special mind behind clear tail produce fact street
inch multiply nothing course stay wheel full force blue object decide surface deep moon island foot
system busy test record boat common gold possible plane stead dry wonder laugh thousand ago ran check
game shape equate hot miss brought heat snow tire bring yes distant fill east paint language among
grand ball yet wave drop heart present heavy dance engine position arm wide sail material size vary
settle speak weight general ice matter circle pair include divide syllable felt perhaps pick sudden
count square reason length represent art subject region energy hunt probable bed brother egg ride
cell believe fraction forest sit race window store summer train sleep prove lone leg exercise wall
catch mount wish sky board joy winter sat written wild instrument kept glass grass cow job edge sign
visit past soft fun bright gas weather month million bear finish happy hope flower clothe strange
gone jump baby eight village meet root buy raise solve metal whether push seven paragraph third shall
held hair describe cook floor either result burn hill safe cat century consider type law bit coast
copy phrase silent tall sand soil roll temperature finger industry value fight lie beat excite
natural view sense ear else quite broke case middle kill son lake moment scale loud spring observe
child straight consonant nation dictionary milk speed method organ pay age section dress cloud
surprise quiet stone tiny climb cool design poor lot experiment bottom key iron single stick flat
twenty skin smile crease hole trade melody trip office receive row mouth exact symbol die least
trouble shout except wrote seed tone join suggest clean break lady yard rise bad blow oil blood touch
grew cent mix team wire cost lost brown wear garden equal sent choose fell fit flow fair bank collect
save control decimal gentle woman captain practice separate difficult doctor please protect noon
whose locate ring character insect caught period indicate radio spoke atom human history effect
electric expect crop modern element hit student corner party supply bone rail imagine provide agree
thus capital chair danger fruit rich thick soldier process operate guess necessary sharp wing create
neighbor wash bat rather crowd corn compare poem string bell depend meat rub tube famous dollar
stream fear sight thin triangle planet hurry chief colony clock mine tie enter major fresh search
send yellow gun allow print dead spot desert suit current lift rose continue block chart hat sell
success company subtract event particular deal swim term opposite wife shoe shoulder spread arrange
camp invent cotton born determine quart nine truck noise level chance gather shop stretch throw shine
property column molecule select wrong gray repeat require broad prepare salt nose plural anger claim
continent oxygen sugar death pretty skill women season solution magnet silver thank branch match
suffix especially fig afraid huge sister steel discuss forward similar guide experience score apple
bought led pitch coat mass card band rope slip win dream evening condition feed tool total basic smell
valley nor double seat arrive master track parent shore division sheet substance favor connect post
spend chord fat glad original share station dad bread charge proper bar offer segment slave duck
instant market degree populate chick dear enemy reply drink occur support speech nature range steam
motion path liquid log meant quotient teeth shell neck model server request token batch latency
throughput prefill decode memory kernel cache queue schedule partition stream compute budget
system user assistant hello thanks please
"""
_ENDINGS = ["s", "ed", "ing", "er", "ly", "ness", "tion", "al", "est", "ment"]
_PUNCT = [".", ".", ".", ",", "!", "?", ";", ":"]
_SNIPPETS = [
    "def f(x):\n    return x + 1\n",
    "for (int i = 0; i < n; ++i) { sum += a[i]; }\n",
    '{"role": "user", "content": "hello"}\n',
    "https://example.com/path?query=value&id=42\n",
    "import numpy as np\nprint(np.zeros((3, 4)).shape)\n",
    "Q: What is 12 + 30? A: 42.\n",
    "Email: someone@example.org, phone: +1 (555) 010-2030.\n",
]


def training_corpus(n_sentences: int = 6000, seed: int = 1234) -> list[str]:
    """English-like sentences from a fixed word list, plus numbers, code and punctuation.

    Deterministic: ``random.Random(int)`` is stable across Python versions.
    """
    rng = random.Random(seed)
    words = _WORDS.split()
    out = []
    for i in range(n_sentences):
        toks = []
        for _ in range(rng.randint(5, 18)):
            w = rng.choice(words)
            r = rng.random()
            if r < 0.15:
                w += rng.choice(_ENDINGS)
            elif r < 0.2:
                w = str(rng.randint(0, 99999))
            toks.append(w)
        toks[0] = toks[0].capitalize()
        line = " ".join(toks) + rng.choice(_PUNCT)
        if i % 10 == 0:  # paragraph breaks, so "\n\n" (chat headers) becomes one token
            line += "\n\n"
        if i % 50 == 0:
            line += "\n" + _SNIPPETS[(i // 50) % len(_SNIPPETS)]
        out.append(line)
    # Whole word list, bare and capitalised, so every word can become a single token.
    out += [" ".join(words), " ".join(w.capitalize() for w in words)]
    return out


# ---- build -----------------------------------------------------------------------------------------
def build_tokenizer(out_dir: str | Path, vocab_size: int = DEFAULT_VOCAB_SIZE) -> Path:
    """Train the tokenizer and write ``tokenizer.json``, ``tokenizer_config.json`` and
    ``special_tokens_map.json`` into ``out_dir``. Needs only the ``tokenizers`` library."""
    from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers, processors, trainers

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.Sequence(
        [
            pre_tokenizers.Split(Regex(_SPLIT_REGEX), behavior="isolated", invert=False),
            pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
        ]
    )
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=SPECIAL_TOKENS,  # ids 0..4, before the byte alphabet
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),  # all 256 bytes -> lossless
        min_frequency=2,
        show_progress=False,
    )
    tok.train_from_iterator(training_corpus(), trainer=trainer)
    # Like Llama-3: encode(text) prepends bos (chat-template text already has it; HF's
    # apply_chat_template(tokenize=True) encodes with add_special_tokens=False).
    tok.post_processor = processors.TemplateProcessing(
        single=f"{BOS}:0 $A:0",
        pair=f"{BOS}:0 $A:0 {BOS}:1 $B:1",
        special_tokens=[(BOS, tok.token_to_id(BOS))],
    )
    for t, i in SPECIAL_TOKEN_IDS.items():
        assert tok.token_to_id(t) == i, (t, tok.token_to_id(t))

    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    tok.save(str(out / "tokenizer.json"), pretty=False)  # compact: keeps the package small
    added = {
        str(i): {"content": t, "lstrip": False, "normalized": False, "rstrip": False,
                 "single_word": False, "special": True}
        for t, i in SPECIAL_TOKEN_IDS.items()
    }
    config = {
        "tokenizer_class": "PreTrainedTokenizerFast",
        "bos_token": BOS,
        "eos_token": EOS,
        "clean_up_tokenization_spaces": False,
        "model_input_names": ["input_ids", "attention_mask"],
        "model_max_length": MODEL_MAX_LENGTH,
        "added_tokens_decoder": added,
        "chat_template": CHAT_TEMPLATE,
    }
    _write_json(out / "tokenizer_config.json", config)
    _write_json(out / "special_tokens_map.json", {"bos_token": BOS, "eos_token": EOS})
    return out


def tokenizer_dir() -> Path:
    """The packaged, pre-built tokenizer directory (``sglang_mux/data/tokenizer``)."""
    return Path(__file__).resolve().parent.parent / "data" / "tokenizer"


def tokenizer_vocab_size(path: str | Path | None = None) -> int:
    """Number of ids (base vocab + added tokens) of a tokenizer dir, from tokenizer.json alone."""
    d = json.loads((Path(path or tokenizer_dir()) / "tokenizer.json").read_text())
    ids = list(d["model"]["vocab"].values()) + [t["id"] for t in d.get("added_tokens", [])]
    return max(ids) + 1


def _write_json(path: Path, obj) -> None:
    path.write_text(json.dumps(obj, indent=2, ensure_ascii=False) + "\n")


if __name__ == "__main__":
    print(build_tokenizer(sys.argv[1] if len(sys.argv) > 1 else tokenizer_dir()))
