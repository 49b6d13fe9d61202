"""The versioned JSON shape of `pplan explain` ("pplan.explain/2"): pydantic models that are both the data the
renderers read and the documented schema (`pplan schema explain` prints it). The plan, memory, pipeline and
performance blocks are shared with `pplan.recommend/2` (`pplan.documents.recommend`).

Compatibility: fields are only ever added within a major version; a rename or removal bumps the number.
All byte counts are per GPU unless the name says otherwise; bubble fractions name their convention.
"""

from __future__ import annotations

from pydantic import Field, NonNegativeInt

from pplan.documents.base import SCHEMA_KEY, Out
from pplan.documents.placement import PlacementOut

EXPLAIN_SCHEMA = "pplan.explain/2"


class Derivation(Out):
    quantity: str
    """The quantity derived (e.g. `d`, `m`), as the formula names it."""
    formula: str
    """The identity or formula, with the numbers substituted."""
    value: float
    """The quantity's value."""


class ModelSummary(Out):
    name: str
    """The model profile's name."""
    num_layers: int
    """Transformer layers L."""
    hidden_size: int
    """Hidden size h."""
    num_attention_heads: int
    """Attention (query) heads a."""
    num_kv_heads: int
    """Key/value heads (fewer than the query heads under grouped-query attention)."""
    ffn_hidden_size: int
    """The dense MLP's inner width."""
    mlp: str
    """The MLP's activation: `gelu`, `swiglu` (three matrices) or `squared-relu`."""
    vocab_size: int
    """Vocabulary size V (embedding and output-layer rows)."""
    params_total: int
    """Unique parameters (a tied output layer counted once)."""
    params_per_layer: int
    """Parameters of one transformer layer (the largest kind where layers differ)."""


class HardwareSummary(Out):
    name: str
    """The hardware profile's name."""
    gpu: str
    """The GPU, as its datasheet names it."""
    hbm_bytes: NonNegativeInt
    """One GPU's HBM capacity."""
    usable_bytes: NonNegativeInt
    """What this plan leaves of the HBM for weights, states and activations (`memory.usable_bytes`)."""
    gpus_per_node: int
    """GPUs per node (one NVLink domain's share of the plan's GPUs)."""


class RecomputeOut(Out):
    """The recompute policy as the launchers spell it (Megatron-LM `--recompute-*`)."""

    label: str
    """One phrase: `none`, `selective`, `selective(core_attn+mlp)`, `full`, `full(block 2)`, `full(uniform 4)`."""
    method: str | None
    """Full recompute: `uniform` or `block`; None otherwise."""
    layers: int | None
    """Full recompute: N of the method (None: every layer its own checkpoint)."""
    modules: list[str]
    """Selective recompute: the modules re-run; empty otherwise."""
    recomputed_layers_per_chunk: list[int]
    """Full recompute: layers of each model chunk whose forward re-runs in the backward."""


