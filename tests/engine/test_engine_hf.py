"""Golden tests of the policy engine against Hugging Face: tokenizers (10,000+ strings), transformers
(logits, KV-cache decode, greedy generation, log-probs) for Qwen2 and Qwen3, checkpoints written by
`kernelzero init-model`, and every bad checkpoint input named in the engine issue.

Run by ctest (label cpu) with KZ_BINARY, KZ_ENGINE_PROBE and KZ_TOKENIZER_DIR set."""
from __future__ import annotations

import json
import os
import random
import shutil
import struct
import subprocess
import tempfile
import unicodedata
import unittest
from pathlib import Path

import torch

KZ = os.environ.get("KZ_BINARY", "build/kernelzero")
PROBE = os.environ.get("KZ_ENGINE_PROBE", "build/tests/engine_probe")
TOKENIZER_DIR = os.environ.get("KZ_TOKENIZER_DIR", str(Path(__file__).resolve().parents[2] / "data/qwen2.5-tokenizer"))
REPO = Path(__file__).resolve().parents[2]
LOGIT_ATOL = 1e-4


def run(args, input_text=None, check=True):
    p = subprocess.run(args, input=input_text, capture_output=True, text=True, timeout=600)
    if check and p.returncode != 0:
        raise AssertionError(f"{args[:2]} failed ({p.returncode}): {p.stderr[-2000:]}")
    return p


def lines(text):
    """JSONL output split on \n only (str.splitlines would also split inside U+2028 and U+0085)."""
    return [l for l in text.split("\n") if l]


def read_json(path):
    with open(path, encoding="utf-8") as f:
        return json.load(f)


def write_json(path, obj):
    with open(path, "w", encoding="utf-8") as f:
        json.dump(obj, f)


def probe(req):
    return json.loads(run([PROBE], json.dumps(req)).stdout)


# ---------------------------------------------------------------- tokenizer corpus

UNICODE_SAMPLES = [
    "e\u0301", "A\u030a", "n\u0303o", "\u1100\u1161\u11a8", "cafe\u0301 re\u0301sume\u0301", "Ǆ ǅ ǆ", "ﬁ ﬂ",
    "😀", "👩‍💻", "👍🏽", "🇫🇷", "❤️", "🧑‍🤝‍🧑", "日本語のテキスト", "中文字符和标点，。", "한국어 문장",
    "Привет, мир", "Ελληνικά", "مرحبا بالعالم", "שלום", "नमस्ते", "ภาษาไทย", "٣٤٥ ۱۲۳", "①②③", "½ ¾",
    "\u00a0", "\u3000", "\u2028", "\u2029", "\u0085", "\u200b", "\ufeff", "\t\t", "\r\n", "\n\n\n",
    "I'm", "don't", "'S", "'LL", "’s", "we'RE", "ſ", "ß", "İ", "µ", "Å", "Ω",
]
# Control bytes, NUL first: every byte of a string must reach the tokenizer (a C string stops at NUL).
CONTROL = ["\u0000", "\u0000\u0001 x", "a\u0000b", "x\u0000", "\u0000\u0000 \u0000", "\u0007\u0008\u000b\u000c",
           "\u001b[1;31mred\u001b[0m", "\u007f", "\u0001\u0002\u0003\u0004\u0005\u0006", "\u000e\u001f",
           "\u0080\u009f", "e\u0000\u0301"]
SPECIALS = ["<|im_start|>", "<|im_end|>", "<|endoftext|>", "<tool_call>", "</tool_call>", "<|fim_prefix|>",
            "<|fim_middle|>", "<|file_sep|>", "<|im_start", "|im_end|>", "<|endoftext", "<|im_start|><|im_end|>"]
WHITESPACE = [" ", "  ", "    ", "\t", "\n", " \n", "\n    ", "\r\n", "        ", " " * 17, "\t \t", "\n\n"]


def code_lines():
    lines = []
    for pattern in ("examples/known_good/**/*.py", "python/kernelzero/**/*.py", "engine/*.cpp", "verify/*.cpp",
                    "tests/verify/adversarial/*.py"):
        for f in sorted(REPO.glob(pattern)):
            text = f.read_text(encoding="utf-8")
            lines += text.splitlines(keepends=True)
            lines.append(text[:4000])  # whole-file chunks: indentation runs, blank lines
    return [l for l in lines if l]


def corpus(n=10_500, seed=1234):
    rng = random.Random(seed)
    code = code_lines()
    out = list(UNICODE_SAMPLES) + CONTROL + SPECIALS + WHITESPACE
    digits = lambda: "".join(rng.choice("0123456789") for _ in range(rng.randint(1, 24)))  # noqa: E731
    while len(out) < n:
        kind = rng.random()
        if kind < 0.45:
            i = rng.randrange(len(code))
            s = "".join(code[i:i + rng.randint(1, 6)])
        else:
            parts = []
            for _ in range(rng.randint(1, 7)):
                r = rng.random()
                if r < 0.27:
                    parts.append(rng.choice(UNICODE_SAMPLES))
                elif r < 0.3:
                    parts.append(rng.choice(CONTROL))
                elif r < 0.45:
                    parts.append(rng.choice(SPECIALS))
                elif r < 0.6:
                    parts.append(rng.choice(WHITESPACE))
                elif r < 0.75:
                    parts.append(digits())
                else:
                    parts.append(rng.choice(code).strip()[: rng.randint(1, 60)])
                if rng.random() < 0.5:
                    parts.append(rng.choice([" ", "", "\n", "  "]))
            s = "".join(parts)
        if s:
            out.append(s)
    return out


