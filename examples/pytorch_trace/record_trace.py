#!/usr/bin/env python3
"""Record one training step of a PyTorch model on the CPU as a stash-trace v1 file, the format of
data/traces (see data/README.md), for stash-plan and the planners.

    record_trace.py MODEL [--batch B] [--out FILE] [--threads N]

MODEL is a torchvision classifier name (resnet18, vit_b_16, swin_t, convnext_tiny, ...),
`transformer_encoder` (data/traces' model) or `gpt` (a small causal decoder: token embedding, learned positions, pre-norm blocks of causal
self-attention and a GELU MLP, tied head; sequence 256, width 512, 8 heads, 6 blocks, vocabulary
8192). The step is the one data/traces records: random weights (seed 0), one untraced step so
that SGD's momentum buffers exist, then forward + cross-entropy, backward, SGD(lr=0.01,
momentum=0.9).step() and zero_grad(set_to_none=True).

How it records. Every aten op below autograd is seen by a TorchDispatchMode (its tensor arguments,
results and the schema's write annotations); every allocation and free of PyTorch's CPU allocator
is seen by torch.profiler (profile_memory=True: address, size, time). Around each op the mode
allocates and frees a marker of a size no real tensor has, so the allocator's stream splits
exactly into "inside op k" and "between ops". A storage is an allocation: its id is given at its
allocation event and a tensor names the storage live at its storage's address. Checked at the
end: every marker was seen, every op's storages are live, and the trace's peak equals the
allocator's own running total at its highest.

Needs torch and torchvision (Debian: python3-torch python3-torchvision; tested with 1.13.1 /
0.14.1, the versions data/traces were recorded with). Exit status 0 on success, 1 on a failed
check, 2 on bad arguments.
"""

import argparse
import sys

MARK = 1_000_003  # bytes of a marker allocation (a prime: no float tensor has this size)


def build_gpt(vocab=8192, seq=256, width=512, heads=8, blocks=6):
    """A GPT-like causal decoder (pre-norm, GELU MLP, head tied to the embedding)."""
    from torch import nn

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.ln1 = nn.LayerNorm(width)
            self.attn = nn.MultiheadAttention(width, heads, dropout=0.1, batch_first=True)
            self.ln2 = nn.LayerNorm(width)
            self.mlp = nn.Sequential(nn.Linear(width, 4 * width), nn.GELU(),
                                     nn.Linear(4 * width, width), nn.Dropout(0.1))

        def forward(self, x, mask):
            h = self.ln1(x)
            x = x + self.attn(h, h, h, attn_mask=mask, need_weights=False)[0]
            return x + self.mlp(self.ln2(x))

    class Gpt(nn.Module):
        def __init__(self):
            super().__init__()
            self.tok = nn.Embedding(vocab, width)
            self.pos = nn.Embedding(seq, width)
            self.blocks = nn.ModuleList(Block() for _ in range(blocks))
            self.ln = nn.LayerNorm(width)
            self.head = nn.Linear(width, vocab, bias=False)
            self.head.weight = self.tok.weight

        def forward(self, tokens, positions, mask):
            x = self.tok(tokens) + self.pos(positions)
            for b in self.blocks:
                x = b(x, mask)
            return self.head(self.ln(x)).reshape(-1, vocab)

    return Gpt(), seq, vocab


def build_transformer_encoder():
    """data/traces' transformer_encoder: nn.TransformerEncoder (d_model 768, 12 heads, feed-forward
    3072, 4 layers; post-norm, ReLU, dropout 0.1, sequence first), mean-pooled, Linear(768, 1000)."""
    from torch import nn

    class Encoder(nn.Module):
        def __init__(self):
            super().__init__()
            layer = nn.TransformerEncoderLayer(d_model=768, nhead=12, dim_feedforward=3072)
            self.encoder = nn.TransformerEncoder(layer, num_layers=4)
            self.head = nn.Linear(768, 1000)

        def forward(self, x):
            return self.head(self.encoder(x).mean(dim=0))

    return Encoder()