class PlanOut(Out):
    tp: int
    """Tensor-parallel size t."""
    pp: int
    """Pipeline-parallel size p (pipeline ranks)."""
    dp: int
    """Data-parallel size d = GPUs / (t·p·cp)."""
    vp: int
    """Model chunks per pipeline rank (1 without interleaving)."""
    cp: int
    """Context-parallel size cp (the sequence split over cp GPUs)."""
    schedule: str
    """The pipeline schedule (pplan.schedules: 1f1b, interleaved-1f1b, zbv, ...)."""
    micro_batch: int
    """Sequences per micro-batch b."""
    num_microbatches: int
    """Micro-batches per step m = global batch / (b·d)."""
    global_batch: int
    """Sequences per optimizer step."""
    seq_len: int
    """Tokens per sequence s."""
    recompute: str
    """The mode: none, selective or full (`recompute_policy` has the details)."""
    recompute_policy: RecomputeOut
    """The recompute policy in full, as the launchers spell it."""
    sequence_parallel: bool
    """Sequence parallelism: the norm and dropout activations split over the t ranks."""
    flash_attention: bool
    """A fused attention kernel that keeps no s×s score matrix."""
    zero_stage: int
    """ZeRO stage over the data-parallel GPUs: 0 none, 1 optimizer states, 2 and gradients, 3 and weights."""
    grad_dtype: str
    """The gradients' (and their reduction's) data type: fp32 or bf16."""
    activation_model: str
    """How activation memory is counted: `itemised` (tensor by tensor, pplan.cost.activations) or `korthikanti`
    (Korthikanti et al. 2022's closed form)."""
    gpus: int
    """GPUs in all: t·p·cp·d."""
    layers_per_chunk: list[int]
    """Transformer layers of each model chunk, in pipeline order (p·v chunks)."""
    tokens_per_step: int
    """Tokens per optimizer step: global batch × s."""
    offload_modules: list[str] = Field(default_factory=list)
    """Activation offload to host memory: the modules whose saved inputs are offloaded (Megatron-LM
    `--offload-modules`), in canonical order; empty when off."""
    shard_group: int | None = None
    """Hybrid sharding (HSDP, ZeRO ≥ 1): the S GPUs each sharded state is divided over, S < d·cp; null when the
    states are sharded over all d·cp data-parallel GPUs (`memory.bytes_per_param.shards` is the divisor)."""
    shard_replicas: int = 1
    """Copies of each shard across the data-parallel GPUs, (d·cp)/S: the all-reduce of the shard's gradients once
    per step spans them (1 without hybrid sharding)."""
    reshard_after_forward: bool = True
    """ZeRO-3: gathered weights are freed after each unit's forward and gathered again for its backward; false
    keeps the rank's whole weights gathered from forward to backward (one all-gather per micro-batch)."""
    stack: str = "megatron-core"
    """The software stack whose overlap and fusion rules the step time applies (pplan.profiles.stacks)."""
    overlap_p2p_comm: bool = True
    """megatron-core's interleaved schedule overlaps its pipeline sends (false: they block the sender)."""
    precision: str = "bf16"
    """GEMM precision of the layers' Linears: bf16, fp8 or mxfp8 (pplan.model.precision)."""
    fp8_param_gather: bool = False
    """FP8 plans: the FP8 Linears' weights kept in FP8 only (Megatron's --fp8-param-gather)."""
    fp8_swiglu_input: bool = False
    """FP8 plans, routed models: the experts' SwiGLU input kept in FP8 too (DeepSeek-V3's framework)."""
    moment_dtype: str = "fp32"
    """Adam's moments: fp32 or bf16 (12 or 8 bytes of optimizer state per parameter)."""
    ep: int = 1
    """Expert parallel (routed models): ranks the routed experts are split over."""
    etp: int = 1
    """Expert tensor parallel (routed models): ranks each expert's matrices are split over."""
    release: str | None = None
    """The stack release whose recipe knobs were taken where no flag set them (null: none named)."""
    tp_comm_overlap: bool = False
    """Tensor-parallel communication overlapped with the GEMMs (Transformer Engine's userbuffers; t > 1)."""
    moe_dispatcher: str = "alltoall"
    """Routed models: the token dispatcher (alltoall, allgather, deepep, hybridep or ncclep)."""
    moe_ep_overlap: bool = False
    """Routed models: the expert all-to-all overlapped with another micro-batch's compute (where the cut allows)."""
    cuda_graph_scope: list[str] = Field(default_factory=list)
    """Routed models: what CUDA graphs capture (empty: every kernel launched by the host)."""
    moe_permute_fusion: bool = False
    """Routed models: fused token permutation kernels."""
    moe_router_fusion: bool = False
    """Routed models: fused router kernels."""
    moe_fused_grouped_mlp: bool = False
    """Routed models: the fused (CuTeDSL) grouped MLP."""
    moe_force_balance: bool = False
    """Routed models: routing forced to balance (benchmark runs), else the imbalance factor."""


class BytesPerParamOut(Out):
    weights: float
    """Bytes of weights per parameter on one GPU (after any ZeRO-3 sharding)."""
    grads: float
    """Bytes of gradients per parameter on one GPU (after any ZeRO-2/3 sharding)."""
    optimizer: float
    """Bytes of optimizer state (master weights and Adam's moments) per parameter on one GPU (after any
    sharding)."""
    total: float
    """weights + grads + optimizer."""
    shards: int
    """Data-parallel GPUs the sharded parts are divided over (d·cp, or the shard group S under hybrid
    sharding)."""