class TokenizerTest(unittest.TestCase):
    def test_known_encoding(self):
        text = "Hello, world! def f(x):\n    return x**2  # 123456\n<|im_start|>user\nhi<|im_end|>"
        want = [9707, 11, 1879, 0, 707, 282, 2075, 982, 262, 470, 856, 334, 17, 220, 671, 220, 16, 17, 18, 19, 20, 21,
                198, 151644, 872, 198, 6023, 151645]
        got = json.loads(run([KZ, "tokenize", "--model", TOKENIZER_DIR, "--jsonl", "-"], json.dumps(text) + "\n").stdout)
        self.assertEqual(got, want)

    def test_nul_and_control_bytes_reach_the_tokenizer(self):
        from tokenizers import Tokenizer
        ref = Tokenizer.from_file(os.path.join(TOKENIZER_DIR, "tokenizer.json"))
        got = json.loads(run([KZ, "tokenize", "--model", TOKENIZER_DIR, "--jsonl", "-"],
                             json.dumps("\u0000\u0001 x") + "\n").stdout)
        self.assertEqual(got, [188, 189, 856])
        self.assertEqual(got, ref.encode("\u0000\u0001 x", add_special_tokens=False).ids)

    def test_corpus_matches_hugging_face(self):
        from tokenizers import Tokenizer
        ref = Tokenizer.from_file(os.path.join(TOKENIZER_DIR, "tokenizer.json"))
        texts = corpus()
        self.assertGreaterEqual(len(texts), 10_000)
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "corpus.jsonl")
            with open(path, "w", encoding="utf-8") as f:
                for t in texts:
                    f.write(json.dumps(t) + "\n")
            ours = [json.loads(l) for l in lines(run([KZ, "tokenize", "--model", TOKENIZER_DIR, "--jsonl", path]).stdout)]
            self.assertEqual(len(ours), len(texts))
            want = [e.ids for e in ref.encode_batch(texts, add_special_tokens=False)]
            bad = [i for i in range(len(texts)) if ours[i] != want[i]]
            self.assertEqual(bad[:5] and [(texts[i], ours[i], want[i]) for i in bad[:5]], [],
                             f"{len(bad)} of {len(texts)} strings differ")
            ids_path = os.path.join(d, "ids.jsonl")
            with open(ids_path, "w") as f:
                for ids in ours:
                    f.write(json.dumps(ids) + "\n")
            decoded = [json.loads(l) for l in lines(run([KZ, "tokenize", "--model", TOKENIZER_DIR, "--jsonl", ids_path,
                                                         "--decode"]).stdout)]
            wrong = [i for i in range(len(texts)) if decoded[i] != ref.decode(want[i], skip_special_tokens=False)]
            self.assertEqual(wrong[:5], [], f"{len(wrong)} decodes differ from Hugging Face's")
            nfc = [i for i in range(len(texts)) if decoded[i] != unicodedata.normalize("NFC", texts[i])]
            self.assertEqual(nfc[:5], [], "decode(encode(s)) must give NFC(s) back")

    def test_merges_as_pairs_encode_the_same(self):
        # Qwen3's tokenizer.json stores merges as [a, b] pairs, Qwen2.5's as "a b" strings.
        with tempfile.TemporaryDirectory() as d:
            t = read_json(os.path.join(TOKENIZER_DIR, "tokenizer.json"))
            t["model"]["merges"] = [m.split(" ", 1) for m in t["model"]["merges"]]
            write_json(os.path.join(d, "tokenizer.json"), t)
            texts = corpus(n=600, seed=99)
            inp = "".join(json.dumps(x) + "\n" for x in texts)
            a = run([KZ, "tokenize", "--model", TOKENIZER_DIR, "--jsonl", "-"], inp).stdout
            b = run([KZ, "tokenize", "--model", d, "--jsonl", "-"], inp).stdout
            self.assertEqual(a, b)

    def test_chat_template_matches_apply_chat_template(self):
        from transformers import AutoTokenizer
        chats = [
            [{"role": "user", "content": "Write a ReLU kernel."}],
            [{"role": "system", "content": "You write CUDA."}, {"role": "user", "content": "x\n  y <|im_end|> z"}],
            [{"role": "user", "content": "a"}, {"role": "assistant", "content": "b"}, {"role": "user", "content": "ç😀"}],
        ]
        plain_chatml = ("{% for message in messages %}{{'<|im_start|>' + message['role'] + '\\n' + message['content'] + "
                        "'<|im_end|>' + '\\n'}}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}")
        with tempfile.TemporaryDirectory() as d:
            shutil.copy(os.path.join(TOKENIZER_DIR, "tokenizer.json"), d)
            cfg = read_json(os.path.join(TOKENIZER_DIR, "tokenizer_config.json"))
            cfg["chat_template"] = plain_chatml  # no default system prompt, as in Qwen3's template
            write_json(os.path.join(d, "tokenizer_config.json"), cfg)
            for directory in (TOKENIZER_DIR, d):
                ref = AutoTokenizer.from_pretrained(directory)
                inp = "".join(json.dumps(c) + "\n" for c in chats)
                ours = [json.loads(l) for l in lines(run([KZ, "tokenize", "--model", directory, "--jsonl", "-", "--chat"],
                                                         inp).stdout)]
                for c, got in zip(chats, ours):
                    want = ref.apply_chat_template(c, tokenize=True, add_generation_prompt=True)
                    if hasattr(want, "keys"):  # transformers 5 returns a BatchEncoding
                        want = want["input_ids"]
                    self.assertEqual(got, list(want), f"{directory}: {c}")

    def test_bad_lines_name_the_line(self):
        p = run([KZ, "tokenize", "--model", TOKENIZER_DIR, "--jsonl", "-"], '"ok"\n{"not": "a string"}\n', check=False)
        self.assertEqual(p.returncode, 2)
        self.assertIn("line 2", p.stderr)
        p = run([KZ, "tokenize", "--model", "/nonexistent", "--jsonl", "-"], '"x"\n', check=False)
        self.assertEqual(p.returncode, 2)
        self.assertIn("no tokenizer.json", p.stderr)


