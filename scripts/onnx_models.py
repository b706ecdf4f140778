"""PyTorch models for thunder-onnx's fixtures (scripts/gen_onnx_fixtures.py, tiny) and peer
benchmark (benches/peer/onnx_peer.py, full size): a BERT encoder, GPT-2, a ResNet, a ViT, a small
CNN and a model mixing the remaining ops. Written out here so no model hub is needed."""

import math

import torch
import torch.nn as nn
import torch.nn.functional as F


class BertLayer(nn.Module):
    def __init__(self, hidden, heads, ffn):
        super().__init__()
        self.heads = heads
        self.q = nn.Linear(hidden, hidden)
        self.k = nn.Linear(hidden, hidden)
        self.v = nn.Linear(hidden, hidden)
        self.o = nn.Linear(hidden, hidden)
        self.ln1 = nn.LayerNorm(hidden, eps=1e-12)
        self.fc1 = nn.Linear(hidden, ffn)
        self.fc2 = nn.Linear(ffn, hidden)
        self.ln2 = nn.LayerNorm(hidden, eps=1e-12)

    def forward(self, x, bias):
        b, s, h = x.shape
        d = h // self.heads

        def split(t):
            return t.view(b, s, self.heads, d).transpose(1, 2)

        q, k, v = split(self.q(x)), split(self.k(x)), split(self.v(x))
        scores = torch.matmul(q, k.transpose(-1, -2)) / math.sqrt(d) + bias
        ctx = torch.matmul(scores.softmax(-1), v).transpose(1, 2).reshape(b, s, h)
        x = self.ln1(x + self.o(ctx))
        return self.ln2(x + self.fc2(F.gelu(self.fc1(x))))


class Bert(nn.Module):
    """A BERT/MiniLM encoder: embeddings, post-norm layers, erf GELU, additive mask."""

    def __init__(self, vocab, hidden, layers, heads, ffn, max_pos):
        super().__init__()
        self.word = nn.Embedding(vocab, hidden)
        self.pos = nn.Embedding(max_pos, hidden)
        self.typ = nn.Embedding(2, hidden)
        self.ln = nn.LayerNorm(hidden, eps=1e-12)
        self.layers = nn.ModuleList(BertLayer(hidden, heads, ffn) for _ in range(layers))

    def forward(self, input_ids, attention_mask):
        s = input_ids.shape[1]
        pos = torch.arange(s, device=input_ids.device).unsqueeze(0)
        x = self.word(input_ids) + self.pos(pos) + self.typ(torch.zeros_like(input_ids))
        x = self.ln(x)
        bias = (1.0 - attention_mask[:, None, None, :].to(x.dtype)) * -10000.0
        for layer in self.layers:
            x = layer(x, bias)
        return x


class Gpt2Block(nn.Module):
    def __init__(self, hidden, heads, max_pos):
        super().__init__()
        self.heads = heads
        self.ln1 = nn.LayerNorm(hidden)
        self.attn = nn.Linear(hidden, 3 * hidden)
        self.proj = nn.Linear(hidden, hidden)
        self.ln2 = nn.LayerNorm(hidden)
        self.fc = nn.Linear(hidden, 4 * hidden)
        self.out = nn.Linear(4 * hidden, hidden)
        mask = torch.tril(torch.ones(max_pos, max_pos, dtype=torch.bool))
        self.register_buffer("mask", mask.view(1, 1, max_pos, max_pos), persistent=False)

    def forward(self, x):
        b, s, h = x.shape
        d = h // self.heads
        q, k, v = self.attn(self.ln1(x)).split(h, dim=2)
        q, k, v = (t.view(b, s, self.heads, d).transpose(1, 2) for t in (q, k, v))
        w = torch.matmul(q, k.transpose(-1, -2)) / math.sqrt(d)
        w = torch.where(self.mask[:, :, :s, :s], w, torch.tensor(torch.finfo(w.dtype).min))
        a = torch.matmul(w.softmax(-1), v).transpose(1, 2).reshape(b, s, h)
        x = x + self.proj(a)
        y = self.fc(self.ln2(x))
        y = 0.5 * y * (1.0 + torch.tanh(math.sqrt(2.0 / math.pi) * (y + 0.044715 * torch.pow(y, 3.0))))
        return x + self.out(y)


class Gpt2(nn.Module):
    """GPT-2 as Hugging Face writes it: learned positions, causal mask buffer, tanh GELU, tied
    output projection."""

    def __init__(self, vocab, hidden, layers, heads, max_pos):
        super().__init__()
        self.wte = nn.Embedding(vocab, hidden)
        self.wpe = nn.Embedding(max_pos, hidden)
        self.blocks = nn.ModuleList(Gpt2Block(hidden, heads, max_pos) for _ in range(layers))
        self.ln = nn.LayerNorm(hidden)

    def forward(self, input_ids):
        s = input_ids.shape[1]
        pos = torch.arange(0, s, dtype=torch.long, device=input_ids.device)
        x = self.wte(input_ids) + self.wpe(pos)
        for blk in self.blocks:
            x = blk(x)
        return torch.matmul(self.ln(x), self.wte.weight.t())


class BasicBlock(nn.Module):
    def __init__(self, cin, cout, stride):
        super().__init__()
        self.c1 = nn.Conv2d(cin, cout, 3, stride, 1, bias=False)
        self.b1 = nn.BatchNorm2d(cout)
        self.c2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False)
        self.b2 = nn.BatchNorm2d(cout)
        self.down = None
        if stride != 1 or cin != cout:
            self.down = nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False), nn.BatchNorm2d(cout))

    def forward(self, x):
        y = F.relu(self.b1(self.c1(x)))
        y = self.b2(self.c2(y))
        return F.relu(y + (x if self.down is None else self.down(x)))