class StageMemory(Out):
    stage: int
    """Pipeline rank."""
    layers: int
    """Transformer layers this rank holds, over all its chunks."""
    chunks: list[int]
    """Model chunks (virtual stages) this rank holds."""
    params: float
    """Parameters one GPU of this rank holds (after tensor parallelism)."""
    weights_bytes: NonNegativeInt
    """Weights one GPU of this rank holds."""
    grads_bytes: NonNegativeInt
    """Gradients one GPU of this rank holds."""
    optimizer_bytes: NonNegativeInt
    """Optimizer states (master weights, Adam's moments) one GPU of this rank holds."""
    activation_bytes: NonNegativeInt
    """Transformer layers' activations for every micro-batch in flight."""
    extra_activation_bytes: NonNegativeInt
    """Embedding, output-layer, logits and loss buffers in flight."""
    recompute_working_bytes: NonNegativeInt
    """Transient of one recomputed layer (0 without recomputation)."""
    gathered_weights_bytes: NonNegativeInt = 0
    """ZeRO-3: the gathered weights of the running and the prefetched layer, or without resharding after the
    forward the rank's whole BF16 weights less its shard (0 otherwise)."""
    offload_buffer_bytes: NonNegativeInt = 0
    """Activation offload: one layer's offloaded tensors in transit to the host plus one layer's reloaded ahead of
    its backward (0 without offload); dynamic, included in `total_bytes`."""
    host_offload_bytes: NonNegativeInt = 0
    """Activation offload: peak bytes of offloaded activations this GPU keeps in host memory (the micro-batches in
    flight × their offloading layers × `memory.offload_bytes_per_layer`); not in `total_bytes`."""
    fragmentation_bytes: NonNegativeInt = 0
    """The caching allocator's fragmentation: `memory.fragmentation_fraction_of_dynamic` of the dynamic bytes
    (activation, extra activation, recompute working, gathered weights and offload buffer bytes); included in
    `total_bytes`."""
    fp8_weight_cache_bytes: NonNegativeInt = 0
    """FP8 only: the quantised copies of the Linears' weights (a copy and its transpose, or MXFP8's row-wise and
    column-wise copies with scales) kept through the step; included in `total_bytes`."""
    in_flight_microbatches: float
    """Peak micro-batches in flight at once, in units of one average stage (L/p layers)."""
    in_flight_chunk_microbatches: list[int]
    """Per chunk the rank holds: its own peak of micro-batches in flight (peaks need not coincide)."""
    total_bytes: NonNegativeInt
    """Everything one GPU of this rank needs at its peak (the parts above that say they are included)."""
    headroom_bytes: int
    """usable_bytes − total_bytes: what is left (negative: over by that much)."""
    fits: bool
    """Whether total_bytes fits in the usable memory."""


class UsablePartOut(Out):
    name: str
    """`context`, `label gap` or `NCCL`."""
    bytes: NonNegativeInt
    """Bytes this part takes off the HBM."""
    source: str
    """Where the figure comes from (the profile field, and for NCCL the communicators counted)."""


class MemoryOut(Out):
    usable_bytes: NonNegativeInt
    """The HBM less `usable_parts` (pplan.cost.usable): what this plan leaves for weights, states and
    activations."""
    usable_parts: list[UsablePartOut] = Field(default_factory=list)
    """What is taken off the HBM, part by part: CUDA context and workspaces, label-to-driver gap, NCCL buffers."""
    nccl_communicators: list[str] = Field(default_factory=list)
    """The NCCL communicators a rank of this plan opens, each as "group members" (e.g. `tensor 8`)."""
    fragmentation_fraction_of_dynamic: float = 0.0
    """The caching allocator's fragmentation as a fraction of each stage's dynamic bytes (added to its need)."""
    fits: bool
    """True when every stage fits."""
    bytes_per_param: BytesPerParamOut
    """Bytes per parameter of weights, gradients and optimizer states on one GPU."""
    activation_bytes_per_layer: NonNegativeInt
    """One layer, one micro-batch, under the plan's activation model."""
    activation_items_per_layer: dict[str, int]
    """The tensors behind `activation_bytes_per_layer`, by `block/tensor` name, in bytes."""
    activation_bytes_per_chunk: list[NonNegativeInt]
    """One micro-batch's activations kept on each model chunk (its layers, recomputed or not)."""
    in_flight_source: str
    """Where the in-flight counts come from."""
    stages: list[StageMemory]
    """Memory per pipeline rank, one GPU of it."""
    offload_bytes_per_layer: NonNegativeInt = 0
    """Activation offload: bytes one layer (one that keeps its activations) moves to host memory per micro-batch;
    already left out of `activation_bytes_per_layer`. 0 when off."""
    offload_items_per_layer: dict[str, int] = Field(default_factory=dict)
    """The tensors behind `offload_bytes_per_layer`, itemised as in `activation_items_per_layer`."""
    host_offload_bytes: NonNegativeInt = 0
    """Activation offload: the most host memory one GPU of any stage holds at the peak (check it against the
    node's RAM ÷ GPUs per node); 0 when off."""


