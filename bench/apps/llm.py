"""The LLM decode service and the transformer training job of bench/apps, at random weights
(nothing is downloaded): a Llama-style decoder (RMSNorm, rotary positions, SwiGLU MLP) with a
static KV cache.

A request is a batch of B sequences: a prefill of `prompt` tokens, then `new_tokens` decode steps,
each one token per sequence; the host reads every step's tokens (a synchronisation per token, as a
streaming server does), so each token has a time. Decode steps run eagerly or, with `graph`, as
one CUDA graph replay each (the step captured once over the static cache: its input token and
position are device tensors the step itself advances); the prefill runs eagerly in both.

Two implementations of the same model: transformers' LlamaForCausalLM with its StaticCache
(`impl="transformers"`), and a hand-rolled one (`impl="hand"`) whose step is capture-safe by
construction (positions only as device tensors, the cache written with index_copy_, the causal
mask a comparison of position tensors). `impl="auto"` takes transformers when it builds, runs and
(for `graph`) captures, else the hand-rolled model; which one ran is the service's `impl`.

The training job (`Trainer`, be_train.py's `llama`): the same configuration, causal LM loss over
random tokens of `train_seq` positions, bf16 autocast; transformers' model when it imports, else
the hand-rolled one.
"""
import inspect
import time

import torch
import torch.nn.functional as F
from torch import nn

CONFIG = {"vocab": 32000, "hidden": 1024, "layers": 8, "heads": 16, "ffn": 2816, "prompt": 512, "new_tokens": 128,
          "train_seq": 512}


def parse_config(text):
    """"key=value,..." over CONFIG's keys -> a full configuration."""
    cfg = dict(CONFIG)
    for part in (text or "").split(","):
        if not part:
            continue
        k, _, v = part.partition("=")
        if k not in cfg:
            raise ValueError(f"llm config: unknown key '{k}' (known: {', '.join(cfg)})")
        cfg[k] = int(v)
    if cfg["hidden"] % cfg["heads"]:
        raise ValueError("llm config: hidden must be a multiple of heads")
    return cfg


def _rms_norm(x, weight, eps=1e-5):
    if hasattr(F, "rms_norm"):
        return F.rms_norm(x, (x.shape[-1],), weight, eps)
    return x * torch.rsqrt(x.float().pow(2).mean(-1, keepdim=True) + eps).to(x.dtype) * weight


def _rotate_half(x):
    half = x.shape[-1] // 2
    return torch.cat((-x[..., half:], x[..., :half]), dim=-1)