def make_step(name, batch):
    """The model, its inputs (named), the loss target and a header's input description."""
    import torch
    import torchvision

    torch.manual_seed(0)
    if name == "gpt":
        model, seq, vocab = build_gpt()
        tokens = torch.randint(0, vocab, (batch, seq))
        positions = torch.arange(seq).expand(batch, seq).contiguous()
        mask = torch.triu(torch.full((seq, seq), float("-inf")), diagonal=1)
        target = torch.randint(0, vocab, (batch * seq,))
        inputs = {"tokens": tokens, "positions": positions, "mask": mask}
        return model, inputs, target, f"{seq}tokens"
    if name == "transformer_encoder":
        model = build_transformer_encoder()
        x = torch.randn(512, batch, 768)
        target = torch.randint(0, 1000, (batch,))
        return model, {"x": x}, target, "seq512xd768"
    model = getattr(torchvision.models, name)(weights=None, num_classes=1000)
    x = torch.randn(batch, 3, 224, 224)
    target = torch.randint(0, 1000, (batch,))
    return model, {"x": x}, target, "3x224x224"


class Storages:
    """Allocations seen so far: id per live address, sizes, labels, kinds, when allocated."""

    def __init__(self):
        self.live = {}  # address -> id
        self.bytes = []
        self.label = []
        self.kind = []
        self.freed = []

    def new(self, ptr, size, label, kind):
        sid = len(self.bytes)
        self.live[ptr] = sid
        self.bytes.append(size)
        self.label.append(label)
        self.kind.append(kind)
        self.freed.append(False)
        return sid


def declared_tensors(model, opt, inputs, target):
    """The storages that exist before the step, in declaration order: (tensor, kind, label)."""
    out = [(t, "param", n) for n, t in model.named_parameters()]
    out += [(t, "param", n) for n, t in model.named_buffers()]
    names = {id(p): n for n, p in model.named_parameters()}
    for group in opt.param_groups:
        for p in group["params"]:
            buf = opt.state.get(p, {}).get("momentum_buffer")
            if buf is not None:
                out.append((buf, "optstate", names[id(p)] + ".momentum"))
    out += [(t, "input", n) for n, t in inputs.items()]
    out.append((target, "input", "target"))
    return out


def storage_ptr(t):
    """The address of a tensor's storage (0 when it has none the allocator gave)."""
    try:
        return t.storage().data_ptr()
    except (RuntimeError, NotImplementedError):
        return 0


def op_name(func):
    """aten::NAME, with the overload when it is not the default one (data/README.md)."""
    name = "aten::" + func._overloadpacket.__name__
    return name if func._overloadname == "default" else name + "." + func._overloadname


def schema_tensors(func, args, kwargs):
    """(tensor, written, out_arg) for each tensor argument, following the op's schema; the
    number instead of a tensor for a Python number passed to a Tensor argument."""
    import torch

    found = []
    for i, a in enumerate(func._schema.arguments):
        v = args[i] if i < len(args) and not a.kwarg_only else kwargs.get(a.name)
        written = a.alias_info is not None and a.alias_info.is_write
        for t in (v if isinstance(v, (list, tuple)) else [v]):
            if isinstance(t, torch.Tensor):
                found.append((t, written, written and a.is_out))
            elif isinstance(t, (bool, int, float, complex)) and str(a.type) == "Tensor":
                found.append((t, False, False))  # a wrapped number (see Builder.begin_op)
    if func._overloadpacket.__name__ == "native_batch_norm" and len(args) > 5 and args[5]:
        for t in args[3:5]:  # training: the running statistics are updated in place
            if isinstance(t, torch.Tensor):
                found.append((t, True, False))
    return found


def marker():
    """One marker allocation, freed at once: a boundary in the allocator's stream."""
    import torch

    m = torch.empty(MARK, dtype=torch.uint8)
    del m