class ChunkPassTimes(Out):
    chunk: int
    """The model chunk (virtual stage), in pipeline order."""
    f_s: float
    """Forward of one micro-batch through the chunk."""
    i_s: float
    """Input-gradient backward (with any recomputation)."""
    w_s: float
    """Weight-gradient backward."""


class PipelineOut(Out):
    pass_durations: str
    """`analytic` (pass times from FLOPs, bytes and links; hops cost their P2P message time) or `unit`
    (F = I = W = 1 on every stage, free hops)."""
    bubble_source: str
    """How the bubble was measured, in words (the simulated schedule and where its pass times come from)."""
    bubble_fraction_of_ideal: float
    """Idle / ideal compute, measured off the simulated schedule: (busiest-rank idle) / (its compute)."""
    bubble_fraction_of_step: float
    """Idle / total step, measured off the simulated schedule: (makespan − busiest compute) / makespan."""
    bubble_in_window_fraction_of_ideal: float
    """Qi et al.'s zero-bubble measure: the most idle time inside any rank's own first-to-last-action window,
    over the busiest rank's compute (what remains when the optimizer step's synchronisation is removed)."""
    closed_form_bubble_fraction_of_ideal: float
    """The closed form for uniform stages and unit passes (pplan.schedules.closed_forms), for comparison: the
    published one, or one derived by pplan where none is published (interleaved zero bubble, looped BFS)."""
    closed_form_bubble_fraction_of_step: float
    """The same closed form as a fraction of the step: idle / (idle + compute)."""
    makespan: float
    """Simulated forward-backward time of one step (seconds under `analytic`, pass units under `unit`)."""
    peak_in_flight_per_stage: list[int]
    """Peak micro-batches in flight per virtual stage (chunk), measured off the schedule."""
    chunk_pass_times: list[ChunkPassTimes]
    """Per model chunk (analytic durations only)."""
    p2p_message_bytes: NonNegativeInt
    """One activation (or gradient) message across a stage boundary."""
    p2p_messages_per_step: int
    """Cross-rank forward plus backward messages over the whole pipeline per step, counted off the schedule."""
    p2p_bytes_per_step: NonNegativeInt
    """Bytes of all cross-rank messages per step: p2p_message_bytes × p2p_messages_per_step."""


class CommunicationOut(Out):
    tp_bytes_per_microbatch: NonNegativeInt
    """Tensor-parallel bytes one GPU sends per micro-batch over all L layers, the model ends left out: per layer
    2 forward and 2 backward collectives on the s·b·h activation, each a ring moving 2(t−1)/t of it (an
    all-reduce, or an all-gather + reduce-scatter pair under sequence parallelism; Narayanan et al. 2021, arXiv
    2104.04473 §3.2), plus the forward's 2 again under full recompute."""
    tp_bytes_per_microbatch_per_stage: list[NonNegativeInt]
    """Per pipeline rank: its own layers plus its model ends."""
    tp_collectives_per_layer: int
    """Tensor-parallel collectives per layer and micro-batch, forward and backward."""
    dp_bytes_per_step: NonNegativeInt
    """Data-parallel bytes one GPU sends per step, worst rank."""
    dp_bytes_per_step_per_stage: list[NonNegativeInt]
    """Per pipeline rank: the data-parallel bytes one of its GPUs sends per step."""
    dp_sync_s: float = 0.0
    """The worst pipeline rank's data-parallel traffic per step on its link, in seconds: the gradient reduction
    (with ZeRO-3's weight gathers); `performance.breakdown_s.dp_comm` is the part the step waits for, the rest is
    hidden behind the backward passes."""
    dp_gather_s: float = 0.0
    """ZeRO-1/2: the updated parameters' all-gather after the optimizer, in seconds (0 otherwise)."""


