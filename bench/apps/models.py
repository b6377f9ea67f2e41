"""The models of bench/apps, with random weights (nothing is downloaded).

ResNet-50 comes from torchvision when it is installed and is built here otherwise (the same
layers: bottleneck blocks 3-4-6-3, widths 64-128-256-512, expansion 4). The BERT-style encoder
is PyTorch's own TransformerEncoder (BERT-base: 12 layers, width 768, 12 heads, FFN 3072). The
decoder step (`gpt`) is one token of GPT-2-small-like generation with a KV cache: each of the
batch's sequences adds one token that attends to 256 cached positions (inference only).
"""
import torch
from torch import nn


class Bottleneck(nn.Module):
    expansion = 4

    def __init__(self, cin, width, stride):
        super().__init__()
        cout = width * self.expansion
        self.body = nn.Sequential(
            nn.Conv2d(cin, width, 1, bias=False), nn.BatchNorm2d(width), nn.ReLU(inplace=True),
            nn.Conv2d(width, width, 3, stride=stride, padding=1, bias=False), nn.BatchNorm2d(width),
            nn.ReLU(inplace=True),
            nn.Conv2d(width, cout, 1, bias=False), nn.BatchNorm2d(cout))
        self.down = None
        if stride != 1 or cin != cout:
            self.down = nn.Sequential(nn.Conv2d(cin, cout, 1, stride=stride, bias=False), nn.BatchNorm2d(cout))
        self.relu = nn.ReLU(inplace=True)

    def forward(self, x):
        skip = x if self.down is None else self.down(x)
        return self.relu(self.body(x) + skip)


class ResNet50(nn.Module):
    def __init__(self, classes=1000):
        super().__init__()
        layers = [nn.Conv2d(3, 64, 7, stride=2, padding=3, bias=False), nn.BatchNorm2d(64), nn.ReLU(inplace=True),
                  nn.MaxPool2d(3, stride=2, padding=1)]
        cin = 64
        for width, blocks, stride in ((64, 3, 1), (128, 4, 2), (256, 6, 2), (512, 3, 2)):
            for i in range(blocks):
                layers.append(Bottleneck(cin, width, stride if i == 0 else 1))
                cin = width * Bottleneck.expansion
        self.features = nn.Sequential(*layers)
        self.head = nn.Linear(cin, classes)

    def forward(self, x):
        return self.head(torch.flatten(nn.functional.adaptive_avg_pool2d(self.features(x), 1), 1))


def resnet50():
    try:
        import torchvision  # noqa: F401
        return torchvision.models.resnet50(weights=None)
    except ImportError:
        return ResNet50()


class Encoder(nn.Module):
    """BERT-base-like: token and position embeddings, 12 post-norm layers, a pooled classifier."""

    def __init__(self, vocab=30522, width=768, layers=12, heads=12, ffn=3072, max_len=512, classes=2):
        super().__init__()
        self.tokens = nn.Embedding(vocab, width)
        self.positions = nn.Embedding(max_len, width)
        layer = nn.TransformerEncoderLayer(width, heads, ffn, dropout=0.0, activation="gelu", batch_first=True)
        self.encoder = nn.TransformerEncoder(layer, layers, enable_nested_tensor=False)
        self.head = nn.Linear(width, classes)

    def forward(self, ids):
        pos = torch.arange(ids.shape[1], device=ids.device)
        h = self.encoder(self.tokens(ids) + self.positions(pos)[None])
        return self.head(h[:, 0])


class DecoderLayer(nn.Module):
    """Pre-norm decoder layer for one new token per sequence, its keys and values cached."""

    def __init__(self, width, heads, context, batch):
        super().__init__()
        self.heads = heads
        self.ln1, self.ln2 = nn.LayerNorm(width), nn.LayerNorm(width)
        self.qkv = nn.Linear(width, 3 * width)
        self.out = nn.Linear(width, width)
        self.fc1, self.fc2 = nn.Linear(width, 4 * width), nn.Linear(4 * width, width)
        hd = width // heads
        self.register_buffer("k_cache", torch.randn(batch, heads, context, hd))
        self.register_buffer("v_cache", torch.randn(batch, heads, context, hd))

    def forward(self, x):
        b, w = x.shape
        q, k, v = self.qkv(self.ln1(x)).split(w, dim=-1)
        q = q.view(b, self.heads, 1, w // self.heads)
        # The new key and value join the cache's (the cache itself is not grown: a fixed-size step).
        keys = torch.cat([self.k_cache[:, :, 1:], k.view(b, self.heads, 1, -1)], dim=2)
        values = torch.cat([self.v_cache[:, :, 1:], v.view(b, self.heads, 1, -1)], dim=2)
        a = nn.functional.scaled_dot_product_attention(q, keys, values)
        x = x + self.out(a.reshape(b, w))
        return x + self.fc2(nn.functional.gelu(self.fc1(self.ln2(x))))


class DecoderStep(nn.Module):
    """GPT-2-small-like (12 layers, width 768, 12 heads, vocabulary 50257): one generation step."""

    def __init__(self, batch, width=768, layers=12, heads=12, context=256, vocab=50257):
        super().__init__()
        self.tokens = nn.Embedding(vocab, width)
        self.layers = nn.ModuleList(DecoderLayer(width, heads, context, batch) for _ in range(layers))
        self.norm = nn.LayerNorm(width)
        self.head = nn.Linear(width, vocab, bias=False)

    def forward(self, ids):
        x = self.tokens(ids)
        for layer in self.layers:
            x = layer(x)
        return self.head(self.norm(x))


MODELS = ("resnet50", "bert", "gpt")
# With the LLM decode service and its training job (llm.py, which models.make does not build).
ALL = MODELS + ("llama",)


def make(name, batch, device="cuda", seq=128):
    """The model (eval or train mode is the caller's) and one random input batch."""
    if name == "resnet50":
        return resnet50().to(device), torch.randn(batch, 3, 224, 224, device=device)
    if name == "bert":
        return Encoder().to(device), torch.randint(0, 30522, (batch, seq), device=device)
    if name == "gpt":
        return DecoderStep(batch).to(device), torch.randint(0, 50257, (batch,), device=device)
    raise ValueError(f"unknown model '{name}' (known: {', '.join(MODELS)})")