class Recorder:
    """The step's ops as the dispatcher sees them below autograd, and the Python side's marks."""

    def __init__(self):
        self.ops = []  # per op: name, module path, [(ptr, written, out_arg)], [result ptrs]
        self.marks = []  # ("op", k, "begin"|"end") or ("phase", name, grad ptrs)
        self.modules = []  # the forward's module stack (names)

    def hook(self, model, loss_fn):
        def enter(name):
            def pre(module, inputs):
                self.modules.append(name)

            return pre

        def leave(module, inputs, outputs):  # (a hook returning a value replaces the output)
            self.modules.pop()

        modules = [(n or "model", m) for n, m in model.named_modules()] + [("loss", loss_fn)]
        for name, module in modules:
            module.register_forward_pre_hook(enter(name))
            module.register_forward_hook(leave)

    def phase(self, name, grads=()):
        from torch.utils._python_dispatch import _pop_mode_temporarily

        self.marks.append(("phase", name, [(n, storage_ptr(g)) for n, g in grads]))
        with _pop_mode_temporarily():  # the marker is not an op of the step
            marker()

    def mode(self):
        from torch.utils._python_dispatch import TorchDispatchMode
        from torch.utils._pytree import tree_flatten
        import torch

        rec = self

        class Mode(TorchDispatchMode):
            def __torch_dispatch__(self, func, types, args=(), kwargs=None):
                kwargs = kwargs or {}
                k = len(rec.ops)
                found = [(storage_ptr(t) if isinstance(t, torch.Tensor) else ("number", t), w, o)
                         for t, w, o in schema_tensors(func, args, kwargs)]
                rec.marks.append(("op", k, "begin"))
                marker()
                out = func(*args, **kwargs)
                rec.marks.append(("op", k, "end"))
                marker()
                results = [storage_ptr(t) for t in tree_flatten(out)[0]
                           if isinstance(t, torch.Tensor)]
                path = rec.modules[-1] if rec.modules else ""
                rec.ops.append((op_name(func), path, found, results))
                return out

        return Mode()


def run_step(model, opt, loss_fn, inputs, target, rec=None):
    """One training step; with a recorder, its phases marked and its ops seen."""
    import contextlib

    mode = rec.mode() if rec else contextlib.nullcontext()
    with mode:
        if rec:
            rec.phase("forward")
        out = model(**inputs)
        loss = loss_fn(out, target)
        if rec:
            rec.phase("backward")
        loss.backward()
        if rec:
            rec.phase("optimizer", [(n, p.grad) for n, p in model.named_parameters()
                                    if p.grad is not None])
        opt.step()
        opt.zero_grad(set_to_none=True)
        del out, loss


def allocation_events(prof):
    """The CPU allocator's events, in time order: (ptr, size (< 0: a free), total allocated)."""
    flat = []

    def walk(events):
        for e in events:
            f = e.extra_fields
            if type(f).__name__ == "_ExtraFields_Allocation" and f.device.type == "cpu":
                flat.append((e.start_time_ns, len(flat), f.ptr, f.alloc_size, f.total_allocated))
            walk(e.children)

    walk(prof.profiler.kineto_results.experimental_event_tree())
    flat.sort()
    return [(ptr, size, total) for _, _, ptr, size, total in flat]


class Check(Exception):
    """A recording that does not describe the step exactly."""