class ExpertsOut(Out):
    """A routed (mixture-of-experts) model's expert parallelism: how its experts are split, what one routed
    layer sends per micro-batch, how much of it the schedule hides, and each stage's parameters by part."""

    num_experts: int
    """Routed experts per routed layer E."""
    top_k: int
    """Experts each token is routed to k."""
    ep: int
    """Expert-parallel size: ranks the routed experts are split over."""
    etp: int
    """Expert tensor-parallel size: ranks each expert's matrices are split over."""
    expert_dp: int
    """Expert data parallel: t·cp·d / (ep·etp) copies of each expert shard (their states shard over these)."""
    experts_per_rank: int
    """Routed experts one GPU holds per routed layer: E / ep."""
    routed_layers: int
    """Layers with routed experts."""
    dense_layers: int
    """Layers with a dense MLP instead."""
    dispatch_bytes_per_microbatch: float
    """One rank's dispatch all-to-all in one routed layer: n·k·h·2 bytes (n = s/cp·b/t tokens routed by the
    rank, k copies each, BF16); the combine sends as much back, and the backward repeats both."""
    a2a_bytes_per_microbatch_per_stage: list[float]
    """Per pipeline rank: all its routed layers' dispatch and combine bytes, forward and backward."""
    a2a_link: str
    """Where the ep group's all-to-all runs (NVLink inside a node, or NVLink plus each GPU's NIC)."""
    a2a_forward_s: float
    """One routed layer's dispatch + combine in the forward, seconds (the backward's are the same)."""
    a2a_exposed_forward_s: float
    """What the step waits for of one routed layer's forward dispatch and combine, seconds (0 where the schedule
    hides them)."""
    a2a_exposed_backward_s: float
    """What the step waits for of them, per routed layer (0 where the schedule hides them all)."""
    overlap: str
    """The rule that hides them, in words."""
    stage_params: list[dict[str, float]]
    """Per pipeline rank, one GPU's parameters by part: attention, routed experts, router and shared experts,
    dense MLP, norms, model ends (embedding, output layer, multi-token prediction)."""
    dispatcher: str = "alltoall"
    """The token dispatcher (pplan.cost.moe_dispatch): alltoall, allgather, deepep, hybridep or ncclep."""
    copies_per_token: float = 0.0
    """Token copies one dispatch carries per routed token: k (NCCL all-to-all) or k_eff, the expected distinct
    destination ranks (deduplicating dispatchers)."""
    rows_per_expert: float = 0.0
    """r = n·k·OF/E_l: rows each local expert's grouped GEMM takes per micro-batch on the busiest rank."""
    grouped_gemm_factor: float = 1.0
    """r/(r + r½): the grouped GEMM's efficiency relative to large groups."""
    overload: float = 1.0
    """OF: the busiest expert rank's tokens over the balanced share (1 with forced balancing)."""
    eager_kernels: list[int] = Field(default_factory=list)
    """Kernels per routed layer and micro-batch the host launches, forward and backward (outside CUDA graphs)."""
    syncs_per_forward: int = 0
    """Device-host syncs of the dispatch per routed layer's forward (none under a whole-step graph)."""
    host_exposed_forward_s: float = 0.0
    """What a routed layer's forward waits for the host (syncs, launches beyond GPU time), seconds."""


class SensitivityOut(Out):
    input: str
    """The model input varied (e.g. GEMM efficiency, a link's bandwidth)."""
    minus_10pct_step_change: float
    """Relative step-time change when the input falls by 10 %."""
    plus_10pct_step_change: float
    """Relative step-time change when the input rises by 10 %."""


class ExtrapolationOut(Out):
    axis: str
    """t, p, cp, cp across nodes, ZeRO, model size, sequence, GPUs, schedule, precision, TP overlap, stack, experts or
    GPU."""
    detail: str
    """The plan's value against the calibrated range."""


class BandFiguresOut(Out):
    low: float
    """10th percentile of the runs' errors, (predicted − published) / published."""
    high: float
    """90th percentile."""
    mape: float
    """Mean absolute error."""


class CalibrationBandOut(Out):
    """The validated runs a plan's interval is read from (pplan.cost.uncertainty.Band)."""

    group: str
    """The runs, in words: their routing, then hardware, sequence band, precision and stack where enough remain."""
    runs: int
    """How many validated runs the band is read from."""
    left_out: BandFiguresOut
    """Each run predicted with its own set left out of every fit: what the interval uses."""
    in_sample: BandFiguresOut
    """Each run predicted with fits made on every set."""


