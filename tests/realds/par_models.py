"""Tensor-, pipeline- and expert-parallel toy jobs for ckptdoc's real-DeepSpeed tests (our code; DeepSpeed and the
shared harness are imported unchanged).

Three kinds, each a few thousand parameters so that a run on 2 CPU cores takes seconds:

  tp      Megatron-style tensor parallelism through a small `mpu` object: a vocabulary-parallel embedding,
          replicated LayerNorms, a column-parallel and a row-parallel Linear (its bias replicated) and a
          column-parallel output head, over gloo groups. World = tp x dp.
  pipe3d  DeepSpeed's own PipelineModule on a PipeModelDataParallelTopology (pipe x data x model) whose layers
          are the same tensor-parallel blocks, plus a function layer (no state, no layer file). World = pp x tp x dp.
  moe     deepspeed.moe.layer.MoE (4 experts over expert-parallel 2) between two dense Linears; the optimizer's
          param groups are split into dense and expert groups with DeepSpeed's own helper. World = dp.
  tp_z3   the tp model under ZeRO-3.

Every weight is drawn whole from a generator seeded by (seed, name) and each rank keeps its slice, so the slices of
one run fit together and the merged model is defined (what `gather_full` assembles from a live engine).
"""
import zlib

import torch
import torch.distributed as tdist
import torch.nn as nn
import torch.nn.functional as F

import deepspeed
import ds_common as C

VOCAB, VOCAB_PADDED, HIDDEN, SEQ = 50, 52, 32, 4
MOE_IN, MOE_HIDDEN, MOE_FFN, MOE_CLASSES, MOE_EXPERTS, MOE_EP = 24, 32, 48, 10, 4, 2

# The merge rules these models' TP params follow, in the form Megatron-DeepSpeed saves them
# (client_state['universal_checkpoint_info'], read by DeepSpeed's ds_to_universal.py).
UNIVERSAL_INFO = {
    "tp": {
        "universal_checkpoint_version": 0.2,
        "original_vocab_size": VOCAB,
        "padded_vocab_size": VOCAB_PADDED,
        "vocabulary_parameter_patterns": [r"embed\.weight", r"head\.weight"],
        "tp_replicated_parameter_patterns": [r"ln\d\.weight", r"ln\d\.bias", r"fc2\.bias"],
        "parameter_with_row_parallelism_patterns": [r"fc2\.weight"],
        "parameter_to_average_patterns": [],
    },
    "pipe3d": {
        "universal_checkpoint_version": 0.2,
        "original_vocab_size": VOCAB,
        "padded_vocab_size": VOCAB_PADDED,
        "vocabulary_parameter_patterns": [r"0\.weight", r"\d+\.head\.weight"],
        "tp_replicated_parameter_patterns": [r"\d+\.ln\.weight", r"\d+\.ln\.bias", r"\d+\.fc2\.bias"],
        "parameter_with_row_parallelism_patterns": [r"\d+\.fc2\.weight"],
        "parameter_to_average_patterns": [],
    },
}

KINDS = {
    # pp, tp, ep, lp dtype, ZeRO stage, BF16_Optimizer (DeepSpeed requires it for bf16 pipelines)
    "pipe3d": dict(pp=2, tp=2, ep=1, dtype="bf16", stage=1, bf16opt=True),
    "tp": dict(pp=1, tp=2, ep=1, dtype="fp16", stage=2, bf16opt=False),
    "moe": dict(pp=1, tp=1, ep=MOE_EP, dtype="fp16", stage=2, bf16opt=False),
    "tp_z3": dict(pp=1, tp=2, ep=1, dtype="fp16", stage=3, bf16opt=False),
}
UNIVERSAL_INFO["tp_z3"] = UNIVERSAL_INFO["tp"]


def cpu_patches():
    """The harness's CPU adjustments (ds_common.py). Its gradient-bucketing replacement has v0.12.6's signature;
    v0.14.5 already buckets by dtype and returns (sparse, dense) buckets, which its pipeline engine unpacks: there
    the original stays."""
    import inspect
    import deepspeed.runtime.engine as eng
    original = eng.split_half_float_double_sparse
    C.cpu_gloo_patch()
    C.cpu_grad_bucketing_patch()
    if "dense_tensor_buckets" in inspect.getsource(original):
        eng.split_half_float_double_sparse = original