# ---------------------------------------------------------------- models

def randomize(model, seed):
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in model.named_parameters():
            noise = torch.randn(p.shape, generator=g) * 0.1
            p.copy_(1.0 + noise if "norm" in name else noise * (0.3 if "embed" in name or "lm_head" in name else 1.0))
    return model


# Head sizes the engine's CUDA decode kernels take (64 and 128), with 7 query heads per KV head as
# in Qwen2.5-7B; the tiny default (16 and 32) exercises ATen's path.
GPU_DIMS = {"qwen2": dict(hidden_size=448, num_attention_heads=7, num_key_value_heads=1, intermediate_size=512),
            "qwen3": dict(hidden_size=256, num_attention_heads=14, num_key_value_heads=2, intermediate_size=512,
                          head_dim=128)}


def make_hf_model(arch, directory, tied=True, seed=0, dims=None, **save_kwargs):
    from transformers import Qwen2Config, Qwen2ForCausalLM, Qwen3Config, Qwen3ForCausalLM
    common = dict(vocab_size=384, hidden_size=64, intermediate_size=160, num_hidden_layers=2, num_attention_heads=4,
                  num_key_value_heads=2, max_position_embeddings=512, rope_theta=10000.0, rms_norm_eps=1e-6,
                  tie_word_embeddings=tied)
    if arch == "qwen3":
        common["head_dim"] = 32
    common.update(dims or {})
    if arch == "qwen2":
        cfg, cls = Qwen2Config(**common), Qwen2ForCausalLM
    else:
        cfg, cls = Qwen3Config(attention_bias=False, **common), Qwen3ForCausalLM
    torch.manual_seed(seed)
    m = randomize(cls(cfg), seed).eval()
    m.save_pretrained(directory, **save_kwargs)
    return m


def hf_logits(m, ids):
    with torch.no_grad():
        return m(torch.tensor([ids])).logits[0].double()


class ModelTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp(prefix="kz-engine-")
        cls.models = {}
        for arch, tied in (("qwen2", True), ("qwen2", False), ("qwen3", True), ("qwen3", False)):
            d = os.path.join(cls.tmp, f"{arch}-{'tied' if tied else 'untied'}")
            cls.models[(arch, tied)] = (make_hf_model(arch, d, tied, seed=len(cls.models)), d)
        rng = random.Random(7)
        cls.prompts = [[rng.randrange(384) for _ in range(n)] for n in (9, 3, 17, 1)]

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.tmp, ignore_errors=True)

    def test_prefill_logits_batch_of_different_lengths(self):
        for (arch, tied), (m, d) in self.models.items():
            with self.subTest(arch=arch, tied=tied):
                ours = probe({"op": "prefill_logits", "model": d, "prompts": self.prompts})["logits"]
                for ids, got in zip(self.prompts, ours):
                    diff = (torch.tensor(got, dtype=torch.float64) - hf_logits(m, ids)).abs().max().item()
                    self.assertLess(diff, LOGIT_ATOL)

    def test_kv_cache_decode_logits(self):
        rng = random.Random(3)
        forced = [[rng.randrange(384) for _ in range(12)] for _ in self.prompts]
        for (arch, tied), (m, d) in self.models.items():
            with self.subTest(arch=arch, tied=tied):
                ours = probe({"op": "decode_logits", "model": d, "prompts": self.prompts, "forced": forced})["logits"]
                for ids, f, got in zip(self.prompts, forced, ours):
                    ref = hf_logits(m, ids + f)[len(ids) - 1:]  # the prompt's last position, then one per forced token
                    diff = (torch.tensor(got, dtype=torch.float64) - ref).abs().max().item()
                    self.assertLess(diff, LOGIT_ATOL)

    def test_greedy_generation_matches_generate(self):
        for (arch, tied), (m, d) in self.models.items():
            with self.subTest(arch=arch, tied=tied):
                ours = probe({"op": "generate", "model": d, "prompts": self.prompts, "max_new_tokens": 32,
                              "temperature": 0})["completions"]
                for ids, c in zip(self.prompts, ours):
                    m.generation_config.eos_token_id = None
                    with torch.no_grad():
                        out = m.generate(torch.tensor([ids]), attention_mask=torch.ones(1, len(ids), dtype=torch.long),
                                         max_new_tokens=32, do_sample=False, pad_token_id=0)
                    self.assertEqual(c["tokens"], out[0, len(ids):].tolist())
                    ref_lp = [torch.log_softmax(l, -1)[t].item() for l, t in
                              zip(hf_logits(m, ids + c["tokens"])[len(ids) - 1:-1], c["tokens"])]
                    self.assertLess(max(abs(a - b) for a, b in zip(c["logprobs"], ref_lp)), 1e-4)

    def test_sampling_is_seeded_and_honours_stop_tokens(self):
        _, d = self.models[("qwen2", True)]
        req = {"op": "generate", "model": d, "prompts": self.prompts, "max_new_tokens": 24, "temperature": 1.0,
               "top_p": 0.9, "top_k": 50, "seed": 11}
        a, b = probe(req)["completions"], probe(req)["completions"]
        self.assertEqual(a, b)
        c = probe({**req, "seed": 12})["completions"]
        self.assertNotEqual([x["tokens"] for x in a], [x["tokens"] for x in c])
        stop = a[0]["tokens"][5]
        s = probe({**req, "stop_ids": [stop]})["completions"][0]
        self.assertTrue(s["stopped"])
        self.assertEqual(s["tokens"][-1], stop)
        self.assertNotIn(stop, s["tokens"][:-1])

    def test_completion_logprobs(self):
        for (arch, tied), (m, d) in self.models.items():
            with self.subTest(arch=arch, tied=tied):
                prompt, completion = self.prompts[0], self.prompts[2]
                ours = probe({"op": "score", "model": d, "prompt": prompt, "completion": completion})["logprobs"]
                logits = hf_logits(m, prompt + completion)
                ref = torch.log_softmax(logits[len(prompt) - 1:-1], -1).gather(1, torch.tensor(completion)[:, None])[:, 0]
                self.assertLess((torch.tensor(ours, dtype=torch.float64) - ref).abs().max().item(), 1e-4)

    def test_config_forms_and_sharded_checkpoints(self):
        m, d = self.models[("qwen3", False)]
        cfg = read_json(os.path.join(d, "config.json"))
        variants = {}
        legacy = dict(cfg)
        rp = legacy.pop("rope_parameters", None)
        legacy["rope_theta"] = (rp or {}).get("rope_theta", cfg.get("rope_theta", 10000.0))
        modern = dict(cfg)
        modern.pop("rope_theta", None)
        modern["rope_parameters"] = {"rope_type": "default", "rope_theta": legacy["rope_theta"]}
        for name, c in (("legacy", legacy), ("modern", modern)):
            v = os.path.join(self.tmp, f"cfg-{name}")
            shutil.copytree(d, v)
            write_json(os.path.join(v, "config.json"), c)
            variants[name] = v
        sharded = os.path.join(self.tmp, "sharded")
        m.save_pretrained(sharded, max_shard_size="100KB")
        self.assertTrue(os.path.exists(os.path.join(sharded, "model.safetensors.index.json")))
        variants["sharded"] = sharded
        ref = hf_logits(m, self.prompts[0])
        for name, v in variants.items():
            with self.subTest(variant=name):
                got = probe({"op": "prefill_logits", "model": v, "prompts": [self.prompts[0]]})["logits"][0]
                self.assertLess((torch.tensor(got, dtype=torch.float64) - ref).abs().max().item(), LOGIT_ATOL)

    def test_init_model_loads_in_transformers(self):
        from transformers import AutoModelForCausalLM
        for arch in ("qwen2", "qwen3"):
            with self.subTest(arch=arch):
                d = os.path.join(self.tmp, f"init-{arch}")
                run([KZ, "init-model", "--arch", arch, "--preset", "tiny", "--tokenizer", TOKENIZER_DIR, "--out", d,
                     "--seed", "5"])
                m = AutoModelForCausalLM.from_pretrained(d, dtype=torch.float32).eval()
                self.assertEqual(type(m).__name__, "Qwen2ForCausalLM" if arch == "qwen2" else "Qwen3ForCausalLM")
                ids = [9707, 11, 1879, 0, 707, 282, 2075]
                got = probe({"op": "prefill_logits", "model": d, "prompts": [ids]})["logits"][0]
                self.assertLess((torch.tensor(got, dtype=torch.float64) - hf_logits(m, ids)).abs().max().item(), LOGIT_ATOL)
                p = run([KZ, "generate", "--model", d, "--prompt", "def relu(x):", "--max-new-tokens", "5", "--json",
                         "--temperature", "0"])
                line = json.loads(lines(p.stdout)[-1])
                self.assertEqual(len(line["token_ids"]), 5)
                self.assertEqual(len(line["logprobs"]), 5)