class Builder:
    """Walks the allocator's stream with the recorder's marks into the trace's events."""

    def __init__(self, rec, declared):
        self.rec = rec
        self.st = Storages()
        self.events = []  # ("t", id) | ("f", id) | ("o", name, reads, writes) | ("p", name)
        self.phase = None
        self.born = {}  # id -> phase it was allocated in
        self.at_backward = set()
        self.grads = {}  # id -> parameter name, for the grads live when backward ends
        self.pending = []  # allocated between ops, not yet labelled
        self.inside = None  # (op index, ids allocated inside, reads, in-place writes)
        self.hide = 0  # the mode's own wraps of numbers still to come inside this op
        self.wrap_value = {}  # id -> the number a wrap of a Python number holds
        self.hidden = set()  # their addresses, until freed
        for t, kind, label in declared:
            ptr = storage_ptr(t)
            if ptr != 0 and ptr not in self.st.live:  # (a tied weight is one storage)
                self.events.append(("t", self.st.new(ptr, t.storage().nbytes(), label, kind)))

    def resolve(self, ptr, what):
        if ptr not in self.st.live:
            raise Check(f"{what} names a storage at {ptr:#x} that no event allocated")
        return self.st.live[ptr]

    def mark(self, mark):
        kind, a, b = mark
        if kind == "phase":
            self.phase = a
            self.events.append(("p", a))
            if a == "backward":
                self.at_backward = set(self.st.live.values())
            elif a == "optimizer":
                self.grads = {self.resolve(p, "a parameter's grad"): n for n, p in b if p}
        elif b == "begin":
            self.begin_op(a)
        else:
            self.end_op()

    def begin_op(self, k):
        """Op k's reads and in-place writes, resolved against the storages live now."""
        name, _, found, _ = self.rec.ops[k]
        numbers = [p[1] for p, _, _ in found if isinstance(p, tuple)]
        wrapped = iter(self.wraps_of(numbers))
        reads = [next(wrapped) if isinstance(p, tuple) else self.resolve(p, name)
                 for p, _, out in found if p != 0 and not out]
        written = [self.resolve(p, name) for p, w, _ in found if isinstance(p, int) and p and w]
        self.hide = len(numbers)
        self.inside = (k, [], [r for r in reads if r is not None], written)

    def wraps_of(self, numbers):
        """The storages of the Python numbers an op got at Tensor arguments (None: not known).
        PyTorch wraps each in an 8-byte tensor just before the op (the last such allocations
        between ops); the mode sees the number, and the op wraps it again when the mode calls
        it: that second wrap is the mode's, not the step's, and is left out (self.hide). A
        number the backward passes from a tensor saved in the forward has no fresh wrap: it is
        the latest live wrap of the same value (the saved one of the layer backward reaches
        first; saved wraps are freed once used)."""
        fresh = [sid for sid in self.pending if self.st.bytes[sid] == 8]
        fresh = fresh[max(0, len(fresh) - len(numbers)):]
        missing = len(numbers) - len(fresh)
        out = []
        for j, value in enumerate(numbers):
            if j >= missing:
                sid = fresh[j - missing]
                self.wrap_value[sid] = value
            else:
                live = [sid for sid, v in self.wrap_value.items()
                        if v == value and not self.st.freed[sid]]
                sid = max(live) if live else None
            out.append(sid)
        return out

    def end_op(self):
        k, allocated, reads, written = self.inside
        name, path, _, results = self.rec.ops[k]
        short = name.split("::", 1)[1].split(".", 1)[0]
        base = (path + "/" if self.phase == "forward" and path else "") + short
        new = []
        for p in results:
            sid = self.st.live.get(p)
            if sid is not None and sid in allocated and sid not in new:
                new.append(sid)
        for j, sid in enumerate(new):
            self.st.label[sid] = base + (f".{j}" if len(new) > 1 else "")
        for sid in allocated:
            if sid not in new:
                self.st.label[sid] = base + ".ws"
        for sid in self.pending:  # a Python number passed to a tensor argument, and the like
            self.st.label[sid] = ("scalar_arg_of_" if sid in reads else "before_") + short
        self.pending = []
        if not name.startswith("aten::_record_function_"):  # the profiler's, not the step's
            self.events.append(("o", name, unique(reads), unique(written + new)))
        if self.hide or self.hidden:
            raise Check(f"{name}: a wrapped number the op did not allocate and free")
        self.inside = None

    def event(self, ptr, size):
        if size == 8 and self.inside is not None and self.hide > 0:
            self.hide -= 1
            self.hidden.add(ptr)
            return
        if size == -8 and ptr in self.hidden:
            self.hidden.discard(ptr)
            return
        if size > 0:
            sid = self.st.new(ptr, size, None, None)
            self.born[sid] = self.phase
            (self.inside[1] if self.inside else self.pending).append(sid)
            self.events.append(("t", sid))
        else:
            sid = self.st.live.pop(ptr, None)
            if sid is None:
                raise Check(f"a free of {ptr:#x} ({-size} B) that no event allocated")
            self.st.freed[sid] = True
            self.events.append(("f", sid))