def full_init(shape, seed, name, scale=0.2):
    g = torch.Generator().manual_seed(seed * 1000003 + zlib.crc32(name.encode()))
    return torch.randn(shape, generator=g) * scale


# ---------------------------------------------------------------------------------------- tensor parallel


class TPGroup:
    """This rank's tensor-parallel group (gloo)."""

    def __init__(self, group, rank, size):
        self.group, self.rank, self.size = group, rank, size


class _CopyToTP(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, tp):
        ctx.tp = tp
        return x

    @staticmethod
    def backward(ctx, g):
        g = g.contiguous().clone()
        if ctx.tp.size > 1:
            tdist.all_reduce(g, group=ctx.tp.group)
        return g, None


class _ReduceFromTP(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, tp):
        y = x.contiguous().clone()
        if tp.size > 1:
            tdist.all_reduce(y, group=tp.group)
        return y

    @staticmethod
    def backward(ctx, g):
        return g, None


class _GatherFromTP(torch.autograd.Function):
    """Concatenates the ranks' last dimension."""

    @staticmethod
    def forward(ctx, x, tp):
        ctx.tp = tp
        if tp.size == 1:
            return x
        parts = [torch.empty_like(x) for _ in range(tp.size)]
        tdist.all_gather(parts, x.contiguous(), group=tp.group)
        return torch.cat(parts, dim=-1)

    @staticmethod
    def backward(ctx, g):
        tp = ctx.tp
        if tp.size == 1:
            return g, None
        return g.chunk(tp.size, dim=-1)[tp.rank].contiguous(), None


def _mark(p, rule):
    """rule: ("cat", dim) | ("replicated",) | ("vocab", dim): how the full param is rebuilt from the TP slices."""
    p.ckpt_merge = rule
    if rule[0] != "replicated":
        p.tensor_model_parallel = True  # DeepSpeed's grad-norm counts it on every TP rank
    return p


def _param(full, rule, tp, dtype):
    t = full if rule[0] == "replicated" else full.chunk(tp.size, dim=rule[1])[tp.rank]
    return _mark(nn.Parameter(t.clone().to(dtype)), rule)


class ColumnParallelLinear(nn.Module):
    def __init__(self, d_in, d_out, tp, seed, name, dtype, bias=True, vocab=False):
        super().__init__()
        self.tp = tp
        rule = ("vocab", 0) if vocab else ("cat", 0)
        self.weight = _param(full_init((d_out, d_in), seed, name + ".weight"), rule, tp, dtype)
        self.bias = _param(full_init((d_out,), seed, name + ".bias", 0.05), ("cat", 0), tp, dtype) if bias else None

    def forward(self, x):
        x = _CopyToTP.apply(x, self.tp)
        b = self.bias.float() if self.bias is not None else None
        return F.linear(x.float(), self.weight.float(), b)


class RowParallelLinear(nn.Module):
    def __init__(self, d_in, d_out, tp, seed, name, dtype):
        super().__init__()
        self.tp = tp
        self.weight = _param(full_init((d_out, d_in), seed, name + ".weight"), ("cat", 1), tp, dtype)
        self.bias = _param(full_init((d_out,), seed, name + ".bias", 0.05), ("replicated",), tp, dtype)

    def forward(self, x):
        y = _ReduceFromTP.apply(F.linear(x.float(), self.weight.float()), self.tp)
        return y + self.bias.float()


class VocabParallelEmbedding(nn.Module):
    def __init__(self, tp, seed, name, dtype):
        super().__init__()
        self.tp = tp
        self.weight = _param(full_init((VOCAB_PADDED, HIDDEN), seed, name), ("vocab", 0), tp, dtype)
        self.per_rank = VOCAB_PADDED // tp.size

    def forward(self, ids):
        lo = self.tp.rank * self.per_rank
        local = ids - lo
        outside = (local < 0) | (local >= self.per_rank)
        local = local.masked_fill(outside, 0)
        e = F.embedding(local, self.weight.float())
        e = e.masked_fill(outside.unsqueeze(-1), 0.0)
        return _ReduceFromTP.apply(e, self.tp)


class ReplicatedLayerNorm(nn.Module):
    def __init__(self, seed, name, dtype):
        super().__init__()
        self.weight = _mark(nn.Parameter((1.0 + full_init((HIDDEN,), seed, name + ".weight", 0.05)).to(dtype)),
                            ("replicated",))
        self.bias = _mark(nn.Parameter(full_init((HIDDEN,), seed, name + ".bias", 0.05).to(dtype)), ("replicated",))

    def forward(self, x):
        return F.layer_norm(x.float(), (HIDDEN,), self.weight.float(), self.bias.float())