def peft_name(name):
    return name.replace(".default", "")


class TrainingTest(unittest.TestCase):
    """One LoRA step (loss, gradients, AdamW update) against transformers + peft; saved adapters and
    merged checkpoints load in peft and transformers; full fine-tuning gradients; recomputation,
    chunking and accumulation change nothing."""

    LR, CLIP = 1e-2, 0.5

    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp(prefix="kz-train-")
        cls.base_dir = os.path.join(cls.tmp, "base")
        make_hf_model("qwen2", cls.base_dir, tied=False, seed=3)
        cls.adapter_dir = os.path.join(cls.tmp, "adapter")
        cls.save_adapter(cls.adapter_dir)
        rng = random.Random(21)
        B, T = 4, 14
        cls.ids = [[rng.randrange(384) for _ in range(T)] for _ in range(B)]
        lengths = [14, 11, 14, 9]
        cls.valid = [[1 if t < L else 0 for t in range(T)] for L in lengths]
        prompt = [5, 3, 6, 4]  # completion starts here
        cls.weights = [[(rng.uniform(-1, 2) if prompt[b] <= t < lengths[b] else 0.0) for t in range(T)] for b in range(B)]

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.tmp, ignore_errors=True)

    @classmethod
    def peft_model(cls, adapter=None, targets=("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj")):
        from peft import LoraConfig, PeftModel, get_peft_model
        from transformers import AutoModelForCausalLM
        base = AutoModelForCausalLM.from_pretrained(cls.base_dir, dtype=torch.float32)
        if adapter:
            return PeftModel.from_pretrained(base, adapter, is_trainable=True)
        torch.manual_seed(0)
        return get_peft_model(base, LoraConfig(r=4, lora_alpha=8, lora_dropout=0.0, target_modules=list(targets)))

    @classmethod
    def save_adapter(cls, directory, **kw):
        peft_model = cls.peft_model(**kw)
        g = torch.Generator().manual_seed(9)
        with torch.no_grad():
            for n, p in peft_model.named_parameters():
                if "lora_B" in n:  # peft starts B at zero; a random B makes every gradient non-trivial
                    p.copy_(torch.randn(p.shape, generator=g) * 0.05)
        peft_model.save_pretrained(directory)

    def hf_loss(self, model):
        ids = torch.tensor(self.ids)
        valid = torch.tensor(self.valid)
        w = torch.tensor(self.weights)[:, 1:]
        logits = model(input_ids=ids, attention_mask=valid).logits[:, :-1].float()
        lp = torch.log_softmax(logits, -1).gather(-1, ids[:, 1:, None])[..., 0]
        return -(w * lp).sum() / (w != 0).sum()

    def hf_lora_step(self, adapter=None):
        m = self.peft_model(adapter or self.adapter_dir)
        params = {peft_name(n): p for n, p in m.named_parameters() if p.requires_grad}
        loss = self.hf_loss(m)
        loss.backward()
        grads = {n: p.grad.clone() for n, p in params.items()}
        norm = torch.nn.utils.clip_grad_norm_(list(params.values()), self.CLIP)
        opt = torch.optim.AdamW(list(params.values()), lr=self.LR, weight_decay=0.0)
        opt.step()
        return m, loss.item(), grads, norm.item(), {n: p.detach().clone() for n, p in params.items()}

    def adamw_on(self, grads, adapter=None):
        """The adapter's parameters after clipping `grads` (ours, name -> flat list) and one
        torch.optim.AdamW step: what our optimizer must give from our own gradients."""
        m = self.peft_model(adapter or self.adapter_dir)
        params = {peft_name(n): p for n, p in m.named_parameters() if p.requires_grad}
        for n, p in params.items():
            p.grad = torch.tensor(grads[n], dtype=p.dtype).reshape(p.shape)
        torch.nn.utils.clip_grad_norm_(list(params.values()), self.CLIP)
        torch.optim.AdamW(list(params.values()), lr=self.LR, weight_decay=0.0).step()
        return {n: p.detach().clone() for n, p in params.items()}

    def assert_step_matches(self, ours, grads, after, adapter=None):
        """Gradients against peft's; the step against AdamW on our own gradients (tight: the optimizer's
        own arithmetic); the parameters after it against peft's (looser: AdamW's first step is
        lr * g / (|g| + eps), so an element whose gradient is near eps turns a last-bit difference in g,
        which CPUs with other GEMM kernels give, into up to ~1e-3 * lr)."""
        self.assertEqual(set(ours["grads"]), set(grads))
        expected = self.adamw_on(ours["grads"], adapter)
        for n in grads:
            self.assert_close(ours["grads"][n], grads[n], 1e-4, "grad " + n)
            self.assert_close(ours["params_after"][n], expected[n], 1e-6, "param (AdamW on our gradients) " + n)
            self.assert_close(ours["params_after"][n], after[n], 1e-2 * self.LR, "param " + n)

    def our_step(self, **kw):
        req = {"op": "train_step", "model": self.base_dir, "adapter": self.adapter_dir, "ids": self.ids,
               "valid": self.valid, "weights": self.weights, "lr": self.LR, "max_grad_norm": self.CLIP, **kw}
        return probe(req)

    def assert_close(self, ours, ref, tol, what):
        got = torch.tensor(ours, dtype=torch.float64)
        ref = ref.reshape(-1).double()
        err = (got - ref).abs().max().item()
        self.assertLess(err, tol * max(1.0, ref.abs().max().item()), f"{what}: max error {err:.3g}")

    def test_lora_step_matches_peft(self):
        _, loss, grads, norm, after = self.hf_lora_step()
        for variant in ({}, {"recompute": True, "chunk": 5}, {"scored": "weighted", "chunk": 3}):
            with self.subTest(**variant):
                ours = self.our_step(**variant)
                self.assertAlmostEqual(ours["loss"], loss, delta=1e-5)
                self.assertAlmostEqual(ours["grad_norm"], norm, delta=1e-5 * max(1, norm))
                self.assert_step_matches(ours, grads, after)

    def test_lora_on_some_layers_of_a_fused_projection_matches_peft(self):
        # q and v adapted but not k, up but not gate, neither o nor down: the adapters' updates must
        # land in their own columns of the one q|k|v (gate|up) product.
        adapter = os.path.join(self.tmp, "adapter-some")
        self.save_adapter(adapter, targets=("q_proj", "v_proj", "up_proj"))
        _, loss, grads, norm, after = self.hf_lora_step(adapter)
        self.assertEqual(len(grads), 2 * 3 * 2)  # A and B of 3 layers in each of the 2 decoder layers
        for variant in ({}, {"recompute": True}):
            with self.subTest(**variant):
                ours = self.our_step(adapter=adapter, **variant)
                self.assertAlmostEqual(ours["loss"], loss, delta=1e-5)
                self.assert_step_matches(ours, grads, after, adapter)

    def test_lora_in_base_dtype_matches_peft_under_autocast(self):
        # A bf16 base with fp32 adapters: lora_in_base_dtype computes the adapters' products in bf16,
        # as peft does under torch.autocast (Hugging Face Trainer with bf16); off, in fp32 as peft
        # does without it. bf16 sums in other orders differ in the last bits, so the gradients are
        # compared by direction and size (both variants come within 1e-3 and 1% here).
        from peft import PeftModel
        from transformers import AutoModelForCausalLM
        base = AutoModelForCausalLM.from_pretrained(self.base_dir, dtype=torch.bfloat16)
        m = PeftModel.from_pretrained(base, self.adapter_dir, is_trainable=True)
        params = {peft_name(n): p for n, p in m.named_parameters() if p.requires_grad}
        for p in params.values():
            p.data = p.data.float()
        with torch.autocast("cpu", dtype=torch.bfloat16):
            loss = self.hf_loss(m)
        loss.backward()
        autocast = {n: p.grad.double().reshape(-1) for n, p in params.items()}
        ours = {flag: self.our_step(dtype="bfloat16", lora_in_base_dtype=flag) for flag in (True, False)}
        self.assertAlmostEqual(ours[True]["loss"], loss.item(), delta=2e-2 * max(1.0, abs(loss.item())))
        differs = False
        for n, ref in autocast.items():
            got = torch.tensor(ours[True]["grads"][n], dtype=torch.float64)
            cos = torch.nn.functional.cosine_similarity(got, ref, dim=0).item()
            self.assertGreater(cos, 0.999, f"grad {n}: cosine {cos:.4f} to peft under autocast")
            self.assertLess(abs(got.norm().item() / ref.norm().item() - 1), 0.02, f"grad {n}: norm")
            differs |= ours[True]["grads"][n] != ours[False]["grads"][n]
        self.assertTrue(differs, "lora_in_base_dtype changed no gradient: the flag is not applied")

    def test_accumulation_equals_one_batch(self):
        # Every row weights the same number of tokens (2..8, inside every row's length), so the two
        # micro-batches' token-normalised losses average to the whole batch's.
        ids, valid = self.ids, self.valid
        weights = [[(1.0 if 2 <= t < 9 else 0.0) * (b + 1) for t in range(len(ids[0]))] for b in range(len(ids))]
        base = {"op": "train_step", "model": self.base_dir, "adapter": self.adapter_dir, "ids": ids, "valid": valid,
                "weights": weights, "lr": self.LR, "max_grad_norm": 0}
        whole, split = probe(base), probe({**base, "micro_batches": 2})
        for n in whole["grads"]:
            self.assert_close(split["grads"][n], torch.tensor(whole["grads"][n]), 1e-5, "accumulated grad " + n)

    def test_saved_adapter_and_merged_checkpoint_load(self):
        from peft import PeftModel
        from transformers import AutoModelForCausalLM
        hf_after, *_ = self.hf_lora_step()
        adapter, merged = os.path.join(self.tmp, "after-adapter"), os.path.join(self.tmp, "after-merged")
        self.our_step(save_adapter=adapter, save_merged=merged)
        ids = torch.tensor([self.ids[0]])
        with torch.no_grad():
            ref = hf_after(input_ids=ids).logits[0].double()
            base = AutoModelForCausalLM.from_pretrained(self.base_dir, dtype=torch.float32)
            loaded = PeftModel.from_pretrained(base, adapter).eval()
            self.assertLess((loaded(input_ids=ids).logits[0].double() - ref).abs().max().item(), 1e-4)
            m = AutoModelForCausalLM.from_pretrained(merged, dtype=torch.float32).eval()
            self.assertLess((m(input_ids=ids).logits[0].double() - ref).abs().max().item(), 1e-4)
        ours = probe({"op": "prefill_logits", "model": self.base_dir, "adapter": adapter, "prompts": [self.ids[0]]})
        self.assertLess((torch.tensor(ours["logits"][0], dtype=torch.float64) - ref).abs().max().item(), LOGIT_ATOL)

    def test_exact_resume_from_trainer_state(self):
        straight = self.our_step(steps=3)
        first_adapter, state = os.path.join(self.tmp, "resume-adapter"), os.path.join(self.tmp, "trainer_state.pt")
        first = self.our_step(steps=2, save_adapter=first_adapter, save_state=state)
        self.assertEqual(first["optimizer_steps"], 2)
        resumed = self.our_step(steps=1, adapter=first_adapter, load_state=state)
        self.assertEqual(resumed["optimizer_steps"], 3)
        for n, v in straight["params_after"].items():
            self.assertEqual(resumed["params_after"][n], v, n)  # bit-identical
        p = run([PROBE], json.dumps({"op": "train_step", "model": self.base_dir, "adapter": self.adapter_dir,
                                     "ids": self.ids, "valid": self.valid, "weights": self.weights,
                                     "load_state": os.path.join(self.tmp, "adapter", "adapter_config.json")}), check=False)
        self.assertEqual(p.returncode, 2)
        self.assertIn("not a trainer state file", p.stderr)

    def test_left_padded_rows_are_refused(self):
        valid = [list(reversed(r)) for r in self.valid]
        p = run([PROBE], json.dumps({"op": "train_step", "model": self.base_dir, "adapter": self.adapter_dir,
                                     "ids": self.ids, "valid": valid, "weights": self.weights}), check=False)
        self.assertEqual(p.returncode, 2)
        self.assertIn("right-padded", p.stderr)

    def test_disabled_adapter_is_the_base_model(self):
        from transformers import AutoModelForCausalLM
        base = AutoModelForCausalLM.from_pretrained(self.base_dir, dtype=torch.float32).eval()
        off = probe({"op": "prefill_logits", "model": self.base_dir, "adapter": self.adapter_dir, "lora_enabled": False,
                     "prompts": [self.ids[0]]})["logits"][0]
        on = probe({"op": "prefill_logits", "model": self.base_dir, "adapter": self.adapter_dir,
                    "prompts": [self.ids[0]]})["logits"][0]
        ref = hf_logits(base, self.ids[0])
        self.assertLess((torch.tensor(off, dtype=torch.float64) - ref).abs().max().item(), LOGIT_ATOL)
        self.assertGreater((torch.tensor(on, dtype=torch.float64) - ref).abs().max().item(), 1e-3)

    def test_full_finetuning_gradients(self):
        from transformers import AutoModelForCausalLM
        m = AutoModelForCausalLM.from_pretrained(self.base_dir, dtype=torch.float32)
        loss = self.hf_loss(m)
        loss.backward()
        names = ["model.embed_tokens.weight", "lm_head.weight", "model.layers.1.self_attn.q_proj.bias",
                 "model.layers.0.mlp.down_proj.weight", "model.norm.weight", "model.layers.0.input_layernorm.weight"]
        params = dict(m.named_parameters())
        for variant in ({}, {"recompute": True, "chunk": 3}, {"scored": "weighted"}):
            with self.subTest(**variant):
                ours = probe({"op": "train_step", "model": self.base_dir, "ids": self.ids, "valid": self.valid,
                              "weights": self.weights, "full": True, "report": names, "lr": 1e-3, **variant})
                self.assertAlmostEqual(ours["loss"], loss.item(), delta=1e-5)
                for n in names:
                    self.assert_close(ours["grads"][n], params[n].grad, 1e-4, "grad " + n)


