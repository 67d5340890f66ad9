"""Layer 3: the scenario format, declared once: every key of a scenario file with its type, range or choices, default,
unit, meaning, source and where it may appear.

:mod:`geopipe_env.scenario.loader` reads each key through its declaration (the allowed keys of every section, the type and
range checks, the defaults), :mod:`geopipe_env.scenario.schema` turns the declarations into the JSON Schema, and
:func:`key_table` writes the key table of ``docs/scenarios.md``; ``tests/test_scenario_format.py`` fails if the
loader, the schema or the page disagrees with a declaration. The loader alone keeps the rules that tie keys together
(one price per region, every job fits the world, ...), which the page lists in prose.

A declaration is a :class:`Key`; :data:`SECTIONS` holds each section's keys in file order. A shape key may stand
in the workload, in a job class and (where :attr:`Key.trace_column` is set) as a column of a trace.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from geopipe_env.scenario import bundled
from geopipe_env.base.catalog import DATASET_CATALOG, GPU_CATALOG, MODEL_CATALOG
from geopipe_env.physics.pipeline import OPTIMIZER_STATES
from geopipe_env.physics.schedule import ONE_F_ONE_B, SCHEDULES
from geopipe_env.scenario.types import MAX_BACKGROUND_FRACTION, PIPELINE_SIZINGS, SIZING_KSTAR

SCHEMA_VERSION = 1
DEFAULT_START_UTC = "2023-01-01T00:00Z"
DEFAULT_PUE = 1.0  # the BACE-Pipe paper (arXiv 2605.25375) does not model cooling
DEFAULT_INTER_LATENCY_MS = 50.0  # mid-range of the 30–100 ms that CrossPipe (arXiv 2507.00217) assumes between regions
DEFAULT_INTRA_BANDWIDTH_GBPS = 100.0  # within-instance figure of DT-FM (DS3Lab/DT-FM, scheduler/generate_sim_com_matrices.py)
DEFAULT_INTRA_LATENCY_MS = 0.05  # assumed: a hop inside one region's datacenter
DEFAULT_BACKGROUND_PERIOD_H = 24.0  # diurnal
RULES = ("endpoint_mean", "matrix")
ARRIVAL_PROCESSES = ("batch", "poisson", "trace", "replay")
PRICE_UNITS = {"usd_per_mwh": 1.0 / 1000.0, "usd_per_kwh": 1.0}  # factor to USD/kWh


class _Required:
    def __repr__(self) -> str:
        return "REQUIRED"


REQUIRED: Any = _Required()  # a key's default when the file must give it

# The kinds of value a key holds. Scalars: number, integer, boolean, string, choice (one of ``choices``), time (an
# ISO 8601 UTC time or "random"), const (exactly ``default``). Lists: choices (distinct names from ``choices``),
# names (GPU names), range / int_range ([low, high]), items (entries of the section ``keys``, or catalog names where
# ``choices`` is set). Mappings: section (the section ``keys``), entries (name → the section ``keys``), matrix
# (src → dst → the section ``keys``).
KINDS = (
    "number", "integer", "boolean", "string", "choice", "time", "const",
    "choices", "names", "range", "int_range", "items", "section", "entries", "matrix",
)


@dataclass(frozen=True)
class Key:
    """One key of a scenario file.

    Attributes:
        name: the key as written.
        kind: one of :data:`KINDS`.
        meaning: what it sets (the docs' notes).
        unit: its unit, or the symbol it stands for in the formulas ("" for none).
        default: the value the loader uses when the key is absent or null; :data:`REQUIRED` when the file must give
            it; None when absence means "not set".
        default_text: the docs' default where the value alone does not say it.
        minimum, exclusive, maximum: a number's range (``exclusive``: strictly above ``minimum``); an integer's
            minimum.
        choices: the names a ``choice``, ``choices``, or catalog ``items`` key takes (a function, for names that
            come from bundled data).
        keys: the section a ``section``, ``entries``, ``matrix`` or ``items`` key holds.
        trace_column: a shape key that a trace row may set in a column of that name.
        relative_path: a string key naming a file, relative to the folder of the scenario file that writes it (so a
            base file's paths keep its folder when another file extends it).
        source: where its default comes from.
    """

    name: str
    kind: str
    meaning: str
    unit: str = ""
    default: Any = None
    default_text: str = ""
    minimum: float | None = None
    exclusive: bool = False
    maximum: float | None = None
    choices: Callable[[], Sequence[str]] | None = None
    keys: str | None = None
    trace_column: bool = False
    relative_path: bool = False
    source: str = ""

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise ValueError(f"{self.name}: unknown kind {self.kind!r}")

    @property
    def required(self) -> bool:
        return self.default is REQUIRED

    def choice_names(self) -> tuple[str, ...]:
        return tuple(self.choices()) if self.choices else ()

    def range_text(self) -> str:
        """Its range as the loader's messages and the docs write it, e.g. ``> 0 and <= 1``."""
        parts = []
        if self.minimum is not None:
            parts.append(f"{'>' if self.exclusive else '>='} {self.minimum:g}")
        if self.maximum is not None:
            parts.append(f"<= {self.maximum:g}")
        return " and ".join(parts)


def _schedules() -> tuple[str, ...]:
    return SCHEDULES


def _sizings() -> tuple[str, ...]:
    return PIPELINE_SIZINGS


def _models() -> tuple[str, ...]:
    return tuple(MODEL_CATALOG)


def _datasets() -> tuple[str, ...]:
    return tuple(DATASET_CATALOG)


def _gpus() -> tuple[str, ...]:
    return tuple(GPU_CATALOG)


def _fixed(*names: str) -> Callable[[], tuple[str, ...]]:
    return lambda: names


POSITIVE = {"minimum": 0.0, "exclusive": True}
NON_NEGATIVE = {"minimum": 0.0}
FRACTION = {"minimum": 0.0, "exclusive": True, "maximum": 1.0}
PROBABILITY = {"minimum": 0.0, "maximum": 1.0}
COUNT = {"minimum": 1}

# Keys that set a job's shape: in the workload (the default job), in a job class, and some as trace columns.
SHAPE_KEYS = (
    Key("micro_batch_size", "integer", "sequences per micro-batch", "b", 1, **COUNT),
    Key("seq_len", "integer", "sequence length", "s, tokens", 2048, **COUNT),
    Key("num_microbatches", "integer", "micro-batches per replica and iteration; not with `global_batch_size`", "M", 32,
        **COUNT),
    Key("global_batch_size", "integer", "sequences per iteration over all replicas: `M = global_batch_size / (b·d)`, "
        "which must divide evenly", "sequences", **COUNT, trace_column=True),
    Key("gpus_per_stage", "integer", "tensor-parallel GPUs per stage of one replica, inside a node", "t", 1, **COUNT,
        trace_column=True),
    Key("data_parallel", "integer", "pipeline replicas; a stage's replicas share one region (`t·d` GPUs)", "d", 1,
        **COUNT, trace_column=True),
    Key("pipeline_sizing", "choice", "how S is chosen: BACE-Pipe's K\\*, or the fewest stages that fit memory; not "
        "with `pipeline_stages`", default=SIZING_KSTAR, choices=_sizings),
    Key("pipeline_stages", "integer", "fixes S; at most the layer count, and enough stages to fit memory", "S",
        **COUNT, trace_column=True),
    Key("max_stages", "integer", "cap on the stage count K\\*", default_text="none (one stage per layer)", **COUNT),
    Key("pipeline_schedule", "choice", "this shape's schedule; not with `pipeline_schedules`",
        default_text="the scenario's", choices=_schedules, trace_column=True),
    Key("pipeline_schedules", "choices", "the schedules a job accepts: each candidate placement is timed with every "
        "one that fits memory there and runs the fastest (the candidate's `schedule` says which). K\\* is sized, and "
        "BACE-Pipe's admission test is run, with the first", choices=_schedules),
    Key("virtual_stages", "integer", "as the top-level key, for this shape", "v", default_text="the scenario's",
        **COUNT, trace_column=True),
    Key("context_parallel", "integer", "context-parallel ranks: a replica's stage holds `t·c` GPUs, each with `1/c` of "
        "the sequence (compute, activations and the stage-to-stage message inside a region split by c; the ranks' "
        "exchange stays inside the stage's region, overlapped with compute); the optimizer state is sharded over "
        "`d·c` and the all-reduce spans them", "c", 1, **COUNT, trace_column=True),
    Key("recompute", "boolean", "activations checkpointed at layer boundaries (memory: one layer input per layer and "
        "micro-batch in flight) and recomputed in the backward (calibrated compute charges one more forward); `false` "
        "keeps every layer's activations (34·b·s·h bytes per layer)", default=True),
    Key("optimizer_state", "choice", "the optimizer state's precision, sharded over the `d·c` ranks that hold the same "
        "weights: `fp32`, fp32 master weights and Adam moments (12 bytes per parameter); `bf16`, Adam moments in "
        "bf16 and no master copy (4 bytes per parameter), as NeMo's distributed Adam keeps them when its state's "
        "dtype is the model's. Memory only", default="fp32", choices=_fixed(*OPTIMIZER_STATES)),
)
# Pairs of shape keys of which one replaces the other: a class that gives one drops the other inherited.
EXCLUSIVE_SHAPE_KEYS = (
    ("num_microbatches", "global_batch_size"), ("pipeline_sizing", "pipeline_stages"),
    ("pipeline_schedule", "pipeline_schedules"),
)

_MODELS = Key("models", "items", "catalog keys (case-insensitive; `base/catalog.py` cites each config) or inline models; "
              "an inline model without a name is called `model-<i>`", choices=_models, keys="model",
              default_text="required unless trace or job classes")
_DATASETS = Key("datasets", "items", "catalog keys or inline datasets", choices=_datasets, keys="dataset",
                default_text="required unless trace or job classes")

SECTIONS: dict[str, tuple[Key, ...]] = {
    "top": (
        Key("extends", "string", "start from that scenario (a built-in name or a YAML path) and deep-merge this file "
            "over it: mappings merge key by key, any other value (lists included) replaces the base's; chains are "
            "allowed, cycles are errors. A file path inside the base keeps the base's folder", default_text="none"),
        Key("version", "const", "schema version; only 1", default=SCHEMA_VERSION),
        Key("name", "string", "the scenario's name", default_text='file stem ("scenario" for a dict)'),
        Key("horizon_h", "number", "episode truncation; stored as `horizon_s`", "hours", REQUIRED, **POSITIVE),
        Key("start_utc", "time", "where hourly series start, stored as `start_hour` (hours since 2023-01-01T00Z): an "
            "ISO 8601 time on a whole hour, or `\"random\"` for a random day each episode. Any year's month/day/hour "
            "maps onto the 2023 calendar of the bundled series (29 February is rejected); offsets are converted to "
            "UTC", default=DEFAULT_START_UTC),
        Key("mfu", "number", "an end-to-end model FLOPs utilisation applied to every GPU's peak: "
            "`t_f = 2·(P/S)·b·s / (t·peak·mfu)`, backward `2·t_f`. Without it, compute is calibrated: each GPU "
            "type's `kernel_efficiency`, attention FLOPs counted, and recomputation charged (see "
            "[calibrated compute](calibration.md)); every GPU the world can draw then needs one", "fraction",
            default_text="none: calibrated", **FRACTION),
        Key("pipeline_schedule", "choice", "every job's schedule unless its shape sets one; sets in-flight activations "
            "(memory) and how an iteration is timed ([schedules](schedules.md))", default=ONE_F_ONE_B,
            choices=_schedules),
        Key("virtual_stages", "integer", "chunks of the model per device, for `interleaved-1f1b` (v >= 2) and `hanayo` "
            "(even v); a shape may set its own", "v", 1, **COUNT),
        Key("bill_idle_capacity", "boolean", "also bill GPUs no job is using, at idle power", default=False,
            source="BACE-Pipe, arXiv 2605.25375, bills only allocated GPUs"),
        Key("gpus", "entries", "override catalog GPUs (any subset of fields) or add new ones (the first four fields); "
            "names match catalog keys case-insensitively", keys="gpu", default_text="the built-in catalog",
            choices=_gpus),
        Key("regions", "items", "the regions", keys="region", default=REQUIRED),
        Key("network", "section", "links between regions and within them", keys="network", default=REQUIRED),
        Key("workload", "section", "the jobs of an episode", keys="workload", default=REQUIRED),
        Key("randomize", "section", "per-episode draws from the env's RNG; each key draws only when set, so a scenario "
            "without it samples exactly the episodes it sampled before", keys="randomize", default_text="none"),
        Key("objective", "section", "the reward's balance", keys="objective", default_text="none"),
        Key("failures", "section", "GPUs that fail: a job that loses a GPU loses its work since its last checkpoint "
            "and waits again; the GPU is repaired ([Physics](physics.md#gpu-failures-checkpoints-and-restarts))",
            keys="failures", default_text="none: nothing fails"),
        Key("capacity_loss", "section", "regions that lose a share of their GPUs for a while, with notice; needs "
            "`failures` (its checkpoints and restarts) ([Physics](physics.md#gpu-failures-checkpoints-and-restarts))",
            keys="capacity_loss", default_text="none: regions keep their GPUs"),
    ),
    "capacity_loss": (
        Key("per_region_day", "number", "how often a region loses GPUs: a capacity reservation that ends, or spot "
            "capacity reclaimed (in most such events the same instance type in a zone goes within minutes)",
            "per region-day", REQUIRED, **NON_NEGATIVE),
        Key("fraction", "number", "the share of the region's GPUs an event takes (free ones first, then those of "
            "the jobs that launched last)", "fraction", REQUIRED, **FRACTION),
        Key("duration_h", "number", "how long they stay away", "hours", REQUIRED, **POSITIVE),
        Key("notice_s", "number", "warning before the GPUs go: a job whose checkpoint takes no longer writes one and "
            "loses no work", "s", 120.0, **NON_NEGATIVE,
            source="the two-minute notice of an EC2 Spot Instance interruption (AWS EC2 User Guide)"),
    ),
    "failures": (
        Key("per_gpu_day", "number", "how often each GPU in service fails, by every cause that stops a job; a GPU type "
            "may set its own (`gpus.<name>.failures_per_gpu_day`). Llama 3 405B's pre-training saw 419 unexpected "
            "interruptions in 54 days on 16,384 H100, 4.7×10⁻⁴ (Dubey et al., arXiv 2407.21783); Meta's research "
            "clusters about 3×10⁻³ (Kokolis et al., HPCA 2025)", "per GPU-day", REQUIRED, **NON_NEGATIVE),
        Key("checkpoint_interval_h", "number", "running time between a job's checkpoints", "hours",
            default_text="Young/Daly: √(2·C·M) per job and placement", **POSITIVE),
        Key("checkpoint_gbps", "number", "the rate at which each GPU writes (and reads back) its shard of a checkpoint "
            "of 14 bytes a parameter (6 with `optimizer_state: bf16`)", "Gbit/s per GPU", 1.0, **POSITIVE,
            source="Llama 3's checkpoint storage sustains 2 TB/s for 16,384 GPUs (Dubey et al., arXiv 2407.21783), "
            "about 1 Gbit/s a GPU"),
        Key("restart_s", "number", "a restart's cost besides reading the checkpoint back", "s", 30.0, **NON_NEGATIVE,
            source="Pollux's restart cost (Qiao et al., OSDI 2021)"),
        Key("repair_h", "number", "how long a failed GPU stays out of service", "hours", REQUIRED, **POSITIVE),
    ),
    "gpu": (
        Key("tflops", "number", "peak dense BF16/FP16 throughput", "TFLOP/s", REQUIRED, **POSITIVE),
        Key("memory_gb", "number", "memory per GPU", "GB", REQUIRED, **POSITIVE),
        Key("busy_watts", "number", "board power when busy", "W", REQUIRED, **POSITIVE),
        Key("idle_watts", "number", "board power when idle; at most `busy_watts`", "W", REQUIRED, **NON_NEGATIVE),
        Key("kernel_efficiency", "number", "the fraction of peak its kernels reach, for calibrated compute (the catalog "
            "sets it for A100 and H100 only, from published runs)", "fraction", default_text="the catalog's, else none",
            **FRACTION),
        Key("failures_per_gpu_day", "number", "this type's failure rate, where the scenario has `failures`",
            "per GPU-day", default_text="`failures.per_gpu_day`", **NON_NEGATIVE),
    ),
    "region": (
        Key("id", "string", "unique region id", default=REQUIRED),
        Key("gpu", "string", "its GPU type: a catalog or `gpus` name", default=REQUIRED),
        Key("num_gpus", "integer", "its GPUs", default=REQUIRED, **COUNT),
        Key("access_bandwidth_gbps", "number", "required (> 0) under `endpoint_mean`", "Gbit/s", 0.0,
            default_text="0 (required under `endpoint_mean`)", **NON_NEGATIVE),
        Key("pue", "number", "facility power multiplier", default=DEFAULT_PUE, minimum=1.0,
            source="BACE-Pipe, arXiv 2605.25375, does not model cooling"),
        Key("price_usd_per_kwh", "number", "a constant price; exactly one of this, `price_market` or `price_csv`",
            "USD/kWh", default_text="—", **NON_NEGATIVE),
        Key("price_market", "choice", "a bundled hourly 2023 series, converted USD/MWh → USD/kWh on load; may be "
            "negative (real market outcomes)", default_text="—", choices=bundled.price_markets),
        Key("price_csv", "section", "your own hourly series (see below)", keys="price_csv", default_text="—"),
        Key("carbon_g_per_kwh", "number", "a constant carbon intensity; at most one of this or `carbon_zone`", "g/kWh",
            default_text="none", **NON_NEGATIVE),
        Key("carbon_zone", "choice", "a bundled hourly 2023 life-cycle intensity", default_text="none",
            choices=bundled.carbon_zones),
    ),
    "price_csv": (
        Key("path", "string", "a CSV with `datetime_utc` (hour-beginning, ISO 8601) and `column`, 8760 consecutive "
            "hourly rows from 1 January 00:00 UTC, relative to the folder of the scenario file that names it. Gaps, "
            "repeats, empty or NaN cells, and a unit that puts the median price outside 0.001–5 USD/kWh are errors",
            default=REQUIRED, relative_path=True),
        Key("column", "string", "the price column", default=REQUIRED),
        Key("unit", "choice", "the prices' unit", default=REQUIRED, choices=lambda: tuple(PRICE_UNITS)),
    ),
    "network": (
        Key("rule", "choice", "`endpoint_mean` (the BACE-Pipe paper's rule: every pair linked at the mean of the two "
            "access bandwidths) or `matrix` (each listed pair)", default=REQUIRED, choices=_fixed(*RULES)),
        Key("matrix", "matrix", "`src: {dst: {...}}`; a pair given one way holds both ways (see below)", keys="link",
            default_text="— (required under `matrix` with more than one region)"),
        Key("intra_region", "section", "hops between stages in the same region", keys="intra_region",
            default_text="100 Gbit/s, 0.05 ms"),
        Key("default_latency_ms", "number", "only under `endpoint_mean`: latency of pairs the matrix does not give",
            "ms, one-way", DEFAULT_INTER_LATENCY_MS, **NON_NEGATIVE,
            source="mid-range of the 30–100 ms that CrossPipe, arXiv 2507.00217, assumes between regions"),
        Key("background", "section", "share of every WAN link taken by other traffic: "
            "`mean + amplitude·sin(2π(h + phase_h)/period_h)`, clipped to [0, 0.95]", keys="background",
            default_text="none"),
        Key("degradation", "section", "WAN links whose bandwidth drops for a while (brown-outs): each link, both "
            "directions, as a Poisson process ([Physics](physics.md#gpu-failures-checkpoints-and-restarts))",
            keys="degradation", default_text="none"),
    ),
    "degradation": (
        Key("per_link_day", "number", "how often a link degrades", "per link-day", REQUIRED, **NON_NEGATIVE),
        Key("factor", "number", "the share of its bandwidth a degraded link keeps (overlapping events on a link do "
            "not compound)", "fraction", REQUIRED, **FRACTION),
        Key("duration_h", "number", "how long a degradation lasts", "hours", REQUIRED, **POSITIVE),
    ),
    "link": (
        Key("bandwidth_gbps", "number", "capacity per direction; only under `matrix`, where it is required",
            "Gbit/s", REQUIRED, **POSITIVE),
        Key("latency_ms", "number", "one-way latency (halve a measured round-trip time)", "ms", REQUIRED,
            **NON_NEGATIVE),
    ),
    "intra_region": (
        Key("bandwidth_gbps", "number", "per GPU between stages in one region", "Gbit/s",
            DEFAULT_INTRA_BANDWIDTH_GBPS, **POSITIVE,
            source="DT-FM's within-instance figure, scheduler/generate_sim_com_matrices.py in DS3Lab/DT-FM"),
        Key("latency_ms", "number", "one-way", "ms", DEFAULT_INTRA_LATENCY_MS, **NON_NEGATIVE,
            source="assumed: a hop inside one datacenter"),
    ),
    "background": (
        Key("mean_fraction", "number", "mean share of each WAN link", "fraction", REQUIRED, minimum=0.0,
            maximum=MAX_BACKGROUND_FRACTION),
        Key("amplitude_fraction", "number", "amplitude of the daily swing", "fraction", 0.0, minimum=0.0,
            maximum=MAX_BACKGROUND_FRACTION),
        Key("period_h", "number", "period of the swing", "hours", DEFAULT_BACKGROUND_PERIOD_H, **POSITIVE),
        Key("phase_h", "number", "phase of the swing", "hours", 0.0),
    ),
    "workload": (
        Key("num_jobs", "integer", "jobs per episode", default_text="required, except for a trace (row count)",
            **COUNT),
        Key("arrival", "section", "how jobs arrive", keys="arrival", default=REQUIRED),
        _MODELS,
        _DATASETS,
        Key("epochs", "number", "passes over the dataset; sets iterations with b·s·M·d tokens per iteration", "", 1.0,
            **POSITIVE),
        Key("trace", "section", "only with `process: trace`", keys="trace", default_text="—"),
        Key("job_classes", "items", "several kinds of job, each drawn with probability ∝ `weight`. A class inherits "
            "the workload's `models`, `datasets` and shape keys unless it sets them; not with a trace",
            keys="job_class", default_text="none"),
        *SHAPE_KEYS,
    ),
    "arrival": (
        Key("process", "choice", "`batch`: all at t = 0; `poisson`: exponential gaps of `mean_interarrival_h`; "
            "`trace`: the rows of `workload.trace.csv`; `replay`: the gaps and GPU-times of consecutive jobs of a "
            "bundled trace (`source`), re-timed to `mean_interarrival_h` (see below)", default=REQUIRED,
            choices=_fixed(*ARRIVAL_PROCESSES)),
        Key("mean_interarrival_h", "number", "the mean gap between arrivals, and so the offered load; with `process: "
            "poisson` or `replay`, where it is required", "hours", default_text="—", **POSITIVE),
        Key("source", "choice", "the bundled job trace a `replay` draws from (the Philly trace: Jeon et al., USENIX "
            "ATC 2019, CC BY 4.0); only with `process: replay`, where it is required", default_text="—",
            choices=bundled.job_traces),
    ),
    "trace": (
        Key("csv", "string", "the trace file (see below), relative to the folder of the scenario file that names it "
            "(the working directory for a dict)", default=REQUIRED, relative_path=True),
    ),
    "job_class": (
        Key("name", "string", "unique class name", default_text="`class-<i>`"),
        Key("weight", "number", "relative probability of drawing the class", default=1.0, **POSITIVE),
        _MODELS,
        _DATASETS,
        *SHAPE_KEYS,
    ),
    "model": (
        Key("name", "string", "the model's name", default_text="`model-<i>`"),
        Key("params_b", "number", "parameters", "billions", REQUIRED, **POSITIVE),
        Key("layers", "integer", "transformer layers", default=REQUIRED, **COUNT),
        Key("hidden", "integer", "hidden size", "h", REQUIRED, **COUNT),
    ),
    "dataset": (
        Key("name", "string", "the dataset's name", default=REQUIRED),
        Key("tokens", "number", "tokens per epoch", "tokens", REQUIRED, **POSITIVE),
    ),
    "randomize": (
        Key("bandwidth_scale", "range", "multiplies every inter-region capacity", default_text="none"),
        Key("gpu_scale", "range", "multiplies every region's GPU count (rounded, at least 1)", default_text="none"),
        Key("gpu_types", "names", "each region's GPU type, drawn uniformly per region from the list (catalog or `gpus` "
            "names). A mixed draw that leaves some job of the episode unplaceable is drawn again",
            default_text="none", choices=_gpus),
        Key("constant_price_prob", "number", "with this probability, every region's price and carbon intensity are "
            "held at their series' 2023 means for the episode: no hour ticks then, so a wait skips to the next arrival "
            "or completion (or the horizon)", "probability", default_text="none", **PROBABILITY),
        Key("num_jobs", "int_range", "the episode's job count, uniform; not with a trace", default_text="none"),
        Key("arrival_scale", "range", "multiplies the Poisson mean interarrival time; only with `process: poisson`",
            default_text="none"),
        Key("batch_arrival_prob", "number", "with this probability, every job arrives at t = 0 instead; only with "
            "`process: poisson`", "probability", default_text="none", **PROBABILITY),
        Key("one_f_one_b_prob", "number", "with this probability, every job of the episode accepts only 1F1B (the "
            "regime map's 1F1B-only worlds)", "probability", default_text="none", **PROBABILITY),
        Key("data_parallel", "int_range", "each job's data-parallel degree, a power of two drawn uniformly from those "
            "in the range. The job keeps its class's micro-batches per replica, so its global batch grows with the "
            "degree and its iterations shrink to keep its tokens. A job that cannot run in the episode's world with "
            "the drawn shape keeps its class's", "d", default_text="none"),
        Key("seq_len", "int_range", "each job's sequence length, a power of two drawn likewise (after the degree); "
            "its iterations shrink to keep its tokens", "s, tokens", default_text="none"),
    ),
    "objective": (
        Key("cost_weight", "number", "weight of cost against JCT in the reward", "", 1.0, **NON_NEGATIVE),
    ),
}

# Where each section stands in a file, as the docs' key paths write it.
SECTION_PATHS = {
    "top": "", "gpu": "gpus.<name>", "region": "regions[i]", "price_csv": "regions[i].price_csv",
    "network": "network", "link": "network.matrix.<src>.<dst>", "intra_region": "network.intra_region",
    "background": "network.background", "degradation": "network.degradation", "workload": "workload", "arrival": "workload.arrival",
    "trace": "workload.trace", "job_class": "workload.job_classes[i]", "model": "workload.models[i]",
    "dataset": "workload.datasets[i]", "randomize": "randomize", "objective": "objective", "failures": "failures",
    "capacity_loss": "capacity_loss",
}
# Columns of a trace CSV besides the shape columns (:func:`trace_columns`).
TRACE_JOB_COLUMNS = ("submit_time_s", "model", "dataset", "iterations")


def keys(section: str) -> tuple[str, ...]:
    """The key names a section allows, in file order."""
    return tuple(key.name for key in SECTIONS[section])


def key(section: str, name: str) -> Key:
    """The declaration of ``name`` in ``section``."""
    for declared in SECTIONS[section]:
        if declared.name == name:
            return declared
    raise KeyError(f"{section} has no key {name!r}")


def shape_key_names() -> tuple[str, ...]:
    return tuple(k.name for k in SHAPE_KEYS)


def trace_shape_columns() -> tuple[str, ...]:
    """The shape keys a trace row may set, as columns of those names."""
    return tuple(k.name for k in SHAPE_KEYS if k.trace_column)


def trace_columns() -> tuple[str, ...]:
    return (*TRACE_JOB_COLUMNS, *trace_shape_columns())


# ---------------------------------------------------------------------------------------------------------
# The docs' key table
# ---------------------------------------------------------------------------------------------------------


def _type_text(declared: Key) -> str:
    kind = declared.kind
    bounds = declared.range_text()
    if kind == "integer":
        return "int" + (f" {bounds}" if bounds else "")
    if kind == "number":
        return "number" + (f" {bounds}" if bounds else "")
    if kind == "const":
        return f"int, only {declared.default}"
    if kind == "choice":
        names = declared.choice_names()
        return " \\| ".join(f"`{n}`" for n in names) if len(names) <= 8 else f"one of {len(names)} names (below)"
    if kind == "choices":
        return "non-empty list of distinct " + ("schedule names" if declared.choices is _schedules else "names")
    if kind == "time":
        return 'ISO 8601 time on a whole hour, or `"random"`'
    if kind in ("range", "int_range"):
        return "`[low, high]`, " + ("integers >= 1" if kind == "int_range" else "0 < low <= high")
    if kind == "names":
        return "list of GPU names (" + ", ".join(f"`{n}`" for n in declared.choice_names()) + ", or `gpus` names)"
    if kind == "items":
        inline = "{" + ", ".join(keys(declared.keys)) + "}"
        if not declared.choices:
            return f"non-empty list of `{inline}`"
        return "list of catalog keys (" + ", ".join(f"`{n}`" for n in declared.choice_names()) + f") or `{inline}`"
    if kind in ("section", "entries", "matrix"):
        return "mapping `{" + ", ".join(keys(declared.keys)) + "}`" + (" per name" if kind == "entries" else "")
    return {"boolean": "bool", "string": "string"}[kind]


def _default_text(declared: Key) -> str:
    if declared.default_text:
        return declared.default_text
    if declared.required:
        return "**required**"
    if declared.default is None:
        return "none"
    if isinstance(declared.default, bool):
        return f"`{str(declared.default).lower()}`"
    if isinstance(declared.default, str):
        return f"`{declared.default}`"
    return f"{declared.default:g}"


def _where(section: str, declared: Key) -> str:
    places = []
    if section == "workload" and declared in SHAPE_KEYS:
        places.append("job class")
        if declared.trace_column:
            places.append("trace column")
    return ", ".join(places)


def key_table() -> str:
    """The key table of ``docs/scenarios.md``: one row per key, by section, from the declarations."""
    rows = ["| key | type and range | unit | default | also in | meaning |", "|---|---|---|---|---|---|"]
    skip = {("job_class", name) for name in (*shape_key_names(), "models", "datasets")}
    for section, declared_keys in SECTIONS.items():
        prefix = SECTION_PATHS[section]
        for declared in declared_keys:
            if (section, declared.name) in skip:
                continue  # written once, under workload
            path = f"{prefix}.{declared.name}" if prefix else declared.name
            meaning = declared.meaning + (f" (default: {declared.source})" if declared.source else "")
            rows.append(
                f"| `{path}` | {_type_text(declared)} | {declared.unit} | {_default_text(declared)} | "
                f"{_where(section, declared)} | {meaning} |"
            )
    return "\n".join(rows) + "\n"


if __name__ == "__main__":
    print(key_table(), end="")