class _Layer(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        h = cfg["hidden"]
        self.heads, self.head_dim = cfg["heads"], h // cfg["heads"]
        self.norm1, self.norm2 = nn.Parameter(torch.ones(h)), nn.Parameter(torch.ones(h))
        self.qkv = nn.Linear(h, 3 * h, bias=False)
        self.o = nn.Linear(h, h, bias=False)
        self.gate_up = nn.Linear(h, 2 * cfg["ffn"], bias=False)
        self.down = nn.Linear(cfg["ffn"], h, bias=False)

    def attend(self, x, cos, sin, attention):
        b, q, h = x.shape
        qkv = self.qkv(_rms_norm(x, self.norm1)).view(b, q, 3, self.heads, self.head_dim)
        qs, ks, vs = (t.transpose(1, 2) for t in qkv.unbind(2))
        qs = qs * cos + _rotate_half(qs) * sin
        ks = ks * cos + _rotate_half(ks) * sin
        a = attention(qs, ks, vs)
        x = x + self.o(a.transpose(1, 2).reshape(b, q, h))
        g, u = self.gate_up(_rms_norm(x, self.norm2)).chunk(2, dim=-1)
        return x + self.down(F.silu(g) * u)


class HandLlama(nn.Module):
    """The hand-rolled model: `step(ids, pos)` over a static cache of `max_len` positions
    (inference), `forward(ids)` causal over the whole sequence (training)."""

    def __init__(self, cfg, max_len):
        super().__init__()
        self.cfg = cfg
        h, hd = cfg["hidden"], cfg["hidden"] // cfg["heads"]
        self.embed = nn.Embedding(cfg["vocab"], h)
        self.layers = nn.ModuleList(_Layer(cfg) for _ in range(cfg["layers"]))
        self.norm = nn.Parameter(torch.ones(h))
        self.head = nn.Linear(h, cfg["vocab"], bias=False)
        inv = 1.0 / (10000.0 ** (torch.arange(0, hd, 2).float() / hd))
        freqs = torch.outer(torch.arange(max_len).float(), inv)
        self.register_buffer("cos", torch.cat([freqs.cos()] * 2, dim=-1), persistent=False)
        self.register_buffer("sin", torch.cat([freqs.sin()] * 2, dim=-1), persistent=False)
        self.register_buffer("key_pos", torch.arange(max_len), persistent=False)
        self.max_len = max_len
        self.k_cache, self.v_cache = [], []

    def allocate_cache(self, batch, device, dtype):
        hd = self.cfg["hidden"] // self.cfg["heads"]
        shape = (batch, self.cfg["heads"], self.max_len, hd)
        self.k_cache = [torch.zeros(shape, device=device, dtype=dtype) for _ in self.layers]
        self.v_cache = [torch.zeros(shape, device=device, dtype=dtype) for _ in self.layers]

    def step(self, ids, pos):
        """Logits of the last position, writing the keys and values of positions `pos` (a device
        tensor) into the cache and attending to every cached position at or before each query's."""
        x = self.embed(ids)
        cos = self.cos.index_select(0, pos)[None, None].to(x.dtype)
        sin = self.sin.index_select(0, pos)[None, None].to(x.dtype)
        mask = (self.key_pos[None, :] <= pos[:, None])[None, None]  # (1, 1, q, max_len)
        for layer, kc, vc in zip(self.layers, self.k_cache, self.v_cache):
            def attention(q, k, v, kc=kc, vc=vc):
                kc.index_copy_(2, pos, k)
                vc.index_copy_(2, pos, v)
                return F.scaled_dot_product_attention(q, kc, vc, attn_mask=mask)
            x = layer.attend(x, cos, sin, attention)
        return self.head(_rms_norm(x[:, -1], self.norm))

    def forward(self, ids):
        x = self.embed(ids)
        n = ids.shape[1]
        cos, sin = self.cos[:n][None, None].to(x.dtype), self.sin[:n][None, None].to(x.dtype)
        for layer in self.layers:
            x = layer.attend(x, cos, sin, lambda q, k, v: F.scaled_dot_product_attention(q, k, v, is_causal=True))
        return self.head(_rms_norm(x, self.norm))


def _llama_config(cfg, max_len):
    from transformers import LlamaConfig
    return LlamaConfig(vocab_size=cfg["vocab"], hidden_size=cfg["hidden"], intermediate_size=cfg["ffn"],
                       num_hidden_layers=cfg["layers"], num_attention_heads=cfg["heads"], num_key_value_heads=cfg["heads"],
                       max_position_embeddings=max_len, use_cache=True)


def _transformers_model(cfg, max_len):
    from transformers import LlamaForCausalLM
    config = _llama_config(cfg, max_len)
    try:
        config._attn_implementation = "sdpa"
    except AttributeError:
        pass
    return LlamaForCausalLM(config), config


def _static_cache(config, batch, max_len, device, dtype):
    """transformers' StaticCache, whichever constructor this version has (the argument names
    moved between releases: max_batch_size / batch_size, device and dtype dropped in the lazy
    layers of 4.5x and later)."""
    from transformers import StaticCache
    params = inspect.signature(StaticCache.__init__).parameters
    kw = {"config": config, "max_cache_len": max_len}
    if "batch_size" in params:
        kw["batch_size"] = batch
    elif "max_batch_size" in params:
        kw["max_batch_size"] = batch
    if "device" in params:
        kw["device"] = device
    if "dtype" in params:
        kw["dtype"] = dtype
    return StaticCache(**{k: v for k, v in kw.items() if k in params or k == "config"})


class _TransformersStep:
    """step(ids, pos) of transformers' model over its StaticCache (logits of the last position)."""

    def __init__(self, model, cache):
        self.model, self.cache = model, cache
        params = inspect.signature(model.forward).parameters
        self.extra = {}
        for name in ("logits_to_keep", "num_logits_to_keep"):
            if name in params:
                self.extra[name] = 1
                break

    def __call__(self, ids, pos):
        b = ids.shape[0]
        out = self.model(input_ids=ids, past_key_values=self.cache, cache_position=pos,
                         position_ids=pos[None].expand(b, -1), use_cache=True, **self.extra)
        return out.logits[:, -1]


class DecodeService:
    """One request per serve(): prefill, then `new_tokens` steps; returns the CLOCK_MONOTONIC
    time after the prefill and after each step."""

    def __init__(self, batch, graph, stream, cfg=None, impl="auto", seed=1):
        self.cfg = dict(cfg or CONFIG)
        self.batch, self.stream, self.graph_mode = batch, stream, graph
        self.max_len = self.cfg["prompt"] + self.cfg["new_tokens"]
        torch.manual_seed(seed)
        errors = []
        for choice in (("transformers", "hand") if impl == "auto" else (impl,)):
            try:
                self._build(choice)
                self._warm()
                self.impl = choice
                break
            except Exception as e:  # a version whose API or capture differs: the next implementation
                errors.append(f"{choice}: {type(e).__name__}: {e}")
                self.graph = None
                torch.cuda.synchronize()
        else:
            raise RuntimeError("no implementation of the decode service ran: " + "; ".join(errors))
        self.fallback_errors = errors

    def _build(self, impl):
        dev, dtype = torch.device("cuda"), torch.float16
        if impl == "transformers":
            model, config = _transformers_model(self.cfg, self.max_len)
            model = model.to(device=dev, dtype=dtype).eval()
            self.fwd = _TransformersStep(model, _static_cache(config, self.batch, self.max_len, dev, dtype))
        elif impl == "hand":
            model = HandLlama(self.cfg, self.max_len).to(device=dev, dtype=dtype).eval()
            model.allocate_cache(self.batch, dev, dtype)
            self.fwd = model.step
        else:
            raise ValueError(f"unknown implementation '{impl}' (transformers, hand, auto)")
        self.model = model
        self.prompt = torch.randint(0, self.cfg["vocab"], (self.batch, self.cfg["prompt"]), device=dev)
        self.prompt_pos = torch.arange(self.cfg["prompt"], device=dev)
        self.tok = torch.zeros((self.batch, 1), dtype=torch.long, device=dev)
        self.pos = torch.zeros((1,), dtype=torch.long, device=dev)
        self.tok_host = torch.zeros((self.batch, 1), dtype=torch.long, pin_memory=True)
        self.graph = None

    def _prefill(self):
        logits = self.fwd(self.prompt, self.prompt_pos)
        self.tok.copy_(logits.argmax(-1, keepdim=True))
        self.pos.fill_(self.cfg["prompt"])

    def _step(self):
        logits = self.fwd(self.tok, self.pos)
        self.tok.copy_(logits.argmax(-1, keepdim=True))
        self.pos.add_(1)

    def _warm(self):
        with torch.inference_mode(), torch.cuda.stream(self.stream):
            for _ in range(2):  # eager requests: kernels chosen, caches touched
                self._prefill()
                for _ in range(self.cfg["new_tokens"]):
                    self._step()
            self.stream.synchronize()
            if self.graph_mode:
                self._prefill()  # the capture records, it does not run: the position stays valid
                self.stream.synchronize()
                g = torch.cuda.CUDAGraph()
                with torch.cuda.graph(g, stream=self.stream):
                    self._step()
                self.graph = g
        self.stream.synchronize()
        for _ in range(2):
            self.serve()

    def serve(self):
        times = []
        with torch.inference_mode(), torch.cuda.stream(self.stream):
            self._prefill()
            self.tok_host.copy_(self.tok, non_blocking=True)
            self.stream.synchronize()
            times.append(time.monotonic())
            for _ in range(self.cfg["new_tokens"]):
                if self.graph is not None:
                    self.graph.replay()
                else:
                    self._step()
                self.tok_host.copy_(self.tok, non_blocking=True)
                self.stream.synchronize()
                times.append(time.monotonic())
        return times


class Trainer:
    """The transformer training job: causal LM loss over `train_seq` random tokens, bf16 autocast,
    SGD (be_train.py's loop)."""

    def __init__(self, batch, stream=None, cfg=None):
        self.cfg = dict(cfg or CONFIG)
        self.stream = stream or torch.cuda.Stream()
        n = self.cfg["train_seq"]
        self.x = torch.randint(0, self.cfg["vocab"], (batch, n), device="cuda")
        self.y = torch.randint(0, self.cfg["vocab"], (batch, n), device="cuda")
        try:
            model, _ = _transformers_model(self.cfg, n)
            self._use(model.to("cuda").train(), lambda ids: model(input_ids=ids, use_cache=False).logits, "transformers")
            self.step()  # a version whose API moved fails here, not in the run
        except Exception:  # transformers missing or different: the same model by hand
            model = HandLlama(self.cfg, n)
            self._use(model.to("cuda").train(), model, "hand")

    def _use(self, net, forward, impl):
        self.net, self.forward, self.impl = net, forward, impl
        self.opt = torch.optim.SGD(self.net.parameters(), lr=1e-3, momentum=0.9)

    def step(self):
        with torch.cuda.stream(self.stream):
            self.opt.zero_grad(set_to_none=True)
            with torch.autocast("cuda", dtype=torch.bfloat16):
                logits = self.forward(self.x)
                loss = F.cross_entropy(logits.reshape(-1, logits.shape[-1]).float(), self.y.reshape(-1))
            loss.backward()
            self.opt.step()
        self.stream.synchronize()
        return loss.detach()


def describe(cfg):
    params = cfg["layers"] * (4 * cfg["hidden"] ** 2 + 3 * cfg["hidden"] * cfg["ffn"]) + 2 * cfg["vocab"] * cfg["hidden"]
    return f"Llama-style, {cfg['layers']} layers, width {cfg['hidden']}, {cfg['heads']} heads, {params / 1e6:.0f}M parameters"