class Bottleneck(nn.Module):
    def __init__(self, cin, width, stride):
        super().__init__()
        cout = width * 4
        self.c1 = nn.Conv2d(cin, width, 1, bias=False)
        self.b1 = nn.BatchNorm2d(width)
        self.c2 = nn.Conv2d(width, width, 3, stride, 1, bias=False)
        self.b2 = nn.BatchNorm2d(width)
        self.c3 = nn.Conv2d(width, cout, 1, bias=False)
        self.b3 = nn.BatchNorm2d(cout)
        self.down = None
        if stride != 1 or cin != cout:
            self.down = nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False), nn.BatchNorm2d(cout))

    def forward(self, x):
        y = F.relu(self.b1(self.c1(x)))
        y = F.relu(self.b2(self.c2(y)))
        y = self.b3(self.c3(y))
        return F.relu(y + (x if self.down is None else self.down(x)))


class ResNet(nn.Module):
    """torchvision's ResNet layout: basic blocks (ResNet-18) or bottlenecks (ResNet-50)."""

    def __init__(self, widths=(64, 128, 256, 512), blocks=(2, 2, 2, 2), classes=1000,
                 bottleneck=False):
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, widths[0], 7, 2, 3, bias=False),
                                  nn.BatchNorm2d(widths[0]), nn.ReLU(), nn.MaxPool2d(3, 2, 1))
        layers, cin = [], widths[0]
        for i, (w, n) in enumerate(zip(widths, blocks)):
            for j in range(n):
                stride = 2 if (i > 0 and j == 0) else 1
                if bottleneck:
                    layers.append(Bottleneck(cin, w, stride))
                    cin = w * 4
                else:
                    layers.append(BasicBlock(cin, w, stride))
                    cin = w
        self.layers = nn.Sequential(*layers)
        self.fc = nn.Linear(cin, classes)

    def forward(self, x):
        x = self.layers(self.stem(x))
        return self.fc(torch.flatten(F.adaptive_avg_pool2d(x, 1), 1))


class SmallCnn(nn.Module):
    """A LeNet-style CNN with average pooling, sigmoid, clip (ReLU6) and a softmax head."""

    def __init__(self):
        super().__init__()
        self.c1 = nn.Conv2d(3, 6, 3, padding=1)
        self.c2 = nn.Conv2d(6, 8, 3, stride=2)
        self.fc = nn.Linear(8 * 3 * 3, 5)

    def forward(self, x):
        x = F.avg_pool2d(torch.sigmoid(self.c1(x)), 2)
        x = F.relu6(self.c2(x))
        return torch.softmax(self.fc(x.flatten(1)), dim=-1)


class OpMix(nn.Module):
    """The remaining ops of the list: Slice, Split, Concat, Expand, Where, Equal, Cast,
    Reduce*, ArgMax, Trilu, Pow, Sqrt, Erf, Min/Max, Gemm without transB."""

    def __init__(self):
        super().__init__()
        self.w = nn.Parameter(torch.randn(8, 4))

    def forward(self, x):
        b = x.shape[0]
        a, c = x.split([2, 4], dim=1)
        y = torch.cat([c[:, ::2], a], dim=1)
        y = torch.triu(y[:, :, :6]) + torch.tril(y[:, :, 2:], -1)
        m = (y > 0).to(torch.float32)
        y = torch.where(y.abs() < 0.5, y.pow(2), torch.sqrt(y.abs()) * torch.erf(y))
        s = y.sum(-1, keepdim=True) + y.mean(1, keepdim=True).amax(-1, keepdim=True)
        z = torch.maximum(y, m) - torch.minimum(y, s) + s.expand(b, 4, 6).min()
        idx = z.argmax(-1)
        eq = (idx == 0).to(torch.int64).sum()
        out = torch.matmul(x, self.w) * (eq.to(torch.float32) + 1.0)
        return out.reshape(b, -1), z


class Vit(nn.Module):
    """A vision transformer as torchvision writes it: patch convolution, class token, learned
    positions, pre-norm encoder layers with nn.MultiheadAttention and an exact-GELU MLP, and a
    linear head on the class token."""

    def __init__(self, image=32, patch=8, hidden=32, layers=2, heads=4, mlp=64, classes=10):
        super().__init__()
        self.patch = nn.Conv2d(3, hidden, kernel_size=patch, stride=patch)
        self.cls = nn.Parameter(torch.randn(1, 1, hidden) * 0.02)
        self.pos = nn.Parameter(torch.randn(1, (image // patch) ** 2 + 1, hidden) * 0.02)
        self.ln1 = nn.ModuleList([nn.LayerNorm(hidden, eps=1e-6) for _ in range(layers)])
        self.attn = nn.ModuleList([nn.MultiheadAttention(hidden, heads, batch_first=True) for _ in range(layers)])
        self.ln2 = nn.ModuleList([nn.LayerNorm(hidden, eps=1e-6) for _ in range(layers)])
        self.mlp = nn.ModuleList([nn.Sequential(nn.Linear(hidden, mlp), nn.GELU(), nn.Linear(mlp, hidden))
                                  for _ in range(layers)])
        self.ln = nn.LayerNorm(hidden, eps=1e-6)
        self.head = nn.Linear(hidden, classes)

    def forward(self, x):
        x = self.patch(x).flatten(2).transpose(1, 2)
        x = torch.cat([self.cls.expand(x.shape[0], -1, -1), x], dim=1) + self.pos
        for ln1, attn, ln2, mlp in zip(self.ln1, self.attn, self.ln2, self.mlp):
            h = ln1(x)
            x = x + attn(h, h, h, need_weights=False)[0]
            x = x + mlp(ln2(x))
        return self.head(self.ln(x)[:, 0])