class PerformanceOut(Out):
    step_s: float
    """Predicted wall-clock seconds per optimizer step."""
    step_interval_s: tuple[float, float]
    """[low, high]: where the measured step should fall, from the leave-one-set-out errors of the validated runs
    like the plan (their 10th to 90th percentile, `calibration_band`), widened for every extrapolation
    (pplan.cost.uncertainty)."""
    tokens_per_s_interval: tuple[float, float]
    """[low, high] tokens per second: the step interval's ends inverted."""
    calibration_error_band: tuple[float, float]
    """[e_lo, e_hi]: the band's errors, (predicted − published) / published, before widening (at least ±15 % on a
    GPU type with no validated run)."""
    calibration_band: CalibrationBandOut
    """The validated runs the band is read from, in and out of sample."""
    confidence: str
    """What pplan says of this step time in one sentence: calibrated or not, on which runs, the band (the line
    `explain`, `recommend` and `size` print)."""
    extrapolated: bool
    """The plan lies outside the calibrated envelope on at least one axis (`extrapolation`)."""
    extrapolation: list[ExtrapolationOut]
    """Each axis on which the plan leaves the runs pplan was calibrated on; empty inside the envelope."""
    tokens_per_s: float
    """Predicted tokens per second, the whole job: tokens_per_step / step_s."""
    model_tflops_per_gpu: float
    """Model FLOPs (no recomputation) per second per GPU, TFLOP/s, the attention scores counted over the full s×s
    matrix: the non-causal MFU convention (Narayanan et al. 2021, Korthikanti et al. 2022, PaLM)."""
    model_tflops_per_gpu_causal: float
    """The same with the attention core counted over the causal half of the scores (s²/2), as newer performance
    tables count."""
    hardware_tflops_per_gpu: float
    """Model FLOPs plus recomputed work per second per GPU (the HFU convention; Narayanan's Eq. 3 with full
    recompute; attention counted non-causally)."""
    mfu: float
    """Model FLOPs utilisation of the BF16 peak, non-causal convention (`model_tflops_per_gpu`)."""
    mfu_causal: float
    """Model FLOPs utilisation of the BF16 peak, causal convention (`model_tflops_per_gpu_causal`)."""
    hfu: float
    """Hardware FLOPs utilisation of the BF16 peak (`hardware_tflops_per_gpu`)."""
    mfu_fp8_peak: float | None = None
    """FP8 and MXFP8 plans: model FLOPs utilisation of the FP8 peak (non-causal convention; the Linears' share of
    the work runs against it); null under bf16."""
    breakdown_s: dict[str, float]
    """On the busiest pipeline rank: compute, recompute (forward work re-run in the backward, with the collectives
    it repeats), tp_comm (exposed tensor-parallel), bubble, p2p (exposed point-to-point), dp_comm (exposed
    data-parallel), optimizer; sums to step_s."""
    calibrated: bool
    """Whether the plan's hardware has validated runs with its routing, precision and stack, its profile's figures
    those they were predicted with (pplan.cost.uncertainty.confidence)."""
    train_tokens: float | None
    """The token budget asked for (`--train-tokens`), or null."""
    time_to_train_s: float | None
    """Days = time_to_train_s / 86400, for train_tokens at this throughput."""
    sensitivity: list[SensitivityOut]
    """How the step time moves when each model input changes by ±10 %."""


class ExplainReport(Out):
    schema_: str = Field(EXPLAIN_SCHEMA, alias=SCHEMA_KEY)
    """The document's version: pplan.explain/2."""
    model: ModelSummary
    """The model's shape."""
    hardware: HardwareSummary
    """The hardware's name and memory."""
    plan: PlanOut
    """The configuration explained."""
    derivations: list[Derivation]
    """Each derived quantity with its formula and numbers substituted."""
    memory: MemoryOut
    """Memory per GPU, per pipeline rank, part by part, against the usable memory."""
    pipeline: PipelineOut
    """The simulated schedule: bubble, pass times, point-to-point messages."""
    communication: CommunicationOut
    """Tensor- and data-parallel traffic per GPU."""
    experts: ExpertsOut | None = None
    """Routed models only: expert parallelism, all-to-all bytes and their overlap, parameters by part."""
    placement: PlacementOut | None = None
    """The GPUs on the hardware's NVLink domains: how many, whether whole, which groups cross one and their link
    (null in documents written before pplan reported it)."""
    performance: PerformanceOut | None
    """Step time and throughput (analytic pass durations only)."""
    assumptions: list[str]
    """Everything pplan assumed rather than was told."""
    advice: list[str]
    """Remedies and warnings worth a look (bubble, imbalance, memory)."""