class TPNet(nn.Module):
    """embed -> ln1 -> fc1 (column) -> gelu -> fc2 (row) + residual -> ln2 -> head (column, vocab) -> gather."""

    def __init__(self, tp, seed, dtype):
        super().__init__()
        self.embed = VocabParallelEmbedding(tp, seed, "embed.weight", dtype)
        self.ln1 = ReplicatedLayerNorm(seed, "ln1", dtype)
        self.fc1 = ColumnParallelLinear(HIDDEN, 2 * HIDDEN, tp, seed, "fc1", dtype)
        self.fc2 = RowParallelLinear(2 * HIDDEN, HIDDEN, tp, seed, "fc2", dtype)
        self.ln2 = ReplicatedLayerNorm(seed, "ln2", dtype)
        self.head = ColumnParallelLinear(HIDDEN, VOCAB_PADDED, tp, seed, "head", dtype, bias=False, vocab=True)
        self.tp = tp

    def forward(self, ids, labels):
        h = self.embed(ids)
        h = h + self.fc2(F.gelu(self.fc1(self.ln1(h))))
        logits = _GatherFromTP.apply(self.head(self.ln2(h)), self.tp)
        return F.cross_entropy(logits.reshape(-1, VOCAB_PADDED), labels.reshape(-1))


class TPMpu:
    """A Megatron-style model-parallel unit over gloo: tensor ranks are consecutive (rank = dp * tp + tp_rank)."""

    def __init__(self, tp_size):
        world, rank = tdist.get_world_size(), tdist.get_rank()
        assert world % tp_size == 0
        self.tp_size, self.dp_size = tp_size, world // tp_size
        self.tp_rank, self.dp_rank = rank % tp_size, rank // tp_size
        self.tp_group = self.dp_group = None
        for d in range(self.dp_size):  # every rank takes part in creating every group
            g = tdist.new_group([d * tp_size + t for t in range(tp_size)])
            if d == self.dp_rank:
                self.tp_group = g
        for t in range(tp_size):
            g = tdist.new_group([d * tp_size + t for d in range(self.dp_size)])
            if t == self.tp_rank:
                self.dp_group = g

    def get_model_parallel_rank(self): return self.tp_rank
    def get_model_parallel_world_size(self): return self.tp_size
    def get_model_parallel_group(self): return self.tp_group
    def get_tensor_model_parallel_rank(self): return self.tp_rank
    def get_tensor_model_parallel_world_size(self): return self.tp_size
    def get_tensor_model_parallel_group(self): return self.tp_group
    def get_pipeline_model_parallel_rank(self): return 0
    def get_pipeline_model_parallel_world_size(self): return 1
    def get_data_parallel_rank(self): return self.dp_rank
    def get_data_parallel_world_size(self): return self.dp_size
    def get_data_parallel_group(self): return self.dp_group
    def get_slice_parallel_rank(self): return self.tp_rank
    def get_slice_parallel_world_size(self): return self.tp_size
    def get_slice_parallel_group(self): return self.tp_group


# ---------------------------------------------------------------------------------------- pipeline


class EmbedPipe(VocabParallelEmbedding):
    """Layer 0: the vocabulary-parallel embedding (its weight is '0.weight')."""


class BlockPipe(nn.Module):
    def __init__(self, tp, seed, name, dtype):
        super().__init__()
        self.ln = ReplicatedLayerNorm(seed, name + ".ln", dtype)
        self.fc1 = ColumnParallelLinear(HIDDEN, 2 * HIDDEN, tp, seed, name + ".fc1", dtype)
        self.fc2 = RowParallelLinear(2 * HIDDEN, HIDDEN, tp, seed, name + ".fc2", dtype)

    def forward(self, h):
        return h + self.fc2(F.gelu(self.fc1(self.ln(h))))


class HeadPipe(nn.Module):
    def __init__(self, tp, seed, name, dtype):
        super().__init__()
        self.tp = tp
        self.ln = ReplicatedLayerNorm(seed, name + ".ln", dtype)
        self.head = ColumnParallelLinear(HIDDEN, VOCAB_PADDED, tp, seed, name + ".head", dtype, bias=False, vocab=True)

    def forward(self, h):
        return _GatherFromTP.apply(self.head(self.ln(h)), self.tp)


