"""The models of bench/apps, with random weights (nothing is downloaded).

ResNet-50 comes from torchvision when it is installed and is built here otherwise (the same
layers: bottleneck blocks 3-4-6-3, widths 64-128-256-512, expansion 4). The BERT-style encoder
is PyTorch's own TransformerEncoder (BERT-base: 12 layers, width 768, 12 heads, FFN 3072).
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


MODELS = ("resnet50", "bert")


def make(name, batch, device="cuda", seq=128):
    """The model (eval or train mode is the caller's) and one random input batch."""
    if name == "resnet50":
        return resnet50().to(device), torch.randn(batch, 3, 224, 224, device=device)
    if name == "bert":
        return Encoder().to(device), torch.randint(0, 30522, (batch, seq), device=device)
    raise ValueError(f"unknown model '{name}' (known: {', '.join(MODELS)})")