def unique(ids):
    """The ids in their first order, each once."""
    return list(dict.fromkeys(ids))


def walk_stream(builder, stream, marks):
    """Feeds the stream to the builder; checks the allocator's running total at every event."""
    marks = iter(marks)
    for i, (ptr, size, total) in enumerate(stream):
        if i > 0 and total - stream[i - 1][2] != size:
            raise Check(f"event {i}: the allocator's total moved by {total - stream[i - 1][2]}"
                        f" B for an event of {size} B (an event is missing or out of order)")
        if size == MARK:
            mark = next(marks, None)
            if mark is None:
                raise Check(f"event {i}: a marker the recorder did not place")
            builder.mark(mark)
        elif size == -MARK:
            continue
        else:
            builder.event(ptr, size)
    if next(marks, None) is not None:
        raise Check("a marker the allocator's stream does not hold")
    if builder.inside is not None:
        raise Check("the stream ends inside an op")


def kinds(builder):
    """Each storage's kind: declared, else grad / act / temp (data/README.md)."""
    st = builder.st
    for sid in range(len(st.bytes)):
        if st.kind[sid] is None:
            if sid in builder.grads:
                st.kind[sid] = "grad"
                st.label[sid] = builder.grads[sid] + ".grad"
            elif builder.born.get(sid) == "forward" and sid in builder.at_backward:
                st.kind[sid] = "act"
            else:
                st.kind[sid] = "temp"
        if st.label[sid] is None:
            st.label[sid] = "unlabelled"
    return st


def ids(xs):
    """An o line's id list: comma-separated, '-' when empty."""
    return ",".join(str(x) for x in xs) if xs else "-"


def write_trace(out, header, builder):
    """The trace file: the header line, then one line per event."""
    st = kinds(builder)
    out.write(header + "\n")
    for e in builder.events:
        if e[0] == "t":
            sid = e[1]
            out.write(f"t {sid} {st.bytes[sid]} {st.kind[sid]} {st.label[sid].replace(' ', '_')}\n")
        elif e[0] == "f":
            out.write(f"f {e[1]}\n")
        elif e[0] == "o":
            out.write(f"o {e[1]} {ids(e[2])} {ids(e[3])}\n")
        else:
            out.write(f"p {e[1]}\n")


def main(argv):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("model")
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--out", help="output file (default MODEL_bBATCH.trace)")
    ap.add_argument("--threads", type=int, default=2)
    a = ap.parse_args(argv)
    try:
        import torch
        from torch.profiler import ProfilerActivity, profile
    except ImportError as e:
        print(f"record_trace: needs torch and torchvision ({e})", file=sys.stderr)
        return 2
    torch.set_num_threads(a.threads)
    try:
        model, inputs, target, shape = make_step(a.model, a.batch)
    except AttributeError:
        print(f"record_trace: unknown model {a.model!r}", file=sys.stderr)
        return 2
    model.train()
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    loss_fn = torch.nn.CrossEntropyLoss()
    run_step(model, opt, loss_fn, inputs, target)  # the untraced step: momentum buffers exist
    declared = declared_tensors(model, opt, inputs, target)
    rec = Recorder()
    rec.hook(model, loss_fn)
    builder = Builder(rec, declared)
    with profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:
        run_step(model, opt, loss_fn, inputs, target, rec)
    try:
        walk_stream(builder, allocation_events(prof), rec.marks)
    except Check as e:
        print(f"record_trace: {a.model}: {e}", file=sys.stderr)
        return 1
    header = (f"# stash-trace v1 model={a.model} batch={a.batch} input={shape} dtype=float32 "
              f"source=pytorch-{torch.__version__}-cpu step=train-sgd-momentum")
    path = a.out or f"{a.model}_b{a.batch}.trace"
    with open(path, "w") as out:
        write_trace(out, header, builder)
    print(f"{path}: {len(builder.st.bytes)} storages, {len(rec.ops)} ops")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