@unittest.skipUnless(os.environ.get("KZ_ENGINE_DEVICE", "cpu").startswith("cuda"), "GPU test (KZ_ENGINE_DEVICE=cuda)")
class GpuBf16Test(unittest.TestCase):
    """bf16 on the GPU: our logits are as close to the fp32 reference as transformers' own bf16 logits."""

    def test_bf16_logits_match_transformers(self):
        """Prefill and KV-cache decode, on the engine's CUDA kernels and on ATen's."""
        dev = os.environ["KZ_ENGINE_DEVICE"]
        rng = random.Random(5)
        prompts = [[rng.randrange(384) for _ in range(n)] for n in (33, 7, 64)]
        forced = [[rng.randrange(384) for _ in range(16)] for _ in prompts]
        with tempfile.TemporaryDirectory() as tmp:
            for arch, fused in (("qwen2", True), ("qwen3", True), ("qwen2", False), ("qwen3", False)):
                with self.subTest(arch=arch, fused=fused):
                    d = os.path.join(tmp, arch)
                    m = make_hf_model(arch, d, tied=False, dims=GPU_DIMS[arch])
                    reply = probe({"op": "decode_logits", "model": d, "prompts": prompts, "forced": forced,
                                   "device": dev, "dtype": "bfloat16", "fused": fused})
                    self.assertEqual(reply["fused"], fused and reply["fused_built"])
                    ours = reply["logits"]
                    ref32 = m.to(dev)
                    m16 = make_hf_model(arch, os.path.join(tmp, arch + "-copy"), tied=False,
                                        dims=GPU_DIMS[arch]).to(dev, torch.bfloat16)
                    for ids, f, got in zip(prompts, forced, ours):
                        x = torch.tensor([ids + f], device=dev)
                        with torch.no_grad():
                            r32 = ref32(x).logits[0, len(ids) - 1:].double().cpu()
                            r16 = m16(x).logits[0, len(ids) - 1:].double().cpu()
                        got = torch.tensor(got, dtype=torch.float64)
                        # bf16 tolerance measured by transformers' own bf16 error on the same model.
                        hf_err = (r16 - r32).abs().max().item()
                        our_err = (got - r32).abs().max().item()
                        scale = r32.abs().max().item()
                        self.assertLess(our_err, 2 * hf_err + 1e-3 * scale, f"ours {our_err:.4g} vs transformers bf16 {hf_err:.4g}")
                        # Where fp32's top token leads by more than twice bf16's error, ours must pick
                        # it (elsewhere random weights leave ties that bf16 rounding decides).
                        top2 = r32.topk(2, -1).values
                        clear = (top2[:, 0] - top2[:, 1]) > 2 * max(hf_err, our_err)
                        self.assertTrue(bool((got.argmax(-1) == r32.argmax(-1))[clear].all()), "a clear top token differs")

    def test_cuda_graph_decode_equals_eager(self):
        dev = os.environ["KZ_ENGINE_DEVICE"]
        rng = random.Random(6)
        prompts = [[rng.randrange(384) for _ in range(n)] for n in (5, 19, 11)]
        with tempfile.TemporaryDirectory() as tmp:
            make_hf_model("qwen3", tmp, tied=True, dims=GPU_DIMS["qwen3"])
            req = {"op": "generate", "model": tmp, "prompts": prompts, "max_new_tokens": 40, "temperature": 0.8,
                   "seed": 4, "device": dev, "dtype": "bfloat16"}
            graph = probe({**req, "cuda_graph": True})["completions"]
            eager = probe({**req, "cuda_graph": False})["completions"]
            self.assertEqual([c["tokens"] for c in graph], [c["tokens"] for c in eager])
            for a, b in zip(graph, eager):
                self.assertLess(max(abs(x - y) for x, y in zip(a["logprobs"], b["logprobs"])), 1e-3)


    def test_lora_step_on_fused_kernels_matches_aten(self):
        """A LoRA step in bf16 with recomputation: SiLU x up on the engine's kernels (forward and
        backward) against ATen's ops; nothing else differs between the two."""
        from peft import LoraConfig, get_peft_model
        from transformers import AutoModelForCausalLM
        dev = os.environ["KZ_ENGINE_DEVICE"]
        rng = random.Random(8)
        with tempfile.TemporaryDirectory() as tmp:
            base, adapter = os.path.join(tmp, "base"), os.path.join(tmp, "adapter")
            make_hf_model("qwen2", base, tied=False, dims=GPU_DIMS["qwen2"])
            torch.manual_seed(0)
            pm = get_peft_model(AutoModelForCausalLM.from_pretrained(base, dtype=torch.float32), LoraConfig(
                r=8, lora_alpha=16, lora_dropout=0.0,
                target_modules=["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"]))
            with torch.no_grad():
                for n, p in pm.named_parameters():
                    if "lora_B" in n:  # B = 0 would leave A without gradient
                        p.normal_(0.0, 0.05)
            pm.save_pretrained(adapter)
            B, T = 3, 40
            ids = [[rng.randrange(384) for _ in range(T)] for _ in range(B)]
            weights = [[(rng.uniform(-1, 2) if t >= 10 else 0.0) for t in range(T)] for _ in range(B)]
            req = {"op": "train_step", "model": base, "adapter": adapter, "ids": ids, "valid": [[1] * T] * B,
                   "weights": weights, "lr": 1e-3, "max_grad_norm": 1.0, "device": dev, "dtype": "bfloat16",
                   "recompute": True}
            fused, aten = probe({**req, "fused": True}), probe({**req, "fused": False})
            self.assertAlmostEqual(fused["loss"], aten["loss"], delta=1e-2 * max(1.0, abs(aten["loss"])))
            self.assertEqual(set(fused["grads"]), set(aten["grads"]))
            for n, ref in aten["grads"].items():
                ref = torch.tensor(ref, dtype=torch.float64)
                got = torch.tensor(fused["grads"][n], dtype=torch.float64)
                cos = torch.nn.functional.cosine_similarity(got, ref, dim=0).item()
                self.assertGreater(cos, 0.999, f"grad {n}: cosine {cos:.5f}")
                self.assertLess(abs(got.norm().item() / ref.norm().item() - 1), 0.02, f"grad {n}: norm")