def _scale_activations(h):
    # a function layer: no state, so DeepSpeed writes no layer file for its index
    return h * 1.0


def pipe_loss(logits, labels):
    return F.cross_entropy(logits.float().reshape(-1, VOCAB_PADDED), labels.reshape(-1))


def pipe_topology(pp, tp):
    from deepspeed.runtime.pipe.topology import PipeModelDataParallelTopology
    world = tdist.get_world_size()
    return PipeModelDataParallelTopology(num_pp=pp, num_mp=tp, num_dp=world // (pp * tp))


def pipe_tp_group(topo):
    """Our own gloo group over this rank's tensor slice (same members as DeepSpeed's 'model' axis groups)."""
    rank = tdist.get_rank()
    mine = None
    for ranks in topo.get_axis_comm_lists("model"):
        g = tdist.new_group(ranks)
        if rank in ranks:
            mine = TPGroup(g, ranks.index(rank), len(ranks))
    return mine


def build_pipe(seed, dtype, pp, tp):
    from deepspeed.pipe import PipelineModule, LayerSpec
    topo = pipe_topology(pp, tp)
    tpg = pipe_tp_group(topo)
    lp = C.torch_dtype(dtype)
    layers = [LayerSpec(EmbedPipe, tpg, seed, "0.weight", lp),
              _scale_activations,
              LayerSpec(BlockPipe, tpg, seed, "2", lp),
              LayerSpec(BlockPipe, tpg, seed, "3", lp),
              LayerSpec(HeadPipe, tpg, seed, "4", lp)]
    model = PipelineModule(layers=layers, topology=topo, loss_fn=pipe_loss, partition_method="uniform")
    return model, tpg, topo


# ---------------------------------------------------------------------------------------- MoE


class ExpertMLP(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = C.UpLinear(MOE_HIDDEN, MOE_FFN)
        self.fc2 = C.UpLinear(MOE_FFN, MOE_HIDDEN)

    def forward(self, x):
        return self.fc2(F.gelu(self.fc1(x)))


class MoENet(nn.Module):
    """fc_in -> gelu -> MoE(4 experts, ep 2, top-1) -> fc_out; activations in fp32 (torch 1.13 on the CPU has no
    fp16 matmul), parameters in the training dtype."""

    def __init__(self):
        super().__init__()
        from deepspeed.moe.layer import MoE
        self.fc_in = C.UpLinear(MOE_IN, MOE_HIDDEN)
        self.moe = MoE(MOE_HIDDEN, ExpertMLP(), num_experts=MOE_EXPERTS, ep_size=MOE_EP, k=1, min_capacity=4)
        self.fc_out = C.UpLinear(MOE_HIDDEN, MOE_CLASSES)

    def forward(self, x, y):
        h = F.gelu(self.fc_in(x.float()))
        h, l_aux, _ = self.moe(h)
        return F.cross_entropy(self.fc_out(h).float(), y) + 0.01 * l_aux


def moe_param_groups(model):
    from deepspeed.moe.utils import split_params_into_different_moe_groups_for_optimizer
    groups = [{"name": "dense", "params": [p for p in model.parameters()], "weight_decay": 0.01}]
    return split_params_into_different_moe_groups_for_optimizer(groups)


def moe_ep_rank():
    from deepspeed.utils import groups
    return groups._get_expert_parallel_rank(f"ep_size_{MOE_EP}")


def global_expert_name(name, ep_rank):
    """The name DeepSpeed gives an expert param in its expert files: the local expert id made global."""
    marker = ".deepspeed_moe.experts.deepspeed_experts."
    if marker not in name:
        return name
    head, tail = name.split(marker, 1)
    local, rest = tail.split(".", 1)
    return f"{head}{marker}{ep_rank * (MOE_EXPERTS // MOE_EP) + int(local)}.{rest}"


# ---------------------------------------------------------------------------------------- engines and data


class Job:
    """A built engine with what the drivers need to know about its parallel coordinates."""

    def __init__(self, kind, engine, cfg, tp=None, stage=0, tp_rank=0, dp_rank=0):
        self.kind, self.engine, self.cfg = kind, engine, cfg
        self.tp, self.stage, self.tp_rank, self.dp_rank = tp, stage, tp_rank, dp_rank


def micro_batch(kind):
    return 8 if kind == "moe" else 2  # MoE's gate needs more tokens than its min_capacity


def config_for(kind, tp=None, universal=False):
    k = dict(KINDS[kind], **({"tp": tp} if tp else {}))
    micro_bs = micro_batch(kind)
    cfg = C.make_config(k["stage"], k["dtype"], micro_bs=micro_bs, bf16_fp32_accum=k["bf16opt"])
    if universal:  # load a universal checkpoint (latest_universal) at this job's own parallel sizes
        cfg["checkpoint"] = {"load_universal": True}
    if kind == "pipe3d":
        cfg["gradient_accumulation_steps"] = 2
        world = tdist.get_world_size()
        cfg["train_batch_size"] = micro_bs * 2 * (world // (k["pp"] * k["tp"]))
    return cfg


def build(kind, seed, tp=None, universal=False):
    """The engine of `kind` at this world size, model weights from `seed`; `tp` overrides the kind's
    tensor-parallel size (a universal checkpoint loads at any), `universal` sets load_universal."""
    k = dict(KINDS[kind], **({"tp": tp} if tp else {}))
    torch.manual_seed(seed)
    cfg = config_for(kind, tp, universal)
    lp = C.torch_dtype(k["dtype"])
    if kind in ("tp", "tp_z3"):
        mpu = TPMpu(k["tp"])
        model = TPNet(TPGroup(mpu.tp_group, mpu.tp_rank, mpu.tp_size), seed, lp)
        engine, _, _, _ = deepspeed.initialize(model=model, model_parameters=C.param_groups(model), config=cfg, mpu=mpu)
        return Job(kind, engine, cfg, tp=model.tp, tp_rank=mpu.tp_rank, dp_rank=mpu.dp_rank)
    if kind == "pipe3d":
        model, tpg, topo = build_pipe(seed, k["dtype"], k["pp"], k["tp"])
        engine, _, _, _ = deepspeed.initialize(model=model, model_parameters=[p for p in model.parameters()],
                                               config=cfg)
        c = topo.get_coord(tdist.get_rank())
        return Job(kind, engine, cfg, tp=tpg, stage=c.pipe, tp_rank=c.model, dp_rank=c.data)
    if kind == "moe":
        model = MoENet().to(lp)
        engine, _, _, _ = deepspeed.initialize(model=model, model_parameters=moe_param_groups(model), config=cfg)
        return Job(kind, engine, cfg, dp_rank=tdist.get_rank())
    raise ValueError(kind)


def batches(job, n, seed):
    """n training inputs for this rank (pipeline: an iterator for train_batch)."""
    micro_bs = micro_batch(job.kind)
    g = torch.Generator().manual_seed(seed * 1000 + job.dp_rank)
    out = []
    for _ in range(n):
        if job.kind == "moe":
            out.append((torch.randn(micro_bs, MOE_IN, generator=g), torch.randint(0, MOE_CLASSES, (micro_bs,), generator=g)))
        else:
            out.append((torch.randint(0, VOCAB, (micro_bs, SEQ), generator=g),
                        torch.randint(0, VOCAB, (micro_bs, SEQ), generator=g)))
    return out


def train_step(job, data):
    """One optimizer step; returns the loss (on every rank of a pipeline, broadcast by train_batch)."""
    e = job.engine
    if job.kind == "pipe3d":
        return float(e.train_batch(data_iter=iter(data)))
    x, y = data[0]
    loss = e(x, y)
    e.backward(loss)
    e.step()
    return float(loss.item())


# ---------------------------------------------------------------------------------------- the assembled model


def _local_named_params(job):
    """(name as the merged model calls it, param) of this rank; experts under their global id."""
    ep = moe_ep_rank() if job.kind == "moe" else 0
    for n, p in job.engine.module.named_parameters():
        yield (global_expert_name(n, ep) if job.kind == "moe" else n), p


def _flat_groups(opt):
    """Per flat group of a ZeRO-1/2 or BF16_Optimizer: (params in flat order, this rank's fp32 partition with its
    padding, the group's data-parallel process group)."""
    cls = type(opt).__name__
    if cls == "DeepSpeedZeroOptimizer":
        return [(opt.round_robin_bit16_groups[i], opt.single_partition_of_fp32_groups[i], opt.real_dp_process_group[i])
                for i in range(len(opt.single_partition_of_fp32_groups))]
    if cls == "BF16_Optimizer":
        return [(opt.bf16_groups[i], opt.fp32_groups_flat_partition[i], opt.real_dp_process_group[i])
                for i in range(len(opt.fp32_groups_flat_partition))]
    raise TypeError(cls)


def _full_from_partitions(job, what):
    """{id(param): full tensor} of this rank's params: every rank of a group's dp group contributes its fp32
    partition (or the Adam state on it), in partition order. Read from the optimizer's own flat partitions
    rather than DeepSpeed's safe_get_full_* helpers: before v0.14.5 those map MoE expert params with the global
    data-parallel size (DeepSpeed PR #5681) and return zeros or another expert's values."""
    opt = job.engine.optimizer
    out = {}
    if type(opt).__name__ == "DeepSpeedZeroOptimizer_Stage3":
        # ZeRO-3 partitions each param on its own; DeepSpeed's helpers gather it (no MoE here).
        from deepspeed.utils import safe_get_full_fp32_param, safe_get_full_optimizer_state
        params = [p for _, p in job.engine.module.named_parameters()]
        if what != "fp32" and not opt.optimizer.state:
            return None
        for p in params:
            t = safe_get_full_fp32_param(p) if what == "fp32" else safe_get_full_optimizer_state(p, what)
            out[id(p)] = t.detach().float().cpu().clone()
        return out
    for params, part, group in _flat_groups(opt):
        src = part if what == "fp32" else opt.optimizer.state.get(part, {}).get(what)
        if src is None:
            return None  # no Adam state (a reset or never-stepped optimizer)
        pieces = [torch.empty_like(src) for _ in range(tdist.get_world_size(group))]
        tdist.all_gather(pieces, src.detach().contiguous(), group=group)
        flat, off = torch.cat(pieces).float(), 0
        for p in params:
            out[id(p)] = flat[off:off + p.numel()].view(p.shape).clone()
            off += p.numel()
    return out


def gather_full(job, what):
    """The whole model's `what` ("fp32", "lp", "exp_avg", "exp_avg_sq") as DeepSpeed holds it in this engine,
    merged over data-parallel ranks (the optimizer's flat partitions, gathered over each group's own dp group),
    tensor-parallel ranks (by each param's split) and pipeline stages / expert-parallel ranks (by name).
    Collective; returns {name: float32 tensor} on every rank, or None when the optimizer holds no such state."""
    full = None if what == "lp" else _full_from_partitions(job, what)
    if what != "lp" and full is None:
        return None
    if what == "lp" and zero_stage(job) == 3:  # ZeRO-3 keeps 1/dp of each weight: gather them
        import deepspeed
        params = [p for _, p in job.engine.module.named_parameters()]
        with deepspeed.zero.GatheredParameters(params):
            full = {id(p): p.detach().float().cpu().clone() for p in params}
    mine = {}
    for name, p in _local_named_params(job):
        t = p.detach().float().clone() if full is None else full[id(p)]
        mine[name] = (t.cpu(), getattr(p, "ckpt_merge", ("replicated",)))
    # One copy of each value: data-parallel rank 0 (MoE: every expert-parallel rank of expert-data-parallel rank 0)
    if job.kind == "moe":
        from deepspeed.utils import groups
        first = groups._get_expert_data_parallel_rank(f"ep_size_{MOE_EP}") == 0
    else:
        first = job.dp_rank == 0
    pieces = [None] * tdist.get_world_size()
    tdist.all_gather_object(pieces, (job.stage, job.tp_rank, first, mine))
    by_name = {}
    for stage, tp_rank, first, d in pieces:
        if not first:
            continue  # the other data-parallel ranks hold the same (merged) values
        for name, (t, rule) in d.items():
            by_name.setdefault(name, {})[tp_rank] = (t, rule)
    full = {}
    for name, slices in sorted(by_name.items()):
        ts = [slices[r][0] for r in sorted(slices)]
        rule = slices[min(slices)][1]
        if rule[0] == "replicated":
            for t in ts[1:]:
                if not torch.equal(t, ts[0]):
                    raise RuntimeError(f"replicated {name} differs across tensor-parallel ranks")
            full[name] = ts[0]
        else:
            full[name] = torch.cat(ts, dim=rule[1])
            if rule[0] == "vocab":
                full[name] = full[name][:VOCAB]
    return full


def zero_stage(job):
    return KINDS[job.kind]["stage"]


def client_state(kind):
    info = UNIVERSAL_INFO.get(kind)
    return {"universal_checkpoint_info": info} if info else {}