class BadCheckpointTest(unittest.TestCase):
    """Every bad input gets exit code 2 and a one-line reason that names the cause."""

    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp(prefix="kz-bad-")
        cls.good = os.path.join(cls.tmp, "good")
        make_hf_model("qwen2", cls.good, tied=False)
        for f in ("tokenizer.json", "tokenizer_config.json"):
            shutil.copy(os.path.join(TOKENIZER_DIR, f), cls.good)
        # A vocabulary of 384 cannot hold the real tokenizer's ids: score with a plain-ASCII prompt
        # through the probe instead of the CLI where ids matter.

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.tmp, ignore_errors=True)

    def variant(self, name):
        d = os.path.join(self.tmp, name)
        shutil.copytree(self.good, d)
        return d

    def expect_error(self, d, *needles):
        p = run([PROBE], json.dumps({"op": "prefill_logits", "model": d, "prompts": [[1, 2, 3]]}), check=False)
        self.assertEqual(p.returncode, 2, p.stdout)
        for n in needles:
            self.assertIn(n, p.stderr)
        self.assertEqual(len(p.stderr.strip().splitlines()), 1, p.stderr)

    def rewrite_safetensors(self, d, edit_header=None, cut=None, length_override=None):
        path = os.path.join(d, "model.safetensors")
        with open(path, "rb") as f:
            raw = f.read()
        (n,) = struct.unpack("<Q", raw[:8])
        header, data = json.loads(raw[8:8 + n]), raw[8 + n:]
        if edit_header:
            edit_header(header)
        h = json.dumps(header).encode()
        out = struct.pack("<Q", length_override if length_override is not None else len(h)) + h + data
        with open(path, "wb") as f:
            f.write(out[:cut] if cut else out)

    def test_missing_files(self):
        self.expect_error(os.path.join(self.tmp, "nowhere"), "no config.json")
        d = self.variant("no-weights")
        os.remove(os.path.join(d, "model.safetensors"))
        self.expect_error(d, "no model.safetensors")

    def test_unsupported_architecture(self):
        d = self.variant("llama")
        cfg = read_json(os.path.join(d, "config.json"))
        cfg["architectures"], cfg["model_type"] = ["LlamaForCausalLM"], "llama"
        write_json(os.path.join(d, "config.json"), cfg)
        self.expect_error(d, "unsupported architecture", "LlamaForCausalLM")

    def test_invalid_config(self):
        d = self.variant("badjson")
        with open(os.path.join(d, "config.json"), "w") as f:
            f.write("{not json")
        self.expect_error(d, "config.json", "not valid JSON")
        d = self.variant("nofield")
        cfg = read_json(os.path.join(d, "config.json"))
        del cfg["hidden_size"]
        write_json(os.path.join(d, "config.json"), cfg)
        self.expect_error(d, "hidden_size")
        d = self.variant("yarn")
        cfg = read_json(os.path.join(d, "config.json"))
        cfg.pop("rope_parameters", None)
        cfg["rope_scaling"] = {"rope_type": "yarn", "factor": 4.0}
        write_json(os.path.join(d, "config.json"), cfg)
        self.expect_error(d, "unsupported RoPE type", "yarn")

    def test_missing_tensor(self):
        d = self.variant("missing-tensor")
        self.rewrite_safetensors(d, lambda h: h.pop("model.layers.1.mlp.up_proj.weight"))
        self.expect_error(d, "model.layers.1.mlp.up_proj.weight", "missing")

    def test_wrong_shape(self):
        d = self.variant("wrong-shape")

        def edit(h):
            t = h["model.norm.weight"]
            t["shape"] = [t["shape"][0] // 2, 2]
        self.rewrite_safetensors(d, edit)
        self.expect_error(d, "model.norm.weight", "shape")

    def test_truncated_file(self):
        d = self.variant("truncated")
        self.rewrite_safetensors(d, cut=-1000)
        self.expect_error(d, "model.safetensors", "outside")
        d = self.variant("tiny-file")
        with open(os.path.join(d, "model.safetensors"), "wb") as f:
            f.write(b"\x01\x02")
        self.expect_error(d, "truncated")

    def test_corrupted_header_size(self):
        d = self.variant("header-size")
        self.rewrite_safetensors(d, length_override=1 << 40)
        self.expect_error(d, "header size")

    def test_offsets_and_dtype(self):
        d = self.variant("offsets")

        def edit(h):
            t = h["model.embed_tokens.weight"]
            t["data_offsets"] = [t["data_offsets"][0], t["data_offsets"][1] + 4]
        self.rewrite_safetensors(d, edit)
        self.expect_error(d, "model.embed_tokens.weight")
        d = self.variant("dtype")
        self.rewrite_safetensors(d, lambda h: h["model.norm.weight"].update(dtype="F8_E9M9"))
        self.expect_error(d, "unsupported dtype", "F8_E9M9")

    def test_missing_shard(self):
        d = os.path.join(self.tmp, "shards")
        make_hf_model("qwen2", d, tied=True, max_shard_size="100KB")
        index = read_json(os.path.join(d, "model.safetensors.index.json"))
        shard = sorted(set(index["weight_map"].values()))[-1]
        os.remove(os.path.join(d, shard))
        self.expect_error(d, shard, "missing")


if __name__ == "__main__":
    unittest.main()
